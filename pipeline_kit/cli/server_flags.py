"""The model-server flags that `kit generate`, `kit start_server` (and later `kit eval`) share, declared once,
and their check into a ServerSpec."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer


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
        """The checked ServerSpec (the server type's rules live in ServerSpec.validate)."""
        from pipeline_kit.servers import ServerSpec

        return ServerSpec(
            self.server_type,
            self.model or "",
            gpus=self.server_gpus,
            nodes=self.server_nodes,
            server_args=self.server_args,
            address=self.server_address,
        ).validate()

    def port(self):
        from pipeline_kit.cli.job_flags import port_or_auto

        return port_or_auto("--server_port", self.server_port)
