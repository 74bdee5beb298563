"""`kit start_sandbox`: the code-execution sandbox as a job of the declarative layer, kept in the foreground; it
prints the address (with --create_tunnel, forwarded here over the cluster's SSH tunnel) and stops on Ctrl-C."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from pipeline_kit.cli.foreground import ForegroundFlags, Service
from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command, port_or_auto
from pipeline_kit.cli.sandbox_flags import SandboxOptions

SANDBOX = Service("start_sandbox", "sandbox")


def register(app: typer.Typer) -> None:
    @job_command(app, "start_sandbox", help="Start the code-execution sandbox in the foreground and print its address.")
    def start_sandbox(
        flags: JobFlags,
        sandbox: SandboxOptions,
        foreground: ForegroundFlags,
        sandbox_port: Annotated[
            int | None, typer.Option("--sandbox_port", help="Port to serve on (default: a free one).")
        ] = None,
        port: Annotated[int | None, typer.Option("--port", hidden=True, help="Deprecated: --sandbox_port.")] = None,
    ) -> int:

        from pipeline_kit.errors import UserError
        from pipeline_kit.jobs import sandbox_jobs
        from pipeline_kit.pipeline import AUTO_PORT
        from pipeline_kit.pipeline.render import free_port

        if port is not None and sandbox_port is not None:
            raise UserError("--port is the old name of --sandbox_port; pass only --sandbox_port.")
        flag = "--port" if port is not None else "--sandbox_port"
        port = port_or_auto(flag, sandbox_port if port is None else port)
        if flag == "--port":
            print(
                "kit: warning: --port is deprecated; use --sandbox_port (the same flag as --with_sandbox's).",
                file=sys.stderr,
            )
        cluster = cluster_from(flags.cluster, flags.config_dir)
        port = free_port() if port == AUTO_PORT else port
        options = flags.options(SANDBOX.name)
        jobs = sandbox_jobs(cluster, sandbox.spec(port), port, options)
        raise typer.Exit(SANDBOX.run(flags, foreground, cluster, options.expname, jobs, port))
