"""What `kit --version` prints: kit's version, where it is installed and the Python that runs it."""

from __future__ import annotations

import os
import sys

import pipeline_kit


def version_line() -> str:
    """`kit 0.1.0 (pipeline_kit in <folder>, Python 3.11.7)`: what a bug report needs."""
    python = ".".join(map(str, sys.version_info[:3]))
    return f"kit {pipeline_kit.__version__} (pipeline_kit in {os.path.dirname(pipeline_kit.__file__)}, Python {python})"
