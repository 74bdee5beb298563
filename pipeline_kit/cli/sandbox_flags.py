"""The sandbox flags that `kit generate`, `kit run_cmd` (and later `kit eval`) share, declared once, and the
sandbox component they add to a job."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Annotated

import typer


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

        local = cluster.executor == "none"
        if self.sandbox_container:
            cluster.container(self.sandbox_container)  # fails with the known keys when it is missing
        container = self.sandbox_container or (SANDBOX_NAME if SANDBOX_NAME in cluster.containers else None)
        python = sys.executable if local else "python3"
        return sandbox_command(python, "127.0.0.1" if local else "0.0.0.0", port, self.sandbox_args, container)

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
        from pipeline_kit.errors import UserError
        from pipeline_kit.pipeline.model import AUTO_PORT

        if self.sandbox_port is not None and not 0 < self.sandbox_port < 65536:
            raise UserError(f"--sandbox_port={self.sandbox_port} is not a TCP port (1..65535).")
        return self.sandbox_port if self.sandbox_port is not None else AUTO_PORT
