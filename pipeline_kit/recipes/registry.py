"""Loads a recipe for `kit run_recipe`: a name in RECIPES (a bundled pipeline file), a path to a pipeline file, or a
dotted module name. A recipe module defines `Params` (a dataclass of typer options, its flags) and
`stages(cluster, params) -> list[Stage]`; its docstring's first line is its help."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from pipeline_kit import plugins
from pipeline_kit.errors import UserError, did_you_mean
from pipeline_kit.recipes import RECIPES, is_user_recipe
from pipeline_kit.resources import resource_dir


@dataclass(frozen=True)
class Recipe:
    """`name` keys its stages (and names its jobs); `module` is the loaded pipeline file or module."""

    name: str
    module: ModuleType

    @property
    def help(self) -> str:
        return (self.module.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")


def bundled_path(name: str) -> Path:
    return resource_dir("recipes") / RECIPES[name]


def load_recipe(ref: str) -> Recipe:
    """RECIPES' name, a pipeline file (`path/to/pipeline.py`: named after its folder when the file is pipeline.py,
    else after the file) or a module (`my_pkg.my_recipe`: named after its last part)."""
    if ref in RECIPES:
        return Recipe(ref, _load_file(ref, bundled_path(ref)))
    if not is_user_recipe(ref):
        known = ", ".join(RECIPES)
        raise UserError(
            f"unknown recipe '{ref}'.{did_you_mean(ref, list(RECIPES))} Known: {known}; or give your own as "
            "path/to/pipeline.py or my_pkg.my_module."
        )
    if ref.endswith(".py") or "/" in ref:
        path = Path(ref).expanduser().resolve()
        if not path.is_file():
            raise UserError(f"recipe file {ref} does not exist; give the path to a pipeline .py file.")
        name = path.parent.name if path.stem == "pipeline" else path.stem
        return Recipe(name, _load_file(name, path))
    try:
        module = importlib.import_module(ref)
    except ImportError as e:
        raise UserError(
            f"recipe module {ref} cannot be imported ({e}); check the name and that it is on sys.path."
        ) from None
    return Recipe(ref.rsplit(".", 1)[-1], _checked(ref, module))


def _load_file(name: str, path: Path) -> ModuleType:
    """The pipeline file as module `kit_recipe_<name>`, registered in sys.modules (typer and dataclasses look its
    annotations up there)."""
    module_name = f"kit_recipe_{name}"
    if module_name in sys.modules and getattr(sys.modules[module_name], "__file__", None) == str(path):
        return sys.modules[module_name]
    module = plugins.import_file(module_name, path, "recipe file")
    return _checked(str(path), module)


def _checked(where: str, module: ModuleType) -> ModuleType:
    missing = [attr for attr in ("Params", "stages") if not hasattr(module, attr)]
    if missing:
        raise UserError(
            f"recipe {where} defines no {' or '.join(missing)}; a recipe needs a `Params` dataclass (its flags) and "
            "`stages(cluster, params) -> list[Stage]`."
        )
    return module
