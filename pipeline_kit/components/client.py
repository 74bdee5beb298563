"""The generation client as a Command of the declarative layer: an explicit builder object that turns the resolved
server endpoint into the `python -m pipeline_kit.inference.generate ++...` command line."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.components.python_check import kit_python_check
from pipeline_kit.components.sandbox import SANDBOX_NAME
from pipeline_kit.components.sandbox import address as sandbox_address
from pipeline_kit.components.server import SERVER_LOG, SERVER_NAME
from pipeline_kit.inference.done_key import keyed_server_args
from pipeline_kit.overrides import override_value
from pipeline_kit.pipeline.model import Endpoint, PythonCheck
from pipeline_kit.servers.base import ServerSpec, get_server_type

CLIENT_PYTHON_VAR = "KIT_CLIENT_PYTHON"  # where the job runs, overrides the cluster config's `python`
# what the generation client imports (pipeline-kit[generate]), checked where the job runs before anything starts
CLIENT_MODULES = ("pipeline_kit", "yaml", "hydra", "litellm")


def client_python_check(cluster: ClusterConfig) -> PythonCheck:
    return kit_python_check(cluster, CLIENT_PYTHON_VAR, CLIENT_MODULES, "the client's Python", "pipeline-kit[generate]")


def server_args_override(server: ServerSpec) -> list[str]:
    """`++server.server_args=...` for a server kit starts: the --server_args that are part of the .done key."""
    keyed = keyed_server_args(server.server_args) if server.starts_server else ""
    return [f"++server.server_args={override_value(keyed)}"] if keyed else []


@dataclass(frozen=True)
class ClientCommand:
    """`python`: the default interpreter (overridden by $KIT_CLIENT_PYTHON where the job runs); `overrides`: the
    ++key=value arguments of the generation script, except the server's address, which comes from `refs`.
    `shares`: the unit labels of each array element (`$KIT_UNIT` picks one); a single share for a plain job."""

    python: str
    server: ServerSpec
    overrides: tuple[str, ...]
    shares: tuple[tuple[str, ...], ...]

    def __call__(self, refs: dict[str, Endpoint]) -> str:
        if SERVER_NAME in refs:  # kit started the server in this job
            endpoint = refs[SERVER_NAME]
            base_url = get_server_type(self.server.server_type).base_url(self.server, endpoint.host, endpoint.port)
            server_args = [f'"++server.base_url={base_url}"', f'"++server.server_log={SERVER_LOG}"']
        else:
            server_args = [shlex.quote(f"++server.base_url={self.server.address}")]
        args = [*server_args, shlex.quote(f"++server.model={override_value(self.server.name)}")]
        args += [shlex.quote(a) for a in server_args_override(self.server)]
        # for the job's measurements (pipeline_kit.measurements): what served it
        args += [f"++server.gpus={self.server.gpus}", f"++server.nodes={self.server.nodes}"]
        if SANDBOX_NAME in refs:  # --with_sandbox: the job's own sandbox
            args.append(f'"++sandbox_address={sandbox_address(refs)}"')
        args += [shlex.quote(a) for a in self.overrides]
        lists = [f"[{','.join(share)}]" for share in self.shares]  # labels: letters, digits, _
        prefix = ""
        if len(lists) == 1:
            args.append(shlex.quote(f"++units={lists[0]}"))
        else:
            prefix = f"kit_shares=({' '.join(map(shlex.quote, lists))})\n"
            args.append('"++units=${kit_shares[$KIT_UNIT]}"')
        python = f'"${{{CLIENT_PYTHON_VAR}:-{self.python}}}"'
        line = f"{python} -m pipeline_kit.inference.generate {' '.join(args)}"
        if len(lists) > 1 and not all(self.shares):  # eval packs benchmarks: an element may have none of this one
            line = f'[ "${{kit_shares[$KIT_UNIT]}}" = "[]" ] || {line}'
        return prefix + line
