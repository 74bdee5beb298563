"""The data folders that ship with kit (prompt configs, example cluster configs, the datasets registry, the recipes).

Their source of truth is the repo's top level (`prompts/`, `cluster_configs/`, `datasets_registry/`, `recipes/`). A
wheel (setup.py's build_py) and the packed code of an installed kit (launch/packaging.py) carry copies inside the
package, `pipeline_kit/<in-package name>/`; an editable install or a source checkout reads the top-level folders. Also where
kit keeps its own files for this user (`kit_home`)."""

from __future__ import annotations

import os
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
# top-level name -> its copy's name inside the package (the recipes' copy must not land on pipeline_kit/recipes/,
# the recipe machinery's package)
IN_PACKAGE = {
    "prompts": "prompts",
    "cluster_configs": "cluster_configs",
    "datasets_registry": "datasets_registry",
    "recipes": "bundled_recipes",
}
RESOURCE_NAMES = tuple(IN_PACKAGE)


def resource_dir(name: str) -> Path:
    """The folder of resource `name`: the package's own copy when it exists (wheel install, packed code), else
    the top-level folder of the source checkout the package sits in. The path may not exist (an optional folder
    that this install does not have)."""
    if name not in RESOURCE_NAMES:
        raise ValueError(f"unknown resource folder {name!r}; known: {', '.join(RESOURCE_NAMES)}")
    own = PACKAGE_DIR / IN_PACKAGE[name]
    if own.is_dir():
        return own
    checkout = PACKAGE_DIR.parent
    # Only a source checkout (pyproject.toml beside the package) falls back to its top level: an installed kit
    # never reads a same-named folder that another distribution put in site-packages.
    if (checkout / "pyproject.toml").is_file() and (checkout / name).is_dir():
        return checkout / name
    return own


def resource_dirs() -> dict[str, Path]:
    """Every resource folder this install has, by name."""
    return {name: d for name in RESOURCE_NAMES if (d := resource_dir(name)).is_dir()}


def kit_home() -> Path:
    """kit's own folder for this user (caches, job records, cluster configs): $KIT_HOME, else ~/.kit."""
    return Path(os.environ.get("KIT_HOME") or Path.home() / ".kit")
