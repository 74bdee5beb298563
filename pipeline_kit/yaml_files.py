"""Reading a user's YAML file (cluster configs, prompt configs, code tag sets): a syntax error is one UserError naming
the file and line."""

from __future__ import annotations

from pathlib import Path

import yaml

from pipeline_kit.errors import UserError


def read_yaml(path: Path) -> object:
    """The content of the YAML file at `path` (None when it is empty)."""
    try:
        return yaml.safe_load(path.read_text())
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = f" line {mark.line + 1}" if mark else ""
        raise UserError(
            f"{path}:{line} is not valid YAML ({getattr(e, 'problem', None) or e}); fix the syntax."
        ) from None
