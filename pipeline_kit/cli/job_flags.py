"""The flags every job command shares, declared once. `@job_command` adds them to a command's signature and
hands the command one `JobFlags`; `run_jobs` runs the jobs a builder made from them as one Pipeline."""

import functools
import inspect
import json
import os
from dataclasses import dataclass, fields, is_dataclass
from pathlib import Path
from typing import Annotated, get_type_hints

import typer
from typer._click.exceptions import NoSuchOption, UsageError  # typer >= 0.29 vendors click

from pipeline_kit.errors import UserError
from pipeline_kit.overrides import is_override


@dataclass
class JobFlags:
    cluster: Annotated[
        str | None, typer.Option("--cluster", help="Cluster config name or YAML path (default: none).")
    ] = None
    config_dir: Annotated[
        str | None, typer.Option("--config_dir", help="Folder searched first for cluster configs.")
    ] = None
    expname: Annotated[str | None, typer.Option("--expname", help="Experiment name (default: the command's name).")] = (
        None
    )
    partition: Annotated[str | None, typer.Option("--partition", help="Slurm partition (default: the cluster's).")] = (
        None
    )
    time_min: Annotated[str | None, typer.Option("--time_min", help="Slurm time limit, e.g. 01:00:00.")] = None
    run_after: Annotated[
        list[str] | None, typer.Option("--run_after", help="Start after this experiment (repeatable).")
    ] = None
    dependent_jobs: Annotated[
        int, typer.Option("--dependent_jobs", help="Run N more copies, each after the previous one.")
    ] = 0
    reuse_code: Annotated[
        bool, typer.Option("--reuse_code/--no-reuse_code", help="Reuse code already packed for this commit.")
    ] = True
    log_dir: Annotated[str | None, typer.Option("--log_dir", help="Folder (on the cluster) for the job logs.")] = None
    mount_paths: Annotated[str | None, typer.Option("--mount_paths", help="Extra mounts, comma-separated src:dst.")] = (
        None
    )
    dry_run: Annotated[bool, typer.Option("--dry_run", help="Print what would be submitted; submit nothing.")] = False
    wait: Annotated[bool, typer.Option("--wait", help="On Slurm, block until the jobs end; fail if any failed.")] = (
        False
    )
    wait_timeout: Annotated[
        float | None,
        typer.Option("--wait_timeout", help="With --wait, stop waiting after N seconds (the jobs keep running)."),
    ] = None
    sbatch_kwargs: Annotated[
        str | None,
        typer.Option("--sbatch_kwargs", help='Extra sbatch arguments as JSON, e.g. \'{"qos": "high"}\'.'),
    ] = None
    allow_uncommitted: Annotated[
        bool,
        typer.Option(
            "--allow_uncommitted", help="Run the last commit even with uncommitted changes or untracked code files."
        ),
    ] = False
    extra_args: tuple[str, ...] = ()  # the ++key=value arguments, passed through to the inner script
    plan: object = None  # `kit plan <command>`: its PlanFlags; the command prints its plan and submits nothing

    def sbatch_dict(self) -> dict[str, str]:
        if not self.sbatch_kwargs:
            return {}
        try:
            value = json.loads(self.sbatch_kwargs)
        except json.JSONDecodeError as e:
            raise UserError(
                f'--sbatch_kwargs is not valid JSON ({e.msg} at column {e.colno}); pass e.g. \'{{"qos": "high"}}\'.'
            ) from None
        if not isinstance(value, dict):
            raise UserError('--sbatch_kwargs must be a JSON object, e.g. \'{"qos": "high"}\'.')
        return {str(k): str(v) for k, v in value.items()}

    def options(self, default_name: str):
        """The JobOptions every job builder takes."""
        from pipeline_kit.jobs import JobOptions

        return JobOptions(
            self.expname or default_name,
            partition=self.partition,
            time_min=self.time_min,
            sbatch_kwargs=self.sbatch_dict(),
            run_after=list(self.run_after or []),
            dependent_jobs=self.dependent_jobs,
        )

    def pipeline(self, cluster, expname: str, jobs: list):
        from pipeline_kit.pipeline import Pipeline

        return Pipeline(
            expname,
            cluster,
            jobs,
            log_dir=self.log_dir,
            mount_paths=self.mounts(),
            reuse_code=self.reuse_code,
            allow_uncommitted=self.allow_uncommitted,
            cwd=os.getcwd(),
        )

    def mounts(self) -> list[str]:
        out = []
        for m in (self.mount_paths or "").split(","):
            if not m.strip():
                continue
            src, sep, dst = m.strip().partition(":")
            if not sep or not src or not dst.startswith("/"):
                raise UserError(f"--mount_paths entry '{m}' is not src:/absolute/dst; fix it.")
            out.append(m.strip())
        return out


_NOT_FLAGS = ("extra_args", "plan")  # JobFlags fields that are no command-line flag
_NAMES = {f.name for f in fields(JobFlags) if f.name not in _NOT_FLAGS}


def check_extra_args(ctx: typer.Context) -> tuple[str, ...]:
    """Only `++key=value` passes through; any other unknown argument is a mistake (an unknown --flag is reported
    with a did-you-mean over the command's own flags, by pipeline_kit.cli.main)."""
    for a in ctx.args:
        if not is_override(a):
            if a.startswith("--"):
                raise NoSuchOption(a.split("=", 1)[0], ctx=ctx)
            raise UsageError(f"unexpected argument '{a}'; inner-script arguments are written ++key=value.", ctx=ctx)
    return tuple(ctx.args)


