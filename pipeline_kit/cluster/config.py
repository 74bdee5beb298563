"""`ClusterConfig`: a validated cluster config with `${VAR}`s expanded, env vars resolved and paths checked."""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline_kit.cluster.schema import CLUSTER_KEYS, check_mapping
from pipeline_kit.errors import UserError, closest
from pipeline_kit.slurm_time import check_slurm_time

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class SshTunnelConfig:
    host: str
    user: str
    job_dir: str
    port: int = 22
    identity: str | None = None


@dataclass(frozen=True)
class ClusterConfig:
    """Where and how jobs run. `source` is the file it came from (for error messages)."""

    source: str
    executor: str
    job_dir: str
    containers: dict[str, str] = field(default_factory=dict)
    mounts: list[str] = field(default_factory=list)
    env_vars: dict[str, str] = field(default_factory=dict)
    ssh_tunnel: SshTunnelConfig | None = None
    account: str | None = None
    partition: str | None = None
    cpu_partition: str | None = None
    timeouts: dict[str, str] = field(default_factory=dict)
    default_timeout: str | None = None
    job_name_prefix: str = ""
    dependency_type: str = "afterany"
    max_array_size: int | None = None  # Slurm's MaxArraySize; None: asked from `scontrol show config`
    # the interpreters where the job runs (a path on the nodes, or in the container): kit's own commands' (client,
    # sandbox, trainer, recipe steps) and the model server's; unset: the executor's default (kit_python, python3).
    # $KIT_CLIENT_PYTHON, $KIT_SERVER_PYTHON, ... still override them where the job runs.
    python: str | None = None
    server_python: str | None = None

    @property
    def name(self) -> str:
        return Path(self.source).stem

    def container(self, key: str) -> str:
        """The image (or `dockerfile:PATH`) for a container key, failing with the keys that exist."""
        if key not in self.containers:
            known = ", ".join(sorted(self.containers)) or "none"
            best = closest(key, sorted(self.containers))
            fix = f"did you mean '{best}'? Or add it there." if best else "add it there."
            raise UserError(f"{self.source}: container '{key}' is not under 'containers' (known: {known}); {fix}")
        return self.containers[key]

    @property
    def kit_python(self) -> str:
        """The interpreter a job's kit-side commands default to: the `python` key, else this one on none (the job
        runs here), else the image's or node's `python3` (each command lets an env var override it)."""
        if self.python:
            return self.python
        return sys.executable if self.executor == "none" else "python3"

    def python_fix(self, key: str, var: str, needs: str) -> str:
        """How to point a component at an interpreter that works: the config key (which `kit setup` fills in for
        kit's own commands), or the variable that overrides it where the job runs."""
        return (
            f"set key '{key}' in {self.source} to the bin/python of an env with {needs}, as seen where the job runs "
            f"(every node, or the container), or export {var} there"
        )

    def timeout_for(self, partition: str | None) -> str | None:
        """The time limit of a partition: its `timeouts` entry, else `default_timeout`."""
        return self.timeouts.get(partition or "", self.default_timeout)

    @property
    def kit_container(self) -> str | None:
        """The container kit's own commands run in where a job names none: the `kit` entry, if defined."""
        return "kit" if "kit" in self.containers else None

    def time_limit(self, partition: str | None, time_min: str | None) -> str | None:
        """A job's Slurm time limit: --time_min, else that of its partition (default: the cluster's `partition`)."""
        return time_min or self.timeout_for(partition or self.partition)


def expand_vars(text: str, where: str, key: str, env: dict[str, str] | None = None) -> str:
    """Expand `${VAR}` from the environment; a variable that is not set is an error naming it."""
    env = os.environ if env is None else env

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in env:
            raise UserError(f"{where}: key '{key}' uses ${{{m.group(1)}}}, which is not set; export it first.")
        return env[m.group(1)]

    return _VAR.sub(sub, text)


