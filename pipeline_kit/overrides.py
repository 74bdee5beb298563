"""The one `++key=value` grammar (hydra-core's override grammar, imported only when a value needs it): parsing into a
typed dataclass with nested keys, checking at submission, quoting values, routing parts to inner scripts, and the
one-line errors that name the key with a did-you-mean. Every script's and command's overrides go through here."""

from __future__ import annotations

import re
import shlex
import types
import typing
from collections.abc import Callable
from dataclasses import fields, is_dataclass

from pipeline_kit.errors import UserError, closest, did_you_mean

MISSING = "???"  # omegaconf's marker for a required value: a schema's required fields default to it


def is_override(arg: str) -> bool:
    """Whether a command-line argument is written `++key=value` (a non-empty key)."""
    return arg.startswith("++") and "=" in arg and len(arg.split("=", 1)[0]) > 2


def override_key(arg: str) -> str:
    """The key of `++key=value` (also of `+key=value` and `key=value`)."""
    return _bare(arg).partition("=")[0]


def _bare(arg: str) -> str:
    return arg.removeprefix("++").removeprefix("+")


def override_value(value: str) -> str:
    """`value` as a quoted string of the override grammar, read back unchanged: quotes and trailing backslashes are
    escaped, and so is `${`, which OmegaConf would take for an interpolation (shell commands use it)."""
    value = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value)
    value = re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", value)
    return "'" + value.replace("'", "\\'") + "'"


def override_text(value: str) -> str:
    """`value` as an override value: bare when the grammar reads it back unchanged, else quoted (override_value)."""
    return value if value and _SIMPLE.match(value) else override_value(value)


def parse_overrides(args: list[str] | tuple[str, ...], schema: type, what: str, complete: bool = True):
    """`++a.b=value` (also `a.b=value` and `+a.b=value`) → an instance of `schema` (a dataclass whose required
    fields default to MISSING), checked key by key; `what` (e.g. 'generation') starts each error. With
    `complete=False` only the given overrides are checked (required keys may be missing) and None is returned.
    Plain values of typed fields are set without hydra (`_plain_config`: the same object, a quarter of a second
    sooner, as a done rerun's keys need it); anything else goes through hydra's grammar and OmegaConf."""
    if complete:
        plain = _plain_config(args, schema, what)
        if plain is not None:
            return plain
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    cfg = OmegaConf.structured(schema)
    try:
        overrides = OverridesParser.create().parse_overrides([_bare(a) for a in args])
    except OverrideParseException as e:
        raise UserError(f"{what}: cannot parse override ({str(e).splitlines()[0]}); write ++key=value.") from None
    for override in overrides:
        key = override.key_or_group
        _check_key(key, what, schema)
        try:
            OmegaConf.update(cfg, key, override.value(), merge=True)
        except OmegaConfBaseException as e:
            raise UserError(f"{what}: ++{key}={override.input_line.split('=', 1)[1]}: {_first_line(e)}") from None
    if not complete:
        return None
    try:
        parsed = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", "") or "?"
        raise UserError(f"{what}: ++{key} is required; pass it (e.g. ++{key}=...).") from None
    return parsed


_SIMPLE = re.compile(r"^[A-Za-z0-9_./:@+-]*$")  # a value that needs no quoting in hydra's grammar
# what hydra's grammar reads as a number, a bool or null rather than a string (the rest of a plain value is a string)
_INT = re.compile(r"^[+-]?(0|[1-9](_?[0-9])*)$")
_FLOAT = re.compile(r"^[+-]?(([0-9](_?[0-9])*)?\.[0-9](_?[0-9])*|[0-9](_?[0-9])*\.?)([eE][+-]?[0-9](_?[0-9])*)?$")
_QUOTED = re.compile(r"^'([^'\\$]*)'$")  # a quoted string without escapes or interpolations
_LIST = re.compile(r"^\[([A-Za-z0-9_./:@+-]+(?:,[A-Za-z0-9_./:@+-]+)*)?\]$")
_NOT_A_STRING = re.compile(r"^([+-]?(inf|nan)|true|false|null)$", re.IGNORECASE)


