"""The model-server flags that `kit generate`, `kit start_server` (and later `kit eval`) share, declared once,
and their check into a ServerSpec."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Annotated

import typer

from pipeline_kit.errors import UserError

_URL = re.compile(r"^https?://[^\s'\"\\]+$")


@dataclass
class ServerFlags:
    model: Annotated[
        str | None, typer.Option("--model", help="Model folder kit serves, or the model name an endpoint knows.")
    ] = None
    server_type: Annotated[
        str,
        typer.Option("--server_type", help="vllm | sglang | trtllm | transformers | openai (an external endpoint)."),
    ] = "vllm"
    server_gpus: Annotated[int, typer.Option("--server_gpus", help="GPUs per server node (tensor parallel).")] = 0
    server_nodes: Annotated[int, typer.Option("--server_nodes", help="Server nodes (vLLM: Ray; SGLang).")] = 1
    server_args: Annotated[str, typer.Option("--server_args", help="Extra arguments for the server's command.")] = ""
    server_address: Annotated[
        str | None,
        typer.Option("--server_address", help="Use a running server at this URL (http://host:port/v1); start none."),
    ] = None
    server_port: Annotated[
        int | None, typer.Option("--server_port", help="Port for the server kit starts (default: a free one).")
    ] = None
    server_container: Annotated[
        str | None, typer.Option("--server_container", help="Container key for the server (default: its type).")
    ] = None

    def spec(self):
        from pipeline_kit.servers import ServerSpec, get_server_type

        server_type = get_server_type(self.server_type)
        if not self.model:
            raise UserError("--model is required: the model folder to serve, or the name the endpoint serves.")
        if self.server_gpus < 0 or self.server_nodes < 1:
            raise UserError(
                f"--server_gpus={self.server_gpus} --server_nodes={self.server_nodes}: "
                "use 0 or more GPUs and 1 or more nodes."
            )
        if self.server_address is not None and not _URL.match(self.server_address):
            raise UserError(f"--server_address={self.server_address} is not a URL like http://host:8000/v1.")
        if not server_type.runs_locally and self.server_address is None:
            raise UserError(f"--server_type={self.server_type} needs --server_address, e.g. http://host:8000/v1.")
        return ServerSpec(
            self.server_type,
            self.model,
            gpus=self.server_gpus,
            nodes=self.server_nodes,
            server_args=self.server_args,
            address=self.server_address,
        )

    def starts_server(self) -> bool:
        """kit starts a server unless the type is an external endpoint or --server_address names a running one."""
        from pipeline_kit.servers import get_server_type

        return get_server_type(self.server_type).runs_locally and self.server_address is None

    def port(self):
        from pipeline_kit.cli.job_flags import port_or_auto

        return port_or_auto("--server_port", self.server_port)
