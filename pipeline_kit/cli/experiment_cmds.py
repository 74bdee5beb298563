"""`kit status`, `kit logs` and `kit cancel`: read back or stop an experiment by name, through its handle
(`pipeline_kit.launch.Experiment`)."""

import sys
from typing import Annotated

import typer

ClusterOpt = Annotated[str | None, typer.Option(help="Cluster config name or YAML path (default: none).")]
ConfigDirOpt = Annotated[str | None, typer.Option("--config_dir", help="Folder searched first for cluster configs.")]
SCHEDULER_FILES_SHOWN = 4  # an array has one srun output per element
ExpnameArg = Annotated[str, typer.Argument(help="The experiment name (--expname at submission).")]


def _load(cluster: str | None, config_dir: str | None, expname: str):
    from pipeline_kit.launch import Experiment

    return Experiment.load(expname, cluster, config_dir)


def register(app: typer.Typer) -> None:
    @app.command(
        help="One line per job: <job name> <STATE> (and one per failed array unit); why a job failed goes to stderr."
    )
    def status(expname: ExpnameArg, cluster: ClusterOpt = None, config_dir: ConfigDirOpt = None) -> None:
        experiment = _load(cluster, config_dir, expname)
        for s in experiment.statuses():
            typer.echo(f"{s.name} {s.state}")
            for unit, state in sorted(s.failed_units.items()):
                typer.echo(f"{s.name}[{unit}] {state}")
            if s.state == "FAILED":  # why, on stderr: stdout stays one `<job> <STATE>` line per job for scripts
                report = experiment.why_failed(s.name, lines=6)
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
        experiment = _load(cluster, config_dir, expname)
        startup = experiment.container_startup(lines)
        for job, found in experiment.logs().items():
            typer.echo(f"== job {job}: {len(found.logs)} log(s) in {experiment.log_dir}")
            if startup[job]:
                typer.echo(f"--- container start-up (pyxis/enroot), from the srun output in {experiment.scheduler_dir}")
                typer.echo("\n".join(startup[job]))
            for path in found.logs:
                typer.echo(f"--- {path}")
                typer.echo(experiment.tail(path, lines), nl=False)
            shown = found.scheduler_outputs[:SCHEDULER_FILES_SHOWN]
            for path in shown:
                typer.echo(f"--- {path} (scheduler output)")
                typer.echo(experiment.tail(path, lines), nl=False)
            if len(found.scheduler_outputs) > len(shown):
                more = len(found.scheduler_outputs) - len(shown)
                typer.echo(f"--- (+{more} more scheduler output files beside these)")

    @app.command(help="Cancel every job of an experiment.")
    def cancel(expname: ExpnameArg, cluster: ClusterOpt = None, config_dir: ConfigDirOpt = None) -> None:
        acted = _load(cluster, config_dir, expname).cancel()
        typer.echo(f"cancelled {expname}: {', '.join(acted) if acted else 'nothing was running'}")