def _plain_config(args, schema: type, what: str):
    """`schema` built directly from overrides that are all plain (`_SIMPLE`) values of scalar fields of nested
    dataclasses, each read as hydra and OmegaConf would (a string that hydra reads as a string; an int, a float,
    a bool, null where the field takes it). None when any override, or a required key left unset, needs the full
    path (which then gives its error). tests/test_overrides.py holds both paths to the same objects."""
    values: dict[tuple[str, ...], object] = {}
    for arg in args:
        key, sep, text = _bare(arg).partition("=")
        quoted, listed = _QUOTED.match(text), _LIST.match(text)
        if not sep or not (_SIMPLE.match(text) or quoted or listed):
            return None
        _check_key(key, what, schema)
        node: type = schema
        *parents, leaf = key.split(".")
        for part in parents:
            node = typing.get_type_hints(node)[part]
            if not is_dataclass(node):
                return None
        annotation = typing.get_type_hints(node)[leaf]
        if quoted:  # a quoted string is a string (kit quotes paths so: override_value)
            value = quoted[1] if _only_strings(annotation) else _UNSETTLED
        elif listed:  # a list of strings, as kit gives a job its units: ++units=[rs0_chunk_1,rs1_chunk_1]
            value = _plain_list(annotation, listed[1])
        else:
            value = _plain_value(annotation, text)
        if value is _UNSETTLED:
            return None
        values[tuple(key.split("."))] = value
    return _build(schema, values, ())


_UNSETTLED = object()


def _plain_value(annotation: object, text: str) -> object:
    options = _options(annotation)
    if text.lower() == "null":
        return None if type(None) in options else _UNSETTLED
    if str in options:  # a string only where hydra reads one (else OmegaConf would turn e.g. 1e-5 into '1e-05')
        stringy = not (_INT.match(text) or _FLOAT.match(text) or _NOT_A_STRING.match(text))
        return text if stringy and _only_strings(annotation) else _UNSETTLED
    if bool in options:
        return text.lower() == "true" if text.lower() in ("true", "false") else _UNSETTLED
    if int in options and _INT.match(text):
        return int(text)
    if float in options and (_INT.match(text) or _FLOAT.match(text)):
        return float(text)
    return _UNSETTLED


def _plain_list(annotation: object, items: str | None) -> object:
    """A list[str] field's value from the items of `[a,b]`, each one a string to hydra; else _UNSETTLED."""
    options = _options(annotation)
    if list[str] not in options or not set(options) <= {list[str], type(None)}:
        return _UNSETTLED
    values = items.split(",") if items else []
    if any(_INT.match(v) or _FLOAT.match(v) or _NOT_A_STRING.match(v) for v in values):
        return _UNSETTLED
    return values


def _only_strings(annotation: object) -> bool:
    options = _options(annotation)
    return str in options and set(options) <= {str, type(None)}


def _build(schema: type, values: dict[tuple[str, ...], object], path: tuple[str, ...]):
    kwargs = {}
    for f in fields(schema):
        if not f.init:
            return None
        here = (*path, f.name)
        default = f.default_factory() if callable(f.default_factory) else f.default
        if is_dataclass(default):
            kwargs[f.name] = _build(type(default), values, here)
            if kwargs[f.name] is None:
                return None
        elif here in values:
            kwargs[f.name] = values[here]
        elif default == MISSING:
            return None  # a required key: the full path names it
        else:
            kwargs[f.name] = default
    return schema(**kwargs)


def take_override(args: tuple[str, ...] | list[str], key: str) -> tuple[str | None, tuple[str, ...]]:
    """The value of the last `++key=value` in `args` (as the script would read it) and the other arguments."""
    ours = [a for a in args if override_key(a) == key]
    rest = tuple(a for a in args if a not in ours)
    if not ours:
        return None, rest
    raw = ours[-1].partition("=")[2]
    if _SIMPLE.match(raw):
        return raw, rest
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        return str(OverridesParser.create().parse_override(_bare(ours[-1])).value()), rest
    except OverrideParseException as e:
        raise UserError(f"cannot parse {ours[-1]} ({str(e).splitlines()[0]}); write ++{key}=value.") from None


def check_overrides(args: list[str] | tuple[str, ...], schema: type, what: str) -> None:
    """The check at submission, without importing hydra (a quarter of a second) in the common case: every key
    exists (with a did-you-mean) and each plain value fits its field's type. An override this does not settle
    (lists, quoted strings, a value that does not fit) goes through `parse_overrides`, which gives the error."""

    for arg in args:
        key, sep, value = _bare(arg).partition("=")
        if not sep or not _SIMPLE.match(value):
            parse_overrides(args, schema, what, complete=False)
            return
        _check_key(key, what, schema)
        node: type = schema
        *parents, leaf = key.split(".")
        for part in parents:
            node = typing.get_type_hints(node)[part]
            if not is_dataclass(node):  # a key of a free mapping: OmegaConf types its value
                parse_overrides(args, schema, what, complete=False)
                return
        if not _fits(typing.get_type_hints(node)[leaf], value):
            parse_overrides(args, schema, what, complete=False)
            return


