"""Launch benchmarks time kit's processes as a user's shell starts them: with Python's bytecode cache.

A harness that sets PYTHONDONTWRITEBYTECODE (this VM's shell does) leaves kit's editable sources without .pyc files,
and every `kit` process then compiles ~70 modules again: 0.15 s more CPU per command (perf/README.md, part 3)."""

from __future__ import annotations

import os


def enable() -> None:
    """This process's children (the timed commands; the benchmarks' warm-up runs write the cache) write .pyc files."""
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
