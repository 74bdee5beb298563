"""The sandbox flags that `kit generate`, `kit run_cmd` (and later `kit eval`) share, declared once, and the
sandbox component they add to a job."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from pipeline_kit.cli.job_flags import port_or_auto


@dataclass
class SandboxOptions:
    """How kit starts a sandbox (`kit start_sandbox`, and jobs --with_sandbox)."""

    sandbox_args: Annotated[
        str, typer.Option("--sandbox_args", help="Extra arguments for the sandbox server (e.g. '--memory_gb 8').")
    ] = ""
    sandbox_container: Annotated[
        str | None, typer.Option("--sandbox_container", help="Container key for the sandbox (default: 'sandbox').")
    ] = None

    def spec(self, port):
        from pipeline_kit.components.sandbox import SandboxSpec

        return SandboxSpec(self.sandbox_args, self.sandbox_container, port)


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

    def job_spec(self):
        """The job's SandboxSpec, or None without --with_sandbox."""
        return self.spec(self.port()) if self.with_sandbox else None
