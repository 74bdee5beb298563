"""The one registry style's lookup: a name of a package's literal mapping (name -> "module:attr"), or a user's own
plug-in written "package.module:attr", imported only when asked for. Unknown names are one line with suggestions."""

from __future__ import annotations

import importlib

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
