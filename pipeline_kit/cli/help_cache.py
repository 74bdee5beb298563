"""Caches the rendered `--help` texts under $KIT_HOME/cache, keyed by the CLI's source files, so `kit --help`
costs about a Python start-up once the text exists."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Callable
from pathlib import Path

_CLI_DIR = Path(__file__).resolve().parent
_SOURCE_DIRS = (_CLI_DIR, _CLI_DIR.parent / "recipes")


def kit_home() -> Path:
    return Path(os.environ.get("KIT_HOME") or Path.home() / ".kit")


def _path(argv: list[str]) -> Path:
    h = hashlib.sha1("\0".join(argv).encode())
    for folder in _SOURCE_DIRS:  # the CLI's modules and the recipes' (their flags are in the help)
        for entry in sorted(os.scandir(folder), key=lambda e: e.name):
            if not entry.name.endswith(".py"):
                continue
            st = entry.stat()
            h.update(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return kit_home() / "cache" / "help" / f"{h.hexdigest()}.txt"


def read(argv: list[str]) -> str | None:
    try:
        return _path(argv).read_text()
    except OSError:
        return None


def render_and_store(argv: list[str], render: Callable[[], object]) -> int:
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        result = render()
    text = buf.getvalue()
    print(text, end="")
    if result in (None, 0) and text:
        path = _path(argv)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text)
            tmp.replace(path)
        except OSError:
            pass  # a read-only home only costs speed
    return result if isinstance(result, int) else 0