def build_cluster_config(
    raw: Any, source: str, env: dict[str, str] | None = None, inspect_only: bool = False
) -> ClusterConfig:
    """Validate a raw YAML mapping and build the `ClusterConfig`; every problem is a one-line `UserError`.
    `inspect_only`: for looking at submitted runs (`kit status`, `kit logs`, `kit cancel`), which need where the
    records are (job_dir, ssh_tunnel) but nothing that only jobs use: env_vars and required_env_vars need not be
    exported (an unset one is left out), and mounts and interpreters are left out."""
    env = dict(os.environ) if env is None else env
    data = check_mapping(raw, CLUSTER_KEYS, source)
    executor = data["executor"]
    job_dir = _absolute_dir(expand_vars(data["job_dir"], source, "job_dir", env), source, "job_dir")
    if inspect_only:
        data = {k: v for k, v in data.items() if k not in _JOB_ONLY_KEYS}
    for name in data.get("required_env_vars", []):
        if name not in env:
            raise UserError(f"{source}: required_env_vars lists '{name}', which is not set; export {name}=... first.")
    mounts = [_check_mount(expand_vars(m, source, "mounts", env), source, executor) for m in data.get("mounts", [])]
    ssh = None
    if "ssh_tunnel" in data:
        s = data["ssh_tunnel"]
        identity = expand_vars(s["identity"], source, "ssh_tunnel.identity", env) if "identity" in s else None
        if identity is not None and not Path(identity).expanduser().is_file():
            raise UserError(f"{source}: key 'ssh_tunnel.identity' is {identity}, which is not a file; fix the path.")
        remote = expand_vars(s["job_dir"], source, "ssh_tunnel.job_dir", env)
        ssh = SshTunnelConfig(
            s["host"],
            s["user"],
            _absolute_dir(remote, source, "ssh_tunnel.job_dir"),
            s.get("port", 22),
            identity,
        )
        if executor != "slurm":
            raise UserError(
                f"{source}: key 'ssh_tunnel' only applies to executor 'slurm', not '{executor}'; remove it."
            )
    if "default_timeout" in data:
        check_slurm_time(data["default_timeout"], f"{source}: key 'default_timeout'")
    for part, limit in data.get("timeouts", {}).items():
        check_slurm_time(limit, f"{source}: key 'timeouts.{part}'")
    return ClusterConfig(
        source=source,
        executor=executor,
        job_dir=job_dir,
        containers=data.get("containers", {}),
        mounts=mounts,
        env_vars=_resolve_env_vars(data.get("env_vars", []), source, env, skip_unset=inspect_only),
        ssh_tunnel=ssh,
        account=data.get("account"),
        partition=data.get("partition"),
        cpu_partition=data.get("cpu_partition"),
        timeouts=data.get("timeouts", {}),
        default_timeout=data.get("default_timeout"),
        job_name_prefix=data.get("job_name_prefix", ""),
        dependency_type=data.get("dependency_type", "afterany"),
        max_array_size=_positive(data.get("max_array_size"), source, "max_array_size"),
        python=_interpreter(data, "python", source, env),
        server_python=_interpreter(data, "server_python", source, env),
    )


# what only a job uses: left out when a config is loaded to look at submitted runs (inspect_only)
_JOB_ONLY_KEYS = ("required_env_vars", "mounts", "python", "server_python")
_INTERPRETER = re.compile(r"^/[A-Za-z0-9_.+@/-]+$")  # a plain absolute path: it is written into shell commands


def _interpreter(data: dict[str, Any], key: str, source: str, env: dict[str, str]) -> str | None:
    """An interpreter key: an absolute path where the job runs (not checked here: it may exist only there)."""
    if key not in data:
        return None
    path = os.path.expanduser(expand_vars(data[key], source, key, env))
    if not _INTERPRETER.match(path):
        raise UserError(
            f"{source}: key '{key}' is '{path}'; give the absolute path of a python (e.g. /opt/venv/bin/python), "
            "without spaces or shell characters."
        )
    return path


def _positive(value: int | None, source: str, key: str) -> int | None:
    if value is not None and value < 1:
        raise UserError(f"{source}: key '{key}' is {value}; give a positive number.")
    return value


def _absolute_dir(path: str, source: str, key: str) -> str:
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        raise UserError(
            f"{source}: key '{key}' is the relative path '{path}'; make it absolute (e.g. ${{HOME}}/{path})."
        )
    if "/nemo_run" in path:
        # nemo-run replaces every '/nemo_run' in Slurm scripts with the job dir, which mangles such paths.
        raise UserError(f"{source}: key '{key}' ({path}) contains '/nemo_run', which nemo-run mangles; rename it.")
    return os.path.normpath(path)


def _check_mount(mount: str, source: str, executor: str) -> str:
    parts = mount.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not parts[1]:
        raise UserError(f"{source}: mount '{mount}' is not 'src:dst' (or 'src:dst:ro'); fix the entry under 'mounts'.")
    if not os.path.isabs(parts[1]):
        raise UserError(f"{source}: mount '{mount}' has a relative destination; make '{parts[1]}' absolute.")
    if executor in ("none", "local") and not os.path.exists(parts[0]):
        raise UserError(f"{source}: mount '{mount}': source {parts[0]} does not exist; create it or fix the mount.")
    return mount


def _resolve_env_vars(entries: list[str], source: str, env: dict[str, str], skip_unset: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UserError(f"{source}: env_vars entry '{entry}' is not NAME or NAME=value; fix it.")
        if not sep:
            if name not in env and skip_unset:
                continue
            if name not in env:
                raise UserError(
                    f"{source}: env_vars takes '{name}' from the environment, but it is not set; export it."
                )
            value = env[name]
        out[name] = value
    return out
