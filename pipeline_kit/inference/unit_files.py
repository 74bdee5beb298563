"""The files of one generation unit: the input chunk, the in-progress file that makes a killed run resumable, the
final file and its .done marker, and the merge of chunk files (by whichever chunk finishes last, under a lock)."""

from __future__ import annotations

import fcntl
import json
import math
import os
import shutil
from pathlib import Path

from pipeline_kit.atomic import open_atomic, write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.inference.done_key import check_chunk_keys, done_marker, write_done
from pipeline_kit.jsonl import numbered_records

POSITION_KEY = "_kit_position"  # a sample's index in its input chunk, kept only in the in-progress file
FAILED_KEY = "_kit_failed"  # on a failed sample's line of the in-progress file (the server refused its request)


def in_progress_file(path: str | Path) -> Path:
    return Path(f"{path}.in-progress")


def chunk_file(final: str | Path, chunk_id: int) -> Path:
    p = Path(final)
    return p.with_name(f"{p.stem}_chunk_{chunk_id}{p.suffix}")


def merged_file(chunk_path: str | Path, chunk_id: int) -> Path:
    p = Path(chunk_path)
    suffix = f"_chunk_{chunk_id}"
    if not p.stem.endswith(suffix):
        raise UserError(f"++output_file={p} does not end in {suffix}{p.suffix}, as chunk {chunk_id}'s file must.")
    return p.with_name(p.stem.removesuffix(suffix) + p.suffix)


def read_input(
    path: str, chunk_id: int | None, num_chunks: int | None, max_samples: int = -1
) -> list[tuple[int, dict]]:
    """(line number, record) for this unit's chunk: contiguous slices of ceil(n / num_chunks) records, n the first
    `max_samples` records (-1: all)."""
    try:
        with open(path) as f:
            rows = list(numbered_records(f, path))
    except OSError as e:
        raise UserError(f"++input_file={path}: cannot read it ({e.strerror}).") from None
    return chunk_of(rows if max_samples < 0 else rows[:max_samples], chunk_id, num_chunks)


def chunk_of(rows: list, chunk_id: int | None, num_chunks: int | None) -> list:
    """This unit's chunk of `rows`: contiguous slices of ceil(n / num_chunks) (all of them without chunks)."""
    if num_chunks is None:
        return rows
    if chunk_id is None or not 0 <= chunk_id < num_chunks:
        raise UserError(f"++chunk_id={chunk_id} must be in 0..{num_chunks - 1} when ++num_chunks={num_chunks}.")
    size = math.ceil(len(rows) / num_chunks)
    return rows[chunk_id * size : (chunk_id + 1) * size]


class InProgress:
    """Finished samples, appended one JSON line each as they complete. On open, a torn last line (the process was
    killed mid-write) is dropped, so appends start on a clean line, and so are failed samples (the server refused
    their request, see refusals.py), so that they are requested again. It keeps no sample's text in memory: `lines`
    maps each finished sample's position to where its line lies in the file, and `finish` copies the lines into
    the final file in input order, one at a time (a chunk of 32k-token samples is tens of MiB of text)."""

    def __init__(self, final: str | Path):
        self.path = in_progress_file(final)
        self.lines: dict[int, tuple[int, int, bool]] = {}  # position -> (offset, length, failed) of its line
        self._size = 0
        if self.path.exists():
            with open(self.path, "rb") as old, open_atomic(self.path, "wb") as kept:
                for line in old:
                    try:
                        sample = json.loads(line)
                        position = sample[POSITION_KEY]
                    except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError):
                        continue
                    if sample.get(FAILED_KEY) or not line.endswith(b"\n"):  # only failed samples have the key
                        continue
                    self.lines[position] = (self._size, len(line), False)
                    kept.write(line)
                    self._size += len(line)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)

    def add(self, position: int, sample: dict, failed: bool = False) -> None:
        """Append one sample's line. A line the disk has no room for is cut off again (the OSError names the file),
        so the file ends on a whole line and the sample counts as not done."""
        sample = {POSITION_KEY: position, **({FAILED_KEY: True} if failed else {}), **sample}
        data = (json.dumps(sample, ensure_ascii=False) + "\n").encode()
        written = 0
        try:
            while written < len(data):  # one write (O_APPEND); a full disk takes what fits, then refuses the rest
                written += os.write(self._fd, data[written:])
        except OSError as e:
            if written:
                os.ftruncate(self._fd, os.fstat(self._fd).st_size - written)
            e.filename = str(self.path)
            raise
        self.lines[position] = (self._size, len(data), failed)
        self._size += len(data)

    def finish(self, final: str | Path, count: int, key: dict[str, object]) -> None:
        """Write the final file in input order, then its .done marker (with `key`), then drop the in-progress file.
        With failed samples the final file is written (their `error` shows there) but not
        marked done, and the in-progress file stays: a rerun requests only those samples."""
        self.close()
        with open(self.path, "rb") as src, open_atomic(final) as out:
            for i in range(count):
                offset, length, _ = self.lines[i]
                src.seek(offset)
                sample = json.loads(src.read(length))
                out.write(
                    json.dumps({k: v for k, v in sample.items() if k not in (POSITION_KEY, FAILED_KEY)},
                               ensure_ascii=False) + "\n"
                )  # fmt: skip
        if not any(self.lines[i][2] for i in range(count)):
            write_done(final, key)
            self.path.unlink(missing_ok=True)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def merge_chunks(final: Path, num_chunks: int, key: dict[str, object]) -> bool:
    """Concatenate every chunk file into `final` once all are done (its .done gets `key`, the chunks' key less the
    chunk id). Returns True for the one caller that merged."""
    lock_path = Path(f"{final}.lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done_marker(final).exists():  # merged by a chunk that finished at the same time, whose lock file this
            lock_path.unlink(missing_ok=True)  # open made again: the merge is over, no one waits on it
            return False
        chunks = [chunk_file(final, k) for k in range(num_chunks)]
        if not all(done_marker(c).exists() for c in chunks):
            return False
        check_chunk_keys(chunks, key)
        with open_atomic(final, "wb") as out:  # one chunk's block at a time, not all of them in memory
            for c in chunks:
                with open(c, "rb") as src:
                    shutil.copyfileobj(src, out)
        write_done(final, key)
        for c in chunks:
            c.unlink(missing_ok=True)
            done_marker(c).unlink(missing_ok=True)
    lock_path.unlink(missing_ok=True)
    return True


def split_merged(final: Path, num_chunks: int, key: dict[str, object]) -> None:
    """Undo a merge so that one chunk can be redone: every chunk file (and .done, with `key` plus its chunk id) is
    cut back out of `final`, with the same slices as `read_input`; `final` loses its .done until merged again."""
    lock_path = Path(f"{final}.lock")
    with open(lock_path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done_marker(final).exists():
            return
        lines = final.read_text().splitlines(keepends=True)
        size = math.ceil(len(lines) / num_chunks)
        for k in range(num_chunks):
            write_atomic(chunk_file(final, k), "".join(lines[k * size : (k + 1) * size]))
            write_done(chunk_file(final, k), {**key, "chunk_id": k})
        done_marker(final).unlink()
