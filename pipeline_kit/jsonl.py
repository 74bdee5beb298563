"""Reading JSONL records with kit's errors: every non-blank line is one JSON object, and a bad line is a one-line
UserError naming the file and line. Shared by the generation input, training data, judge outputs and the recipes'
file steps (read_jsonl / write_jsonl: a whole file, written atomically)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError


def numbered_records(lines: Iterable[str], source: object, start: int = 1) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every non-blank line of `lines`, read from `source` (named in errors); the first
    line is line `start`."""
    for line_no, line in enumerate(lines, start):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{source}:{line_no}: not valid JSON ({e.msg}); fix or remove that line.") from None
        if not isinstance(record, dict):
            raise UserError(f"{source}:{line_no}: each line must be a JSON object, got {type(record).__name__}.")
        yield line_no, record


def read_jsonl(path: str | Path) -> list[tuple[int, dict]]:
    """(line number, record) of every record of the file; an unreadable file is one UserError naming it."""
    try:
        with open(path, encoding="utf-8") as f:
            return list(numbered_records(f, path))
    except (OSError, UnicodeDecodeError) as e:
        why = e.strerror if isinstance(e, OSError) else "not UTF-8 text"
        raise UserError(f"{path}: cannot read it ({why}); did the step that writes it finish?") from None


def write_jsonl(path: str | Path, records: Iterable[dict]) -> None:
    """The records as JSONL, written atomically (its folder made when missing)."""

    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
