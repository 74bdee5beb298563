"""`kit run_cmd`: run one shell command as a job on any cluster (with --with_sandbox, beside a sandbox whose
address it finds in $KIT_SANDBOX_ADDRESS)."""

import shlex
from typing import Annotated

import typer

from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command, run_jobs
from pipeline_kit.cli.sandbox_flags import SandboxFlags


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
        mpi: Annotated[
            str | None, typer.Option("--mpi", help="Slurm: srun's MPI plugin for the tasks, e.g. pmix.")
        ] = None,
    ) -> int:
        from pipeline_kit.jobs import RunCmdSpec, run_cmd_jobs

        text = " ".join([command, *(shlex.quote(a) for a in flags.extra_args)]) if command.strip() else command
        spec = RunCmdSpec(
            text,
            num_gpus=num_gpus,
            num_nodes=num_nodes,
            num_tasks=num_tasks,
            container=container,
            array_size=array_size,
            mpi=mpi,
            sandbox=sandbox.job_spec(),
        )
        cluster = cluster_from(flags.cluster, flags.config_dir)
        options = flags.options("run_cmd")
        jobs = run_cmd_jobs(cluster, spec, options)
        raise typer.Exit(run_jobs(flags, cluster, options.expname, jobs, follow="all"))  # the command's own output
