"""`kit start_server`: one model server as a job of the declarative layer, kept in the foreground. It prints the
address (and, with --create_tunnel, forwards the port over the cluster's SSH tunnel) and stops the job on Ctrl-C."""

from __future__ import annotations

import typer

from pipeline_kit.cli.foreground import ForegroundFlags, Service
from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command
from pipeline_kit.cli.server_flags import ServerFlags
from pipeline_kit.errors import UserError

SERVER = Service("start_server", "server", "/v1")


def register(app: typer.Typer) -> None:
    @job_command(app, "start_server", help="Start a model server in the foreground and print its address.")
    def start_server(
        flags: JobFlags,
        server: ServerFlags,
        foreground: ForegroundFlags,
    ) -> int:
        from pipeline_kit.pipeline.render import free_port
        from pipeline_kit.servers.component import server_container, server_group

        if not server.starts_server():
            raise UserError(f"--server_type={server.server_type} with --server_address: there is nothing to start.")
        cluster = cluster_from(flags.cluster, flags.config_dir)
        spec = server.spec()
        port = server.port() if server.server_port is not None else free_port()
        group = server_group(spec, server_container(spec, cluster, server.server_container), port)
        raise typer.Exit(SERVER.run(flags, foreground, cluster, group, port))
