"""Reading JSONL records with kit's errors: every non-blank line is one JSON object, and a bad line is a one-line
UserError naming the file and line. Shared by the generation input, training data and judge outputs."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator

from pipeline_kit.errors import UserError


def numbered_records(lines: Iterable[str], source: object) -> Iterator[tuple[int, dict]]:
    """(line number, record) for every non-blank line of `lines`, read from `source` (named in errors)."""
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{source}:{line_no}: not valid JSON ({e.msg}); fix or remove that line.") from None
        if not isinstance(record, dict):
            raise UserError(f"{source}:{line_no}: each line must be a JSON object, got {type(record).__name__}.")
        yield line_no, record
