"""What every server type provides: the command line (with --server_args passed through), the port, tensor
parallelism from the GPU count, multi-node launch, and the base URL a client uses."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pipeline_kit import plugins
from pipeline_kit.errors import UserError
from pipeline_kit.servers.registry import SERVER_TYPES

_URL = re.compile(r"^https?://[^\s'\"\\]+$")
# names the interpreter that runs a server where the job runs; a cluster config may point it at the server's own
# env (env_vars: ["KIT_SERVER_PYTHON=/opt/vllm-venv/bin/python"])
SERVER_PYTHON_VAR = "KIT_SERVER_PYTHON"
# first host of the server's nodes, found where the job runs (the head of a multi-node launch); srun sets the
# step's node list, a plain allocation the job's
HEAD_HOST = '${KIT_SERVER_HEAD:-$(scontrol show hostnames "${SLURM_STEP_NODELIST:-$SLURM_JOB_NODELIST}" | head -n1)}'


@dataclass
class ServerSpec:
    server_type: str
    model: str  # a path (or a name, for external endpoints)
    gpus: int = 0  # per node
    nodes: int = 1
    server_args: str = ""  # passed through to the server's own command line
    address: str | None = None  # external endpoints only: http://host:port/v1
    served_model_name: str | None = None

    @property
    def name(self) -> str:
        """The model name the server answers to, which the client asks for (the server type decides it)."""
        return get_server_type(self.server_type).served_name(self)

    @property
    def starts_server(self) -> bool:
        """kit starts a server unless the type is an external endpoint or `address` names a running one."""
        return get_server_type(self.server_type).runs_locally and self.address is None

    def validate(self) -> ServerSpec:
        """The server type's rules; each problem is one UserError naming the flag. Returns self."""
        server_type = get_server_type(self.server_type)
        if not self.model:
            raise UserError("--model is required: the model folder to serve, or the name the endpoint serves.")
        if self.gpus < 0 or self.nodes < 1:
            raise UserError(
                f"--server_gpus={self.gpus} --server_nodes={self.nodes}: use 0 or more GPUs and 1 or more nodes."
            )
        if self.address is not None and not _URL.match(self.address):
            raise UserError(f"--server_address={self.address} is not a URL like http://host:8000/v1.")
        if not server_type.runs_locally and self.address is None:
            raise UserError(f"--server_type={self.server_type} needs --server_address, e.g. http://host:8000/v1.")
        if self.nodes > 1 and not server_type.multi_node:
            raise UserError(f"--server_nodes={self.nodes}: server type '{self.server_type}' runs on one node only.")
        return self


@dataclass
class ServerType:
    """A registry entry; subclasses fill in `launch`."""

    name: str
    runs_locally: bool = True  # False: an external endpoint, nothing to start
    multi_node: bool = False
    modules: tuple[str, ...] = ()  # what the server's Python must import (none: the server is no Python module)
    install: str = ""  # how to get them, for messages

    def launch(self, spec: ServerSpec, port: str, python: str) -> str:
        """The command line; `python` is the shell expression of the interpreter (see `server_python`)."""
        raise NotImplementedError

    def served_name(self, spec: ServerSpec) -> str:
        """The model name the launched server serves (and the client asks for): --served_model_name, else the model.
        A type whose server cannot take another name refuses --served_model_name here."""
        return spec.served_model_name or spec.model

    def command(self, spec: ServerSpec, port: str = "$KIT_PORT", python: str = "python3") -> str:
        """The server's command line; it runs `$KIT_SERVER_PYTHON` where that is set, else `python`."""
        if not self.runs_locally:
            raise UserError(f"server type '{self.name}' is an external endpoint; there is nothing to start.")
        if spec.nodes > 1 and not self.multi_node:
            raise UserError(f"--server_nodes={spec.nodes}: server type '{self.name}' runs on one node only.")
        self.served_name(spec)  # a name the type cannot serve is refused before anything starts
        return self.launch(spec, port, f'"${{{SERVER_PYTHON_VAR}:-{python}}}"')

    def base_url(self, spec: ServerSpec, host: str, port: int) -> str:
        return spec.address if spec.address else f"http://{host}:{port}/v1"


def extra_args(spec: ServerSpec) -> str:
    return f" {spec.server_args.strip()}" if spec.server_args.strip() else ""


def get_server_type(name: str) -> ServerType:
    """The server type NAME of the registry (servers/registry.py), or a user's own `package.module:OBJECT` (a
    ServerType instance); an unknown name lists the known ones."""
    server_type = plugins.load(name, SERVER_TYPES, "--server_type", "server types")
    if not isinstance(server_type, ServerType):
        raise UserError(
            f"--server_type={name} is of type {type(server_type).__name__}, not a ServerType; point it at one."
        )
    return server_type
