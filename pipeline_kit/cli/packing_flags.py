"""The flags that pack a generation's units into jobs (`--num_jobs`, `--max_wall_ratio`, `--nodes_free`,
`--max_startup_share`, `--max_jobs`), declared once for `kit generate`, `kit eval`, `kit plan`; the plan's lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

MAX_WALL_RATIO = 1.25  # pipeline_kit.packing.MAX_WALL_RATIO (not imported: every command imports this module)

MaxWallRatio = Annotated[
    float,
    typer.Option(
        "--max_wall_ratio",
        help="With auto: the fewest GPU-hours whose expected wall time is at most this many times the fastest "
        "plan's (at least 1.0).",
    ),
]
MaxStartupShare = Annotated[
    float,
    typer.Option(
        "--max_startup_share",
        help="With auto where the free nodes are unknown: server start-up at most this share of each job's time.",
    ),
]


@dataclass
class PackingFlags:
    num_jobs: Annotated[
        str | None,
        typer.Option(
            "--num_jobs",
            metavar="N|auto",
            help="Spread the units over N jobs, one server each, or 'auto': the fewest GPU-hours within "
            "--max_wall_ratio of the fastest plan's wall time, from measured (else estimated) start-up, speed and "
            "queue wait (default: 1 locally, auto on Slurm; see `kit plan`).",
        ),
    ] = None
    max_wall_ratio: MaxWallRatio = MAX_WALL_RATIO
    nodes_free: Annotated[
        int | None,
        typer.Option(
            "--nodes_free",
            help="Free nodes the packing and wall time are planned for (default on Slurm: the partition's idle "
            "nodes from sinfo).",
        ),
    ] = None
    max_startup_share: MaxStartupShare = 0.1
    max_jobs: Annotated[int | None, typer.Option("--max_jobs", help="With auto: at most this many jobs.")] = None

    def checked(self) -> PackingFlags:
        """The values checked now (one line naming the flag), before any spec is built."""
        from pipeline_kit.jobs.packing_plan import check_packing_limits, parse_num_jobs

        parse_num_jobs(self.num_jobs)
        check_packing_limits(self.max_startup_share, self.max_jobs, self.max_wall_ratio, self.nodes_free)
        return self


@dataclass
class PlanFlags:
    """`kit plan <command>`'s mark: the command prints its plan and submits nothing (its packing flags are the
    command's own, PackingFlags)."""


def echo_plan(plan, done: int = 0) -> None:
    """The plan's lines (pipeline_kit.packing.describe), or that nothing is left to run."""
    from pipeline_kit.packing import describe

    if plan.units == 0:
        typer.echo(
            f"plan: nothing to run: all {done} units are done" if done else "plan: nothing to run: every unit is done"
        )
        return
    for line in describe(plan):
        typer.echo(line)
