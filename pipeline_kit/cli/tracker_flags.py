"""The experiment-tracker flags that `kit summarize` and `kit eval` (for its summarize job) share, declared once:
W&B with --wandb_project, MLflow with --mlflow_uri (pipeline_kit.evaluation.trackers)."""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass, fields
from typing import Annotated, get_type_hints

import typer

from pipeline_kit.cli.job_flags import flag_parameters

Opt = typer.Option


@dataclass
class TrackerFlags:
    wandb_project: Annotated[
        str | None,
        Opt("--wandb_project", help="Log the metrics and a samples table to this Weights & Biases project."),
    ] = None
    wandb_name: Annotated[
        str | None, Opt("--wandb_name", help="The W&B run's name (default: the results folder's name).")
    ] = None
    wandb_group: Annotated[str | None, Opt("--wandb_group", help="The W&B run's group.")] = None
    mlflow_uri: Annotated[
        str | None,
        Opt(
            "--mlflow_uri",
            help="Log the metrics and a samples table to this MLflow tracking URI (file:///path, http://...).",
        ),
    ] = None
    mlflow_experiment: Annotated[str, Opt("--mlflow_experiment", help="The MLflow experiment (made when missing).")] = (
        "pipeline-kit"
    )
    mlflow_run_name: Annotated[
        str | None, Opt("--mlflow_run_name", help="The MLflow run's name (default: the results folder's name).")
    ] = None
    log_samples: Annotated[
        int,
        Opt("--log_samples", help="Problems per benchmark in the trackers' samples table (0: no table)."),
    ] = 20

    def trackers(self, imports: bool = True):
        """The checked Trackers; with `imports`, each one asked for is imported now (a missing package is a
        one-line error before any work); `kit eval` leaves that to its summarize job's Python check."""
        from pipeline_kit.evaluation.trackers import Trackers

        trackers = Trackers(**{f.name: getattr(self, f.name) for f in fields(self)})
        trackers.check() if imports else trackers.check_flags()
        return trackers


def takes_tracker_flags(fn):
    """`fn(..., trackers: TrackerFlags)` as a typer command function that takes the tracker flags one by one."""
    hints = get_type_hints(fn, include_extras=True)
    own = [
        p.replace(annotation=hints.get(p.name, p.annotation))
        for p in inspect.signature(fn).parameters.values()
        if p.name != "trackers"
    ]

    @functools.wraps(fn)
    def wrapper(**kwargs):
        flags = TrackerFlags(**{f.name: kwargs.pop(f.name) for f in fields(TrackerFlags)})
        return fn(**kwargs, trackers=flags)

    wrapper.__signature__ = inspect.Signature([*own, *flag_parameters(TrackerFlags)])
    return wrapper
