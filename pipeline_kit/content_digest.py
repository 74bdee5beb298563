"""The one content digest of what kit skips once it is done (generation `.done` keys, recipe stages): a file's bytes
(sha256, streamed) and a folder's files over their sorted relative paths. Each file's digest is cached by its
absolute path, size, mtime_ns and ctime_ns in a small JSON file, so that a rerun costs a stat per file, not a read.
A leaf: imports only atomic and errors."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError

CACHE_VAR = "KIT_DIGEST_CACHE"  # the cache file [default: $XDG_CACHE_HOME/pipeline_kit/digests.json, ~/.cache/...]
DIGEST_LENGTH = 16  # hex characters kept: enough to tell settings apart, short in a .done
MAX_CACHED = 20_000  # files (a model folder holds tens); beyond it the least recently hashed go
_BLOCK = 1 << 20
T = TypeVar("T")


def cache_file() -> Path:
    if os.environ.get(CACHE_VAR):
        return Path(os.environ[CACHE_VAR])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "pipeline_kit" / "digests.json"


class _Cache:
    """{absolute path: [size, mtime_ns, ctime_ns, digest]}, read once per process, merged and written back atomically
    after each digest that hashed something. A cache that cannot be read or written only costs reads."""

    def __init__(self) -> None:
        self.path: Path | None = None
        self.entries: dict[str, list] = {}
        self.added: dict[str, list] = {}

    def load(self) -> None:
        path = cache_file()
        if path != self.path:
            self.path, self.entries, self.added = path, _read_cache(path), {}

    def get(self, path: str, stat: os.stat_result) -> str | None:
        entry = self.entries.get(path)
        return entry[3] if entry is not None and entry[:3] == _stamp(stat) else None

    def put(self, path: str, stat: os.stat_result, digest: str) -> None:
        self.entries[path] = self.added[path] = [*_stamp(stat), digest]

    def save(self) -> None:
        if not self.added or self.path is None:
            return
        # another process's entries are kept; this one's go last, so that the oldest are the first to go
        merged = {k: v for k, v in _read_cache(self.path).items() if k not in self.added} | self.added
        if len(merged) > MAX_CACHED:
            merged = dict(list(merged.items())[-MAX_CACHED:])
        try:
            write_atomic(self.path, json.dumps(merged) + "\n")
        except OSError:
            pass  # a read-only home: the next run hashes again
        self.entries, self.added = merged, {}


def _stamp(stat: os.stat_result) -> list[int]:
    # ctime too: a file rewritten with the same size and its old mtime restored (cp -p, rsync -a) still differs
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def _read_cache(path: Path) -> dict[str, list]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


_CACHE = _Cache()


def hash_bytes(path: Path) -> str:
    """The file's sha256, read in blocks (never whole into memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(_BLOCK), b""):
            h.update(block)
    return h.hexdigest()[:DIGEST_LENGTH]


def _cached_file_digest(path: Path) -> str:
    absolute = os.path.abspath(path)
    stat = os.stat(absolute)
    digest = _CACHE.get(absolute, stat)
    if digest is None:
        digest = hash_bytes(Path(absolute))
        _CACHE.put(absolute, stat, digest)
    return digest


def known_file_digest(path: str | Path) -> str | None:
    """A file's digest if the cache has it for the file as it is now (a stat, no read), else None."""
    _CACHE.load()
    absolute = os.path.abspath(path)
    try:
        return _CACHE.get(absolute, os.stat(absolute))
    except OSError:
        return None


def digested_lines(path: str | Path, consume: Callable[[Iterator[bytes]], T]) -> tuple[str, T]:
    """`consume(lines)` over the file's lines (bytes) while they are hashed: one read gives both the file's digest
    (cached as file_digest's) and what `consume` returns. An error of `consume` propagates (nothing is cached)."""
    absolute = os.path.abspath(path)
    h = hashlib.sha256()

    def lines(f) -> Iterator[bytes]:
        for line in f:
            h.update(line)
            yield line

    _CACHE.load()
    with open(absolute, "rb") as f:
        stat = os.fstat(f.fileno())
        result = consume(lines(f))
        for block in iter(lambda: f.read(_BLOCK), b""):  # what `consume` left unread
            h.update(block)
    digest = h.hexdigest()[:DIGEST_LENGTH]
    if _stamp(os.stat(absolute)) == _stamp(stat):  # not rewritten while it was read
        _CACHE.put(absolute, stat, digest)
        _CACHE.save()
    return digest, result


def file_digest(path: str | Path, what: str = "") -> str:
    """A file's content digest; `what` (e.g. '++input_file=') prefixes the path in the error when it cannot be read."""
    _CACHE.load()
    try:
        return _cached_file_digest(Path(path))
    except OSError as e:
        raise UserError(f"{what}{path}: cannot read it ({e.strerror}).") from None
    finally:
        _CACHE.save()


def folder_digest(path: str | Path, what: str = "") -> str:
    """The digest of every file under a folder: each one's relative path and content digest, in sorted order (an
    empty folder has one too)."""
    folder = Path(path)
    _CACHE.load()
    h = hashlib.sha256()
    try:
        for file in sorted(p for p in folder.rglob("*") if p.is_file()):
            h.update(f"{file.relative_to(folder).as_posix()}\0{_cached_file_digest(file)}\n".encode())
    except OSError as e:
        raise UserError(f"{what}{path}: cannot read {e.filename or 'it'} ({e.strerror}).") from None
    finally:
        _CACHE.save()
    return h.hexdigest()[:DIGEST_LENGTH]


def path_digest(path: str | Path, what: str = "") -> str | None:
    """A file's or a folder's digest; None when there is nothing at `path` here (a path of another machine)."""
    p = Path(path)
    if p.is_file():
        return file_digest(p, what)
    if p.is_dir():
        return folder_digest(p, what)
    return None
