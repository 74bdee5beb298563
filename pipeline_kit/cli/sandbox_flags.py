"""The sandbox flags that `kit generate`, `kit run_cmd` (and later `kit eval`) share, declared once, and the
sandbox component they add to a job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from pipeline_kit.cli.job_flags import job_python, port_or_auto


@dataclass
class SandboxOptions:
    """How kit starts a sandbox (`kit start_sandbox`, and jobs --with_sandbox)."""

    sandbox_args: Annotated[
        str, typer.Option("--sandbox_args", help="Extra arguments for the sandbox server (e.g. '--memory_gb 8').")
    ] = ""
    sandbox_container: Annotated[
        str | None, typer.Option("--sandbox_container", help="Container key for the sandbox (default: 'sandbox').")
    ] = None

    def command(self, cluster, port):
        """The sandbox's service Command for a job on `cluster`."""
        from pipeline_kit.sandbox.component import SANDBOX_NAME, sandbox_command

        if self.sandbox_container:
            cluster.container(self.sandbox_container)  # fails with the known keys when it is missing
        container = self.sandbox_container or (SANDBOX_NAME if SANDBOX_NAME in cluster.containers else None)
        host = "127.0.0.1" if cluster.executor == "none" else "0.0.0.0"  # elsewhere clients are on other nodes
        return sandbox_command(job_python(cluster), host, port, self.sandbox_args, container)

    def group(self, cluster, port):
        """Its own CommandGroup: on Slurm a het component in the CPU partition."""
        from pipeline_kit.pipeline import HardwareConfig
        from pipeline_kit.sandbox.component import sandbox_group

        hardware = HardwareConfig(partition=cluster.cpu_partition) if cluster.executor == "slurm" else None
        return sandbox_group(self.command(cluster, port), hardware)


@dataclass
class SandboxFlags(SandboxOptions):
    """A job's sandbox: off unless --with_sandbox."""

    with_sandbox: Annotated[
        bool,
        typer.Option("--with_sandbox", help="Start the code-execution sandbox beside the job and pass its address."),
    ] = False
    sandbox_port: Annotated[
        int | None, typer.Option("--sandbox_port", help="Port of the job's sandbox (default: a free one).")
    ] = None

    def port(self):
        return port_or_auto("--sandbox_port", self.sandbox_port)
