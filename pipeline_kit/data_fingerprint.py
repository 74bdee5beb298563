"""The fingerprint of a benchmark's rows: a digest over each row's id, problem and expected answer that ignores the
rows' order, with the row count. `kit prepare_data` records it, `kit eval` checks the prepared file against it and
`kit summarize` shows the fingerprint of the rows each result ran on. A leaf: imports only jsonl."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pipeline_kit.jsonl import numbered_records

SHOWN = 12  # hex characters of a fingerprint in tables and messages


def row_digest(row_id, problem, expected_answer) -> bytes:
    """One row's digest: of its id, problem and expected answer as strings (a missing one as null)."""
    fields = [None if v is None else str(v) for v in (row_id, problem, expected_answer)]
    return hashlib.blake2b(json.dumps(fields, ensure_ascii=False).encode(), digest_size=16).digest()


@dataclass(frozen=True)
class Fingerprint:
    """`rows` rows whose sorted row digests hash to `digest` (64 hex characters)."""

    rows: int
    digest: str

    @classmethod
    def of_digests(cls, digests: Iterable[bytes]) -> Fingerprint:
        ordered = sorted(digests)
        return cls(len(ordered), hashlib.sha256(b"".join(ordered)).hexdigest())

    @classmethod
    def of_records(cls, records: Iterable[dict]) -> Fingerprint:
        return cls.of_digests(row_digest(r.get("id"), r.get("problem"), r.get("expected_answer")) for r in records)

    @classmethod
    def of_file(cls, path: str | Path) -> Fingerprint:
        """Of a JSONL file's records; a line that is no JSON object is a UserError naming it (jsonl.py)."""
        with open(path, encoding="utf-8") as f:
            return cls.of_records(record for _, record in numbered_records(f, path))

    @property
    def short(self) -> str:
        return self.digest[:SHOWN]

    def matches(self, known: str) -> bool:
        """Whether `known` (a full digest or a prefix of at least SHOWN characters) names this fingerprint."""
        return len(known) >= SHOWN and self.digest.startswith(known.lower())

    def __str__(self) -> str:
        return f"{self.rows} rows, fingerprint {self.short}"
