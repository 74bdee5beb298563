"""The one registry style's lookup: a name of a package's literal mapping (name -> "module:attr"), or a user's own
plug-in written "package.module:attr", imported only when asked for (unknown names: one line with suggestions); and
the import of a user's Python file (a benchmark module, a recipe's pipeline file)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

from pipeline_kit.errors import UserError, did_you_mean


def load(name: str, registry: dict[str, str], flag: str, plural: str) -> object:
    """The object NAME stands for: `registry[name]`, or `name` itself when it is written module:attr. `flag` (e.g.
    '++generation_type') and `plural` ('generation types') word the errors."""
    if name in registry:
        target = registry[name]
    elif ":" in name:
        target = name
    else:
        raise UserError(
            f"{flag}={name} is not one of {', '.join(registry)}.{did_you_mean(name, list(registry))} (Other "
            f"{plural}: {flag}=package.module:Class, importable where kit runs.)"
        )
    module, _, attr = target.partition(":")
    try:
        loaded = importlib.import_module(module)
    except ImportError as e:
        raise UserError(f"{flag}={name}: cannot import {module} ({type(e).__name__}: {e}); check the name.") from None
    if not hasattr(loaded, attr):
        raise UserError(f"{flag}={name}: module {module} has no '{attr}'; check the name.")
    return getattr(loaded, attr)


def import_file(module_name: str, path: Path, what: str) -> ModuleType:
    """The Python file PATH imported as module MODULE_NAME and registered in sys.modules (dataclasses and typer look
    annotations up there; a package's `__init__.py` can import its siblings); taken out again if it fails. `what`
    ('benchmark module', 'recipe file') words the error for a file Python cannot load."""
    package = [str(path.parent)] if path.name == "__init__.py" else None
    spec = importlib.util.spec_from_file_location(module_name, path, submodule_search_locations=package)
    if spec is None or spec.loader is None:
        raise UserError(f"{path}: this {what} cannot be imported as a Python module; give a .py file.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    return module
