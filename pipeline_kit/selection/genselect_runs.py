"""GenSelect's files: the sampled runs it reads (the output-rs<seed>.jsonl of a folder, one problem's solutions
matched by `id`, or by line order when the records have none) and the picks it writes (for kit summarize)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from pipeline_kit.errors import UserError
from pipeline_kit.grading.extraction import extract_answer
from pipeline_kit.grading.grade import ADDED
from pipeline_kit.jsonl import numbered_records
from pipeline_kit.selection.genselect import Solution

RUN_NAME = re.compile(r"output-rs(\d+)\.jsonl")  # a finished sampled run (chunk files are not runs yet)
PICK_NAME = re.compile(r"output(?:-rs\d+)?\.jsonl")


def run_files(input_dir: str | Path) -> list[Path]:
    """The folder's output-rs<seed>.jsonl, by seed; a missing folder or one with no runs is an error."""
    folder = Path(input_dir)
    if not folder.is_dir():
        raise UserError(f"++input_dir={input_dir}: no such folder; give the folder that holds the output-rs*.jsonl.")
    runs = sorted((int(m[1]), p) for p in folder.iterdir() if (m := RUN_NAME.fullmatch(p.name)) and p.is_file())
    if not runs:
        raise UserError(
            f"++input_dir={input_dir}: no output-rs<seed>.jsonl in this folder; generate sampled runs first "
            "(kit generate --num_random_seeds=N)."
        )
    return [p for _, p in runs]


def runs_digest(input_dir: str | Path) -> str:
    """One content hash of every run (names and records, less the fields grading adds: grading a run in place, as
    kit select and kit summarize do, leaves GenSelect's picks valid): the input part of GenSelect's .done key."""

    h = hashlib.sha256()
    for path in run_files(input_dir):
        h.update(f"{path.name}\n".encode())
        with path.open() as f:
            for _, record in numbered_records(f, path):
                kept = {k: v for k, v in record.items() if k not in ADDED}
                h.update(json.dumps(kept, sort_keys=True).encode() + b"\n")
    return h.hexdigest()[:16]


def read_problems(input_dir: str | Path) -> list[tuple[int, list[Solution]]]:
    """(line number in the first run, its solutions in run order) per problem, in the first run's order."""

    files = run_files(input_dir)
    runs: list[list[tuple[int, dict]]] = []
    for path in files:
        with path.open() as f:
            records = list(numbered_records(f, path))
        for line_no, record in records:
            if not isinstance(record.get("generation"), str):
                raise UserError(f"{path}:{line_no}: no 'generation' text; GenSelect compares the runs' generations.")
        runs.append(records)
    by_id = all("id" in record for records in runs for _, record in records)
    aligned = _by_id(files, runs) if by_id else _by_order(files, runs)
    problems = []
    for first, *rest in aligned:
        line_no = first[0]
        solutions = []
        for path, (_, record) in zip(files, [first, *rest], strict=True):
            answer = (
                record["predicted_answer"] if "predicted_answer" in record else extract_answer(record["generation"])
            )
            solutions.append(Solution(path.name, record, answer))
        problems.append((line_no, solutions))
    return problems


def _by_id(files: list[Path], runs: list[list[tuple[int, dict]]]) -> list[list[tuple[int, dict]]]:
    first_ids = [str(r["id"]) for _, r in runs[0]]
    if len(set(first_ids)) != len(first_ids):
        raise UserError(f"{files[0]}: an id appears twice; each problem must be one record of every run.")
    indexed = []
    for path, records in zip(files, runs, strict=True):
        ids = {str(r["id"]): (n, r) for n, r in records}
        other = next((i for i in first_ids if i not in ids), None) or next((i for i in ids if i not in first_ids), None)
        if other is not None or len(ids) != len(records):
            raise UserError(
                f"{path} and {files[0]} hold other problems (id {other!r} is in only one, or an id repeats); "
                "GenSelect needs every run to answer the same problems."
            )
        indexed.append(ids)
    return [[ids[i] for ids in indexed] for i in first_ids]


def _by_order(files: list[Path], runs: list[list[tuple[int, dict]]]) -> list[list[tuple[int, dict]]]:
    for path, records in zip(files, runs, strict=True):
        if len(records) != len(runs[0]):
            raise UserError(
                f"{path} has {len(records)} records and {files[0]} {len(runs[0])}; without ids the runs are matched "
                "line by line, so they must have as many (give the records an 'id')."
            )
    return [list(row) for row in zip(*runs, strict=True)]


def read_picks(folder: str | Path) -> dict[str, dict[str, dict]]:
    """{output file name: {problem id: chosen record}} for every finished GenSelect output (output.jsonl and
    output-rs<seed>.jsonl with a .done) in `folder`: what kit summarize reports as the genselect mode."""
    picks: dict[str, dict[str, dict]] = {}
    for path in sorted(Path(folder).iterdir()):
        if not PICK_NAME.fullmatch(path.name) or not Path(f"{path}.done").exists():
            continue
        chosen = {}
        for line_no, record in numbered_records(path.read_text().splitlines(), path):
            if "genselect" not in record or "id" not in record:
                raise UserError(f"{path}:{line_no}: not a GenSelect record with id and genselect; rerun GenSelect.")
            chosen[str(record["id"])] = record
        picks[path.name] = chosen
    return picks
