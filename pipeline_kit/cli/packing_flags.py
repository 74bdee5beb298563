"""The flags that pack a generation's units into jobs (`--num_jobs`, `--max_startup_share`, `--max_jobs`), shared by
`kit generate` and `kit eval`, and `kit plan`'s own (`--nodes_free`); the plan's lines as they are printed."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from typing import Annotated

import typer


@dataclass
class PackingFlags:
    num_jobs: Annotated[
        str | None,
        typer.Option(
            "--num_jobs",
            metavar="N|auto",
            help="Spread the units over N jobs, one server each, or 'auto': units per job chosen from measured (else "
            "estimated) start-up and speed (default: 1 locally, auto on Slurm; see `kit plan`).",
        ),
    ] = None
    max_startup_share: Annotated[
        float,
        typer.Option("--max_startup_share", help="With auto: server start-up at most this share of each job's time."),
    ] = 0.1
    max_jobs: Annotated[int | None, typer.Option("--max_jobs", help="With auto: at most this many jobs.")] = None

    def checked(self) -> PackingFlags:
        """The values checked now (one line naming the flag), before any spec is built."""
        from pipeline_kit.jobs.packing_plan import check_packing_limits, parse_num_jobs

        parse_num_jobs(self.num_jobs)
        check_packing_limits(self.max_startup_share, self.max_jobs)
        return self


@dataclass
class PlanFlags:
    """`kit plan`'s own flags, after those of the command it plans."""

    nodes_free: Annotated[
        int | None,
        typer.Option(
            "--nodes_free",
            help="Free nodes the wall time is computed for (default on Slurm: the partition's idle nodes from "
            "sinfo; else as many as the jobs).",
        ),
    ] = None


def nodes_free(cluster, flags: PlanFlags | None, partition: str | None) -> tuple[int | None, str]:
    """--nodes_free; else on Slurm the idle nodes `sinfo` counts in the partition (None when it cannot say); and
    where the number came from, in words. Not asked in a dry run (`flags` None)."""
    if flags is None:
        return None, ""
    if flags.nodes_free is not None:
        if flags.nodes_free < 1:
            from pipeline_kit.errors import UserError

            raise UserError(f"--nodes_free={flags.nodes_free} must be at least 1.")
        return flags.nodes_free, "--nodes_free"
    if cluster.executor != "slurm" or cluster.ssh_tunnel is not None or not shutil.which("sinfo"):
        return None, ""
    command = ["sinfo", "-h", "-t", "idle", "-o", "%D", *(["-p", partition] if partition else [])]
    try:
        out = subprocess.run(command, capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None, ""
    idle = sum(int(n) for n in out.split() if n.isdigit())
    where = f"partition {partition}" if partition else "the cluster"
    return (idle, f"idle now in {where}, from sinfo; --nodes_free=N plans for another number") if idle else (None, "")


def echo_plan(plan, done: int = 0, nodes_source: str = "") -> None:
    """The plan's lines (pipeline_kit.packing.describe), or that nothing is left to run."""
    from dataclasses import replace

    from pipeline_kit.packing import describe

    plan = replace(plan, nodes_source=nodes_source)
    if plan.units == 0:
        typer.echo(
            f"plan: nothing to run: all {done} units are done" if done else "plan: nothing to run: every unit is done"
        )
        return
    for line in describe(plan):
        typer.echo(line)
