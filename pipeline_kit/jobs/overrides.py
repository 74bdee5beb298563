"""Routing `++key=value` overrides when a command runs several inner scripts (eval: generation, then grading):
`++<script>.key=value` goes to that script, the rest to the default one; each part is checked before submission."""

from __future__ import annotations

from collections.abc import Callable

from pipeline_kit.errors import UserError, did_you_mean


def route_overrides(
    args: tuple[str, ...] | list[str],
    checkers: dict[str, Callable[[list[str]], object]],
    default: str,
) -> dict[str, list[str]]:
    """Split `args` by their first key part when it names a script in `checkers` (`++grade.tolerance=1e-6` →
    grade gets `++tolerance=1e-6`); everything else goes to `default`. Each script's part is passed to its checker
    (which raises UserError on an unknown key or a bad value). Returns each script's overrides."""
    if default not in checkers:
        raise ValueError(f"default script {default!r} has no checker")
    routed: dict[str, list[str]] = {name: [] for name in checkers}
    for arg in args:
        if not arg.startswith("++") or "=" not in arg:
            raise UserError(f"'{arg}' is not an override; write ++key=value.")
        key, _, value = arg[2:].partition("=")
        head, dot, rest = key.partition(".")
        if dot and head in checkers and head != default:
            routed[head].append(f"++{rest}={value}")
        else:
            routed[default].append(arg)
    for name, part in routed.items():
        try:
            checkers[name](part)
        except UserError as e:
            heads = {a[2:].split(".", 1)[0] for a in part if "." in a.split("=", 1)[0]}
            hint = next((did_you_mean(h, [n for n in checkers if n != default]) for h in sorted(heads)), "")
            raise UserError(f"{e}{' (a script prefix?)' + hint if hint else ''}") from None
    return routed