def flag_parameters(cls) -> list[inspect.Parameter]:
    """A flag-set dataclass's fields as keyword-only CLI parameters."""
    hints = get_type_hints(cls, include_extras=True)
    return [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=hints[f.name])
        for f in fields(cls)
        if f.name not in _NOT_FLAGS
    ]


def job_command(app: typer.Typer, name: str, help: str, epilog: str | None = None, plan_flags: type | None = None):
    """Register `fn(flags: JobFlags, ...own options)` as a command that also takes every shared flag; `epilog`
    closes its --help.
    An own parameter annotated with a flag-set dataclass (e.g. ServerFlags) takes that set's flags, declared once.
    `plan_flags`: a flag-set dataclass whose flags the command also takes, handed over as `flags.plan` (`kit plan`
    registers a command's own function again this way)."""

    def decorate(fn):
        hints = get_type_hints(fn, include_extras=True)
        own, sets = [], {}
        for p in inspect.signature(fn).parameters.values():
            if p.name == "flags":
                continue
            if is_dataclass(hints.get(p.name)):
                sets[p.name] = hints[p.name]
                own += flag_parameters(hints[p.name])
            else:
                own.append(p.replace(kind=inspect.Parameter.KEYWORD_ONLY, annotation=hints.get(p.name, p.annotation)))
        ctx_param = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=typer.Context)

        @functools.wraps(fn)
        def wrapper(ctx: typer.Context, **kwargs):
            flags = JobFlags(
                **{k: kwargs.pop(k) for k in list(kwargs) if k in _NAMES},
                extra_args=check_extra_args(ctx),
            )
            if plan_flags is not None:
                flags.plan = plan_flags(**{f.name: kwargs.pop(f.name) for f in fields(plan_flags)})
            for arg, cls in sets.items():
                kwargs[arg] = cls(**{f.name: kwargs.pop(f.name) for f in fields(cls)})
            return fn(flags, **kwargs)

        planning = flag_parameters(plan_flags) if plan_flags is not None else []
        wrapper.__signature__ = inspect.Signature([ctx_param, *own, *flag_parameters(JobFlags), *planning])
        settings = {"allow_extra_args": True, "ignore_unknown_options": True}
        app.command(name=name, help=help, epilog=epilog, context_settings=settings)(wrapper)
        return fn

    return decorate


def port_or_auto(flag: str, port: int | None):
    """A --*port flag: a TCP port, or AUTO_PORT (a free one) when not given."""
    from pipeline_kit.pipeline.model import AUTO_PORT

    if port is not None and not 0 < port < 65536:
        raise UserError(f"{flag}={port} is not a TCP port (1..65535).")
    return AUTO_PORT if port is None else port


def cluster_from(cluster: str | None, config_dir: str | None):
    from pipeline_kit.cluster import load_cluster_config

    return load_cluster_config(cluster, config_dir)


def run_jobs(
    flags: JobFlags, cluster, expname: str, jobs: list, result_log: str | None = None, follow: str = "kit"
) -> int:
    """Run the jobs a builder made as one pipeline and report; returns the exit code. On none/local the log folder
    is named first and the lines of the jobs' logs that `follow` picks (kit's own, or all) show as they come.
    `result_log`: a log, relative to the run's log folder, printed whole once the jobs ended (eval's summary
    table). A failed job's logs end the report."""
    from pipeline_kit.launch import run_pipeline

    pipeline = flags.pipeline(cluster, expname, jobs)
    experiment = run_pipeline(
        pipeline, dry_run=flags.dry_run, wait=flags.wait, wait_timeout=flags.wait_timeout, follow=follow
    )
    if flags.dry_run:
        typer.echo(experiment.dry_run_text, nl=False)
        return 0
    parents = {job.name: [parent.name for parent in job.after] for job in pipeline.jobs}
    for name, ids in experiment.slurm_ids.items():
        state = experiment.states.get(name, "SUBMITTED")
        failed = [parent for parent in parents[name] if experiment.states.get(parent) == "FAILED"]
        if state == "CANCELLED" and failed:
            state = f"skipped: {', '.join(failed)} failed"
        typer.echo(f"{expname}: job {name} {state}" + (f" (slurm job {','.join(ids)})" if ids else ""))
    if cluster.executor == "slurm" and not flags.wait:
        typer.echo(
            f"submitted experiment {expname} (logs in {experiment.log_dir}); follow it with "
            f"`kit status --cluster={flags.cluster or 'none'} {expname}`"
        )
        return 0
    from pipeline_kit.launch.follow import followed, service_logs, unshown_tail

    if result_log:
        typer.echo(experiment.tail(f"{experiment.log_dir}/{result_log}", 10_000), nl=False)
    logs = experiment.logs() if "FAILED" in experiment.states.values() else {}
    was_followed = cluster.executor != "slurm"  # (Slurm: nothing was shown while it ran)
    services = service_logs(pipeline.jobs)
    for name, state in experiment.states.items():
        if state != "FAILED":
            continue
        for path in [p for p in logs[name].logs if not p.endswith("/kit.log")][:4]:
            text = experiment.tail(path, 10)
            if was_followed and followed(Path(path), services):
                text = unshown_tail(text, follow)
            if text:
                typer.echo(f"--- {path} (last lines)")
                typer.echo(text, nl=False)
        report = experiment.why_failed(name)
        if report:  # the root cause last, where the eye lands
            typer.echo(f"--- why job {name} failed:\n{report}", nl=False)
    return 0 if experiment.ok else 1
