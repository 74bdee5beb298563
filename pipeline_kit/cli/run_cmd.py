"""`kit run_cmd`: run one shell command as a job on any cluster (with --with_sandbox, beside a sandbox whose
address it finds in $KIT_SANDBOX_ADDRESS)."""

import shlex
from typing import Annotated

import typer

from pipeline_kit.cli.job_flags import JobFlags, JobPlan, job_command, job_python, submit
from pipeline_kit.cli.sandbox_flags import SandboxFlags
from pipeline_kit.errors import UserError


def register(app: typer.Typer) -> None:
    @job_command(app, "run_cmd", help="Run a shell command as a job (local process, Docker or Slurm).")
    def run_cmd(
        flags: JobFlags,
        sandbox: SandboxFlags,
        command: Annotated[str, typer.Option("--command", help="The shell command to run.")] = "",
        num_gpus: Annotated[int, typer.Option("--num_gpus", help="GPUs per node.")] = 0,
        num_nodes: Annotated[int, typer.Option("--num_nodes", help="Nodes.")] = 1,
        num_tasks: Annotated[int, typer.Option("--num_tasks", help="Tasks per node.")] = 1,
        container: Annotated[
            str | None, typer.Option("--container", help="Container key from the cluster config.")
        ] = None,
        array_size: Annotated[
            int | None, typer.Option("--array_size", help="Run as N units; each sees $KIT_UNIT.")
        ] = None,
    ) -> int:
        from pipeline_kit.pipeline import Command, CommandGroup
        from pipeline_kit.sandbox.component import SANDBOX_NAME, WithSandboxAddress

        if not command.strip():
            raise UserError("--command is empty; pass the shell command to run, e.g. --command='echo hi'.")
        for name, value in (
            ("--num_gpus", num_gpus),
            ("--num_nodes", num_nodes - 1),
            ("--num_tasks", num_tasks - 1),
        ):
            if value < 0:
                raise UserError(
                    f"{name} is too small ({value if name == '--num_gpus' else value + 1}); use a positive count."
                )
        text = " ".join([command, *(shlex.quote(a) for a in flags.extra_args)])

        def plan(cluster, copy):
            groups, refs, line = [], {}, text
            if sandbox.with_sandbox:
                groups = [sandbox.group(cluster, sandbox.port())]
                refs = {SANDBOX_NAME: groups[0].commands[0]}
                line = WithSandboxAddress(text, job_python(cluster))
            cmd = Command(
                line,
                name="cmd",
                container=container,
                num_gpus=num_gpus,
                num_nodes=num_nodes,
                num_tasks=num_tasks,
                refs=refs,
            )
            main = CommandGroup([cmd], name="main")
            if array_size is not None and groups:  # an array cannot be heterogeneous: one group per element
                main = CommandGroup([*groups[0].commands, cmd], name="main")
                groups = []
            return [JobPlan("", [main, *groups], {"array_size": array_size})]

        code = submit(flags, "run_cmd", plan)
        raise typer.Exit(code)
