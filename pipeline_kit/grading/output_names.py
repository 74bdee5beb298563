"""The names of a generation's output files, which every reader of them takes from here: output.jsonl (greedy) and
output-rs{seed}.jsonl (sampled), merged from their chunk files (`*_chunk_{k}.jsonl`) when every chunk is done, the
files of an output not finished yet, and the plan of the last run into the folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

OUTPUT_GLOB = "output*.jsonl"  # every output file, chunk files included
OUTPUT_NAME = re.compile(r"output(?:-rs(\d+))?\.jsonl")  # a merged output; group 1: the seed of a sampled one
# what a generation leaves before its merged output exists: a chunk's file and the in-progress files of a chunk or of
# an unchunked output, kit's `.in-progress` or NeMo-Skills' `-async` (group 1: the seed, as in OUTPUT_NAME); merging
# removes the chunks, finishing removes the in-progress file
UNFINISHED_NAME = re.compile(
    r"output(?:-rs(\d+))?(?:_chunk_\d+\.jsonl(?:\.in-progress|-async)?|\.jsonl(?:\.in-progress|-async))"
)


def output_name(seed: int | None) -> str:
    """The merged output of `seed` (None: the greedy one)."""
    return "output.jsonl" if seed is None else f"output-rs{seed}.jsonl"


def seed_of(match: re.Match) -> int | None:
    """The seed an OUTPUT_NAME or UNFINISHED_NAME match names (None: the greedy output)."""
    return None if match.group(1) is None else int(match.group(1))


# written into an output folder when a run into it is submitted (where kit can see the folder): {"outputs": [the
# merged outputs it plans, done or not]}, so that a reader can name the outputs whose units never started
PLAN_NAME = ".kit-plan.json"


def plan_text(outputs: list[str]) -> str:
    return json.dumps({"outputs": sorted(outputs)}) + "\n"


def planned_outputs(folder: str | Path) -> list[str]:
    """The merged outputs the last run into `folder` planned (none without a readable plan)."""
    try:
        outputs = json.loads((Path(folder) / PLAN_NAME).read_text())["outputs"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [name for name in outputs if isinstance(name, str) and OUTPUT_NAME.fullmatch(name)]


def merged_outputs(folder: str | Path) -> list[Path]:
    """The merged outputs directly in `folder` (not chunks, not .tmp files), sorted; none when it is no folder."""
    folder = Path(folder)
    return sorted(p for p in folder.iterdir() if OUTPUT_NAME.fullmatch(p.name)) if folder.is_dir() else []
