"""`kit status`, `kit logs` and `kit cancel`: read back or stop an experiment by name, through its handle
(`pipeline_kit.launch.Experiment`)."""

import sys
from typing import Annotated

import typer

ClusterOpt = Annotated[str | None, typer.Option(help="Cluster config name or YAML path (default: none).")]
ConfigDirOpt = Annotated[str | None, typer.Option("--config_dir", help="Folder searched first for cluster configs.")]
SCHEDULER_FILES_SHOWN = 4  # an array has one srun output per element
ExpnameArg = Annotated[str, typer.Argument(help="The experiment name (--expname at submission).")]
VerboseOpt = Annotated[
    bool,
    typer.Option(
        "--verbose",
        help="Also what each generation job measured: its server's start-up and queue wait (s), then one line per "
        "unit: samples, tokens, seconds, samples/s, tokens/s, and requests tried again (a 429, a 5xx, a lost "
        "connection). For a rerun that had nothing to do (every unit was done already), those of the last run that "
        "generated.",
    ),
]


def _load(cluster: str | None, config_dir: str | None, expname: str):
    from pipeline_kit.launch import Experiment

    return Experiment.load(expname, cluster, config_dir)


def _rate(amount: int, seconds: float) -> str:
    """Per second: three significant digits, whole numbers from 100 up."""
    if seconds <= 0:
        return "-"
    rate = amount / seconds
    return f"{rate:.0f}" if rate >= 100 else f"{rate:.3g}"


def figure_lines(figures) -> list[str]:
    """One job's (array element's) measurements (a measurements.JobFigures), compact: the job line, one per unit."""
    element = f"[{figures.element}]" if figures.element else ""
    startup, queue_wait = (f"{v:.1f} s" if v is not None else "-" for v in (figures.startup_s, figures.queue_wait_s))
    prompt = f", prompt {figures.prompt}" if figures.prompt else ""
    lines = [
        f"  {figures.job}{element}: start-up {startup}, queue wait {queue_wait}, generation "
        f"{figures.generation_s:.1f} s ({figures.server.describe()}{prompt})"
    ]
    lines += [
        f"    {u.label}: {u.samples} samples, {u.tokens} tokens, {u.seconds:.1f} s, {_rate(u.samples, u.seconds)} "
        f"samples/s, {_rate(u.tokens, u.seconds)} tokens/s, {u.retries} retries"
        + (f", {u.clamped} max_tokens clamped to the context window" if u.clamped else "")
        for u in figures.units
    ]
    if figures.nothing_to_do:
        lines.append(f"    nothing to do: its {figures.units_done_before} unit(s) were done already")
    return lines


def idle_note(state: str, figures: list) -> str | None:
    """Why a job of a rerun has no unit figures, when it had nothing to do: it SUCCEEDED and either its client said
    every unit was done already, or it measured nothing at all (on none and Docker, a rerun that finds every unit
    done at submission runs no client). None when its figures are its own to show."""
    if state != "SUCCEEDED" or any(f.units for f in figures):
        return None
    if figures and all(f.nothing_to_do for f in figures):
        return f"{sum(f.units_done_before for f in figures)} unit(s) were done already"
    return "it requested no samples" if not figures else None


def status_figure_lines(experiment, statuses, figures: dict) -> dict[str, list[str]]:
    """Per job, its measurements' lines; for a job of a rerun that had nothing to do, one line saying so, then the
    figures of the last run of the experiment that generated (none, and no line, where no run of it measured a
    unit: a job that is not a generation job)."""
    notes = {s.name: note for s in statuses if (note := idle_note(s.state, figures.get(s.name, [])))}
    earlier = experiment.last_work(list(notes)) if notes else {}
    out: dict[str, list[str]] = {}
    for s in statuses:
        if s.name not in notes:
            out[s.name] = [line for f in figures.get(s.name, []) for line in figure_lines(f)]
        elif s.name in earlier:
            run_id, found = earlier[s.name]
            said = f"  {s.name}: this run had nothing to do ({notes[s.name]}); below, run {run_id}, the last that"
            out[s.name] = [f"{said} generated:"] + [line for f in found for line in figure_lines(f)]
        elif figures.get(s.name):
            out[s.name] = [f"  {s.name}: this run had nothing to do ({notes[s.name]}); no earlier run measured a unit"]
    return out


def register(app: typer.Typer) -> None:
    @app.command(
        help="One line per job: <job name> <STATE> (and one per failed array unit); why a job failed goes to stderr. "
        "With --verbose, indented under each generation job, what it measured (start-up and queue wait: '-' when "
        "unknown or the server was not kit's)."
    )
    def status(
        expname: ExpnameArg, cluster: ClusterOpt = None, config_dir: ConfigDirOpt = None, verbose: VerboseOpt = False
    ) -> None:
        experiment = _load(cluster, config_dir, expname)
        statuses = experiment.statuses()
        figures = status_figure_lines(experiment, statuses, experiment.figures()) if verbose else {}
        for s in statuses:
            typer.echo(f"{s.name} {s.state}")
            for unit, state in sorted(s.failed_units.items()):
                typer.echo(f"{s.name}[{unit}] {state}")
            for line in figures.get(s.name, []):
                typer.echo(line)
            if s.state == "FAILED":  # why, on stderr: stdout stays one `<job> <STATE>` line per job for scripts
                report = (f"slurm: {s.reason}\n" if s.reason else "") + experiment.why_failed(s.name, lines=6)
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