def _options(annotation: object) -> tuple:
    """The types a field takes: each member of `A | B`, else the annotation itself."""
    return typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)


def _fits(annotation: object, value: str) -> bool:
    """Whether a plain override value converts to the field's type as OmegaConf would."""

    options = _options(annotation)
    if value == "null":
        return type(None) in options
    for option in options:
        if option is str or (option is bool and value.lower() in ("true", "false")):
            return True
        if option in (int, float):
            try:
                option(value)
                return True
            except ValueError:
                continue
    return False


def _check_key(key: str, what: str, schema: type) -> None:
    node: type = schema
    path = []
    for part in key.split("."):
        names = [f.name for f in fields(node)]
        if part not in names:
            prefix = ".".join(path)
            best = _closest_key(key, dotted_keys(schema))
            hint = f" Did you mean ++{best}?" if best else ""
            valid = ", ".join(f"{prefix + '.' if prefix else ''}{n}" for n in names)
            raise UserError(f"{what}: unknown key ++{key}.{hint} Valid keys here: {valid}.")
        path.append(part)
        node_type = {f.name: f for f in fields(node)}[part]
        default = node_type.default_factory() if callable(node_type.default_factory) else None
        if is_dataclass(default):
            node = type(default)
        elif isinstance(default, dict):  # a free mapping (++chat_template_kwargs.KEY=VALUE): any key below it
            return
        elif part != key.split(".")[-1]:
            raise UserError(f"{what}: ++{key}: '{'.'.join(path)}' is a value, not a group; drop the rest.")


def dotted_keys(schema: type, prefix: str = "") -> list[str]:
    """Every leaf key of `schema` with its groups, e.g. inference.temperature."""
    out = []
    for f in fields(schema):
        default = f.default_factory() if callable(f.default_factory) else None
        name = f"{prefix}{f.name}"
        out += dotted_keys(type(default), f"{name}.") if is_dataclass(default) else [name]
    return out


def _closest_key(key: str, keys: list[str]) -> str | None:
    """The full key meant by a misspelled or misplaced one: the same last part in another group (NeMo-Skills'
    ++tokens_to_generate is ++inference.tokens_to_generate), else the closest full key, else the closest last part."""
    leaf = key.rsplit(".", 1)[-1]
    same_leaf = [k for k in keys if k.rsplit(".", 1)[-1] == leaf]
    if len(same_leaf) == 1:
        return same_leaf[0]
    best = closest(key, keys)
    if best:
        return best
    by_leaf = {k.rsplit(".", 1)[-1]: k for k in keys}
    near = closest(leaf, list(by_leaf))
    return by_leaf[near] if near else None


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0].strip()


def split_overrides(flag: str, text: str) -> tuple[str, ...]:
    """A flag whose value is several overrides ('++key=value ++other=2', shell-quoted) as a tuple of them; anything
    else is an error naming the flag."""
    try:
        args = shlex.split(text)
    except ValueError as e:
        raise UserError(f"{flag}: cannot split {text!r} ({e}); quote it like '++key=value ++other=2'.") from None
    for a in args:
        if not is_override(a):
            raise UserError(f"{flag}: '{a}' is not ++key=value; write e.g. {flag}='++num_epochs=2'.")
    return tuple(args)


def route_overrides(
    args: tuple[str, ...] | list[str],
    checkers: dict[str, Callable[[list[str]], object]],
    default: str,
) -> dict[str, list[str]]:
    """When a command runs several inner scripts (eval: generation, then grading): split `args` by their first key
    part when it names a script in `checkers` (`++grade.tolerance=1e-6` → grade gets `++tolerance=1e-6`); everything
    else goes to `default`. Each script's part is passed to its checker (which raises UserError on an unknown key or
    a bad value). Returns each script's overrides."""
    if default not in checkers:
        raise ValueError(f"default script {default!r} has no checker")
    routed: dict[str, list[str]] = {name: [] for name in checkers}
    for arg in args:
        if not is_override(arg):
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


def config_value(cfg: object, key: str) -> object:
    """The value of a dotted ++key (e.g. genselect.prompt_config) in a config."""
    for part in key.split("."):
        cfg = getattr(cfg, part)
    return cfg
