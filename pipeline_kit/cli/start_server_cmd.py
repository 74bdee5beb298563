"""`kit start_server`: one model server as a job of the declarative layer, kept in the foreground. It prints the
address (and, with --create_tunnel, forwards the port over the cluster's SSH tunnel) and stops the job on Ctrl-C."""

from __future__ import annotations

import typer

from pipeline_kit.cli.foreground import ForegroundFlags, Service
from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command
from pipeline_kit.cli.server_flags import ServerFlags

SERVER = Service("start_server", "server", "/v1")


def register(app: typer.Typer) -> None:
    @job_command(app, "start_server", help="Start a model server in the foreground and print its address.")
    def start_server(
        flags: JobFlags,
        server: ServerFlags,
        foreground: ForegroundFlags,
    ) -> int:
        from pipeline_kit.jobs import server_jobs
        from pipeline_kit.pipeline.render import free_port

        cluster = cluster_from(flags.cluster, flags.config_dir)
        port = server.port() if server.server_port is not None else free_port()
        options = flags.options(SERVER.name)
        jobs = server_jobs(cluster, server.spec(), port, options, server.server_container)
        raise typer.Exit(SERVER.run(flags, foreground, cluster, options.expname, jobs, port))
