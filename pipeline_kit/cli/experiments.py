"""`kit status`, `kit logs` and `kit cancel`: read back or stop an experiment by name."""

import sys
from typing import Annotated

import typer

ClusterOpt = Annotated[str | None, typer.Option(help="Cluster config name or YAML path (default: none).")]
ConfigDirOpt = Annotated[str | None, typer.Option("--config_dir", help="Folder searched first for cluster configs.")]
SCHEDULER_FILES_SHOWN = 4  # an array has one srun output per element
ExpnameArg = Annotated[str, typer.Argument(help="The experiment name (--expname at submission).")]


def _load(cluster: str | None, config_dir: str | None, expname: str):
    from pipeline_kit.cli.job_flags import cluster_from
    from pipeline_kit.launch.records import load_latest

    config = cluster_from(cluster, config_dir)
    return config, load_latest(config, expname)


def register(app: typer.Typer) -> None:
    @app.command(
        help="One line per job: <job name> <STATE> (and one per failed array unit); why a job failed goes to stderr."
    )
    def status(expname: ExpnameArg, cluster: ClusterOpt = None, config_dir: ConfigDirOpt = None) -> None:
        from pipeline_kit.launch.monitor import experiment_status, failure_report

        config, record = _load(cluster, config_dir, expname)
        for s in experiment_status(config, record):
            typer.echo(f"{s.name} {s.state}")
            for unit, state in sorted(s.failed_units.items()):
                typer.echo(f"{s.name}[{unit}] {state}")
            if s.state == "FAILED":  # why, on stderr: stdout stays one `<job> <STATE>` line per job for scripts
                report = failure_report(config, record, s.name, lines=6)
                sys.stdout.flush()
                typer.echo("".join(f"  {line}\n" for line in report.splitlines()), err=True, nl=False)

    @app.command(
        help="Each job's container start-up errors (Slurm: pyxis/enroot), its logs' last lines, then the scheduler's "
        "output files (sbatch/srun)."
    )
    def logs(
        expname: ExpnameArg,
        cluster: ClusterOpt = None,
        config_dir: ConfigDirOpt = None,
        lines: Annotated[int, typer.Option("--lines", help="Lines to show from the end of each log.")] = 20,
    ) -> None:
        from pipeline_kit.launch.monitor import (
            container_startup_lines,
            log_files,
            nemo_run_dir,
            scheduler_outputs,
            tail,
        )

        config, record = _load(cluster, config_dir, expname)
        startup = container_startup_lines(config, record, lines)
        scheduler = scheduler_outputs(config, record)
        for job, paths in log_files(config, record).items():
            typer.echo(f"== job {job}: {len(paths)} log(s) in {record.log_dir}")
            if startup[job]:
                typer.echo(
                    f"--- container start-up (pyxis/enroot), from the srun output in {nemo_run_dir(config, record)}"
                )
                typer.echo("\n".join(startup[job]))
            for path in paths:
                typer.echo(f"--- {path}")
                typer.echo(tail(config, path, lines), nl=False)
            shown = scheduler[job][:SCHEDULER_FILES_SHOWN]
            for path in shown:
                typer.echo(f"--- {path} (scheduler output)")
                typer.echo(tail(config, path, lines), nl=False)
            if len(scheduler[job]) > len(shown):
                typer.echo(f"--- (+{len(scheduler[job]) - len(shown)} more scheduler output files beside these)")

    @app.command(help="Cancel every job of an experiment.")
    def cancel(expname: ExpnameArg, cluster: ClusterOpt = None, config_dir: ConfigDirOpt = None) -> None:
        from pipeline_kit.launch.monitor import cancel_experiment

        config, record = _load(cluster, config_dir, expname)
        acted = cancel_experiment(config, record)
        typer.echo(f"cancelled {expname}: {', '.join(acted) if acted else 'nothing was running'}")
