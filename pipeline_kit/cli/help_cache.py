"""Caches the rendered `--help` texts under $KIT_HOME/cache, keyed by the CLI's source files, so `kit --help`
costs about a Python start-up once the text exists."""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Callable
from pathlib import Path

from pipeline_kit.resources import kit_home

_CLI_DIR = Path(__file__).resolve().parent
_SOURCE_DIRS = (_CLI_DIR, _CLI_DIR.parent / "recipes")


def _source_files() -> list[os.DirEntry | Path]:
    """The CLI's modules, the recipe machinery's and the bundled recipes' pipeline files (their flags are in the
    help)."""
    from pipeline_kit.recipes import RECIPES
    from pipeline_kit.resources import resource_dir

    files: list[os.DirEntry | Path] = []
    for folder in _SOURCE_DIRS:
        files += sorted((e for e in os.scandir(folder) if e.name.endswith(".py")), key=lambda e: e.name)
    recipes = resource_dir("recipes")
    return files + [recipes / rel for rel in RECIPES.values()]


def cacheable(argv: list[str]) -> bool:
    """Not a user's own recipe (`kit run_recipe path/to/pipeline.py --help`): its file is not among the sources."""
    from pipeline_kit.recipes import is_user_recipe

    return not (len(argv) > 1 and argv[0] == "run_recipe" and is_user_recipe(argv[1]))


def _path(argv: list[str]) -> Path:
    h = hashlib.sha1("\0".join(argv).encode())
    for entry in _source_files():
        try:
            st = entry.stat()
        except OSError:
            continue  # a bundled recipe this install lacks: `kit run_recipe` says so
        h.update(f"{entry.name}:{st.st_size}:{st.st_mtime_ns}".encode())
    return kit_home() / "cache" / "help" / f"{h.hexdigest()}.txt"


def read(argv: list[str]) -> str | None:
    if not cacheable(argv):
        return None
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
    if result in (None, 0) and text and cacheable(argv):
        path = _path(argv)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(text)
            tmp.replace(path)
        except OSError:
            pass  # a read-only home only costs speed
    return result if isinstance(result, int) else 0
