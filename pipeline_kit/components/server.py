"""The server as a component of the declarative layer: its own CommandGroup (a het component on Slurm, a process
on none), a service that the job stops once its clients end. Its log is `$KIT_LOG_DIR/<job>/server.log`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from importlib.util import find_spec

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.pipeline.model import AUTO_PORT, Command, CommandGroup, HardwareConfig, PythonCheck
from pipeline_kit.servers.base import SERVER_PYTHON_VAR, ServerSpec, ServerType, get_server_type

SERVER_NAME = "server"
# where the client finds the server's log (same job folder; on Slurm every component shares the log dir)
SERVER_LOG = "$KIT_LOG_DIR/${KIT_LOG_PREFIX:-}" + SERVER_NAME + ".log"


def server_container(spec: ServerSpec, cluster: ClusterConfig, explicit: str | None) -> str | None:
    """--server_container, else the cluster's container named after the server type (vllm, sglang, ...), if any."""
    if explicit:
        cluster.container(explicit)  # fails with the known keys when it is missing
        return explicit
    return spec.server_type if spec.server_type in cluster.containers else None


def server_python(server_type: ServerType, cluster: ClusterConfig, container: str | None) -> str:
    """The interpreter a server command runs where $KIT_SERVER_PYTHON is unset: the cluster config's `server_python`.
    Without one, in a container or on a cluster node: its `python3`. On none (the job runs here, outside any container): kit's own Python when it can import the
    server's modules, else `python3` from PATH when that can; neither is an error naming the variable that fixes it."""
    if cluster.server_python and server_type.modules:
        return cluster.server_python
    if container is not None or cluster.executor != "none" or not server_type.modules:
        return "python3"
    if SERVER_PYTHON_VAR in {**os.environ, **cluster.env_vars}:
        return "python3"  # the variable decides where the job runs
    if all(find_spec(m) is not None for m in server_type.modules):
        return sys.executable
    path_python = shutil.which("python3")
    if path_python and _imports(path_python, server_type.modules):
        return "python3"
    missing = [m for m in server_type.modules if find_spec(m) is None]
    them = "it" if len(missing) == 1 else "them"
    lacking = (
        f"kit's Python ({sys.executable}) lacks {them}"
        if path_python in (None, sys.executable)
        else f"neither kit's Python ({sys.executable}) nor python3 on PATH ({path_python}) has {them}"
    )
    raise UserError(
        f"--server_type={server_type.name} needs {', '.join(missing)} in the server's Python, and {lacking}; install "
        f"{them} ({server_type.install}), or point kit at an env that has {them}: key 'server_python' in "
        f"{cluster.source}, or export {SERVER_PYTHON_VAR}=/path/to/bin/python."
    )


def server_python_check(server_type: ServerType, cluster: ClusterConfig, python: str) -> PythonCheck | None:
    """Where the job runs, before anything starts: the server's interpreter exists and finds its modules."""
    if not server_type.modules:  # not a Python module (trtllm-serve)
        return None
    needs = f"{', '.join(server_type.modules)} ({server_type.install})" if server_type.install else "its modules"
    return PythonCheck(
        f'"${{{SERVER_PYTHON_VAR}:-{python}}}"',
        server_type.modules,
        f"the {server_type.name} server's Python",
        cluster.python_fix("server_python", SERVER_PYTHON_VAR, needs),
    )


def _imports(python: str, modules: tuple[str, ...]) -> bool:
    """Whether `python` finds every module (without importing them: vLLM's import takes seconds)."""
    probe = "import sys, importlib.util as u; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))"
    try:
        return subprocess.run([python, "-c", probe, *modules], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def server_group(
    spec: ServerSpec, cluster: ClusterConfig, container: str | None, port: int | str = AUTO_PORT
) -> CommandGroup:
    server_type = get_server_type(spec.server_type)
    python = server_python(server_type, cluster, container)
    command = Command(
        server_type.command(spec, python=python),
        name=SERVER_NAME,
        container=container,
        num_gpus=spec.gpus,
        num_nodes=spec.nodes,
        num_tasks=1,  # one launcher per node; multi-node types spread the model themselves (Ray, dist-init)
        port=port,
        service=True,
        python_check=server_python_check(server_type, cluster, python),
    )
    return CommandGroup([command], hardware=HardwareConfig(), name=SERVER_NAME)
