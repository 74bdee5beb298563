"""What `kit prepare_data` records beside a benchmark's records (<split>.meta.json: its sources, row count and
fingerprint), and the check `kit eval` makes before it queues anything: the file still holds those rows."""

from __future__ import annotations

import json
import time
from pathlib import Path

from pipeline_kit import __version__
from pipeline_kit.atomic import write_atomic
from pipeline_kit.benchmarks.definition import Benchmark
from pipeline_kit.data_fingerprint import Fingerprint
from pipeline_kit.errors import UserError


def meta_path(data_file: Path) -> Path:
    """<data_dir>/NAME/<split>.meta.json beside <data_dir>/NAME/<split>.jsonl."""
    return data_file.with_name(f"{data_file.stem}.meta.json")


def pin_note(bench: Benchmark, got: Fingerprint) -> str | None:
    """None when `got` is the data the benchmark pins (its ROWS and FINGERPRINT, where it sets them), else one line
    that says how they differ."""
    rows_ok = bench.rows in (None, got.rows)
    print_ok = bench.fingerprint is None or got.matches(bench.fingerprint)
    if rows_ok and print_ok:
        return None
    pinned = [
        f"{bench.rows} rows" if bench.rows else "",
        f"fingerprint {bench.fingerprint[:12]}" if bench.fingerprint else "",
    ]
    return f"{got}, not the data kit pins for {bench.name} ({', '.join(filter(None, pinned))})"


def write_meta(bench: Benchmark, data_file: Path, got: Fingerprint, note: str | None) -> Path:
    """Record, atomically, what was prepared: written after the records, so a meta file names finished data."""
    st = data_file.stat()
    meta = {
        "benchmark": bench.name,
        "rows": got.rows,
        "fingerprint": got.digest,
        "file": {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns},  # unchanged since: no need to read it again
        "sources": [{"url": s.url, "revision": s.revision} for s in bench.sources] or "generated",
        "pinned": None if bench.fingerprint is None else note is None,  # note: pin_note's
        "license": bench.license,
        "prepared_by": f"pipeline-kit {__version__}",
        "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
    path = meta_path(data_file)
    write_atomic(path, json.dumps(meta, indent=2) + "\n")
    return path


def check_prepared(name: str, data_file: Path) -> Fingerprint | None:
    """The fingerprint of `data_file` when `kit prepare_data` recorded one beside it and the rows still match it
    (None without a record: a file made by hand or by an older kit); rows that no longer match are an error that
    names the file, both counts and both fingerprints. A file of the size and modification time recorded is taken
    as written (a stat, not a read: 0.2 s for MATH's 5,000 rows otherwise)."""
    meta_file = meta_path(data_file)
    if not meta_file.is_file():
        return None
    try:
        meta = json.loads(meta_file.read_text(encoding="utf-8"))
        recorded = Fingerprint(int(meta["rows"]), str(meta["fingerprint"]))
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UserError(
            f"{meta_file}: unreadable record of what `kit prepare_data` wrote ({e}); run `kit prepare_data {name}` "
            "again."
        ) from None
    try:
        st = data_file.stat()
        if meta.get("file") == {"bytes": st.st_size, "mtime_ns": st.st_mtime_ns}:
            return recorded
        now = Fingerprint.of_file(data_file)
    except (OSError, UserError):
        return None  # unreadable or no JSON: the generation's input check names the file and line, before the queue
    if now != recorded:
        raise UserError(
            f"{data_file} holds {now}, but `kit prepare_data` wrote {recorded} ({meta_file}): the file was edited "
            f"or cut off. Run `kit prepare_data {name}` again, or delete {meta_file.name} to evaluate the file as "
            "it is."
        )
    return now
