"""`kit start_server`: one model server as a job of the declarative layer, kept in the foreground. It prints the
address (and, with --create_tunnel, forwards the port over the cluster's SSH tunnel) and stops the job on Ctrl-C."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline_kit.cli.foreground import Service
from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command
from pipeline_kit.cli.server_flags import ServerFlags
from pipeline_kit.errors import UserError

SERVER = Service("start_server", "server", "/v1")


def register(app: typer.Typer) -> None:
    @job_command(app, "start_server", help="Start a model server in the foreground and print its address.")
    def start_server(
        flags: JobFlags,
        server: ServerFlags,
        create_tunnel: Annotated[
            bool, typer.Option("--create_tunnel", help="Forward the server's port here over the cluster's SSH tunnel.")
        ] = False,
        ready_timeout: Annotated[
            float, typer.Option("--ready_timeout", help="Seconds to wait for the server to answer.")
        ] = 1800.0,
    ) -> int:
        from pipeline_kit.pipeline.render import free_port
        from pipeline_kit.servers.component import server_container, server_group

        if not server.starts_server():
            raise UserError(f"--server_type={server.server_type} with --server_address: there is nothing to start.")
        cluster = cluster_from(flags.cluster, flags.config_dir)
        spec = server.spec()
        port = server.port() if server.server_port is not None else free_port()
        group = server_group(spec, server_container(spec, cluster, server.server_container), port)
        raise typer.Exit(SERVER.run(flags, cluster, group, port, create_tunnel, ready_timeout))
