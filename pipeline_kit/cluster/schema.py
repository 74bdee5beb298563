"""The keys a cluster config may hold, with their types, and a checker that turns a raw YAML mapping into
plain validated values, failing with one line that names the file and the key."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline_kit.errors import UserError, did_you_mean

EXECUTORS = ("none", "local", "slurm")
DEPENDENCY_TYPES = ("afterany", "afterok", "afternotok", "aftercorr")


@dataclass(frozen=True)
class Key:
    """One config key: its YAML type (str, int, list of str, mapping of str to str, or a nested section)."""

    name: str
    kind: str  # "str" | "int" | "list[str]" | "dict[str,str]" | "section"
    required: bool = False
    choices: tuple[str, ...] = ()
    section: tuple[Key, ...] = ()


SSH_TUNNEL_KEYS = (
    Key("host", "str", required=True),
    Key("user", "str", required=True),
    Key("port", "int"),
    Key("identity", "str"),
    Key("job_dir", "str", required=True),
)

CLUSTER_KEYS = (
    Key("executor", "str", required=True, choices=EXECUTORS),
    Key("job_dir", "str", required=True),
    Key("containers", "dict[str,str]"),
    Key("mounts", "list[str]"),
    Key("env_vars", "list[str]"),
    Key("required_env_vars", "list[str]"),
    Key("ssh_tunnel", "section", section=SSH_TUNNEL_KEYS),
    Key("account", "str"),
    Key("partition", "str"),
    Key("cpu_partition", "str"),
    Key("timeouts", "dict[str,str]"),
    Key("default_timeout", "str"),
    Key("job_name_prefix", "str"),
    Key("dependency_type", "str", choices=DEPENDENCY_TYPES),
    Key("max_array_size", "int"),
    Key("python", "str"),
    Key("server_python", "str"),
)

_TYPE_WORDS = {
    "str": "a string",
    "int": "an integer",
    "list[str]": "a list of strings",
    "dict[str,str]": "a mapping of names to strings",
    "section": "a mapping",
}


def check_mapping(raw: Any, keys: tuple[Key, ...], where: str, prefix: str = "") -> dict[str, Any]:
    """Validate `raw` against `keys`; `where` is the file named in errors, `prefix` the dotted parent key."""
    if not isinstance(raw, dict):
        what = f"key '{prefix.rstrip('.')}'" if prefix else "the top level"
        raise UserError(f"{where}: {what} must be a mapping of keys to values, got {type(raw).__name__}.")
    by_name = {k.name: k for k in keys}
    out: dict[str, Any] = {}
    for name, value in raw.items():
        full = f"{prefix}{name}"
        key = by_name.get(str(name))
        if key is None:
            raise UserError(
                f"{where}: unknown key '{full}'.{did_you_mean(str(name), list(by_name))} "
                f"Allowed keys: {', '.join(by_name)}."
            )
        out[key.name] = _check_value(value, key, where, full)
    for key in keys:
        if key.required and key.name not in out:
            raise UserError(f"{where}: required key '{prefix}{key.name}' is missing; add it ({_TYPE_WORDS[key.kind]}).")
    return out


def _check_value(value: Any, key: Key, where: str, full: str) -> Any:
    def bad() -> UserError:
        return UserError(
            f"{where}: key '{full}' must be {_TYPE_WORDS[key.kind]}, got {type(value).__name__} {value!r}."
        )

    if key.kind == "section":
        return check_mapping(value, key.section, where, prefix=f"{full}.")
    if key.kind == "str":
        if isinstance(value, bool) or not isinstance(value, (str, int, float)):
            raise bad()
        value = str(value)
        if key.choices and value not in key.choices:
            raise UserError(
                f"{where}: key '{full}' is '{value}', which is not one of {', '.join(key.choices)}."
                f"{did_you_mean(value, key.choices)}"
            )
        return value
    if key.kind == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad()
        return value
    if key.kind == "list[str]":
        if not isinstance(value, list) or not all(isinstance(v, (str, int, float)) for v in value):
            raise bad()
        return [str(v) for v in value]
    if key.kind == "dict[str,str]":
        if not isinstance(value, dict) or not all(isinstance(v, (str, int, float)) for v in value.values()):
            raise bad()
        return {str(k): str(v) for k, v in value.items()}
    raise AssertionError(f"unknown key kind {key.kind}")
