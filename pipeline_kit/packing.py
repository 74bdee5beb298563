"""How many units each job of a generation runs (`--num_jobs=auto`): a cost model from measured or estimated figures
(pipeline_kit.packing_figures), the partition's time limit and the user's caps, and a FIFO queue model of wall time
on the free nodes; auto takes the fewest GPU-hours within --max_wall_ratio of the fastest plan's wall time. Pure:
no I/O, no heavy imports (the planner, `kit plan` and perf/simulate_packing.py use it alike)."""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field

from pipeline_kit.packing_figures import CostFigures

TIME_MARGIN = 0.8  # a job plans to use at most this share of its time limit
MAX_WALL_RATIO = 1.25  # auto: the fewest GPU-hours whose wall time is within this factor of the fastest plan's


@dataclass(frozen=True)
class PackingLimits:
    """`max_startup_share`: where the free nodes are unknown, start-up at most this share of each job's time;
    `max_jobs`: at most this many jobs (None: up to one per unit); `time_limit_s`: the partition's (None: none
    known); `margin`: the share of it a job plans to use; `max_wall_ratio`: where the free nodes are known, the
    fewest GPU-hours whose wall time is within this factor of the fastest plan's."""

    max_startup_share: float = 0.1
    max_jobs: int | None = None
    time_limit_s: float | None = None
    margin: float = TIME_MARGIN
    max_wall_ratio: float = MAX_WALL_RATIO


def choose_units_per_job(units: int, figures: CostFigures, limits: PackingLimits) -> tuple[int, str]:
    """Units per job and why, where the free nodes are unknown. k_share = ceil(S (1 - s) / (s u)) makes start-up S
    at most share s of a job of k units of u seconds; k_time = floor((margin T - S) / u) fits the time limit T; then
    jobs = ceil(units / k) is capped by max_jobs (the cap wins over the time limit, and says so)."""
    if units <= 1:
        return 1, "one unit"
    unit_s = figures.unit_s
    if figures.nodes > 1:
        return units, "a multi-node server runs every unit in one job"
    if unit_s is None or unit_s <= 0:
        k, why = 1, "one unit per job: the seconds per unit are unknown"
    elif figures.startup_s <= 0:
        k, why = 1, "one unit per job: no server start-up to share"
    else:
        share = limits.max_startup_share
        k = math.ceil(figures.startup_s * (1 - share) / (share * unit_s) - 1e-9)
        why = f"start-up at most {share:.0%} of each job"
        if limits.time_limit_s is not None:
            fits = math.floor((limits.margin * limits.time_limit_s - figures.startup_s) / unit_s)
            if fits < k:
                k = max(fits, 1)
                why = f"each job within {limits.margin:.0%} of the {_duration(limits.time_limit_s)} time limit"
                if fits < 1:
                    why = f"one unit per job, yet a unit does not fit {limits.margin:.0%} of the time limit"
    k = min(max(k, 1), units)
    if limits.max_jobs is not None and math.ceil(units / k) > limits.max_jobs:
        k = math.ceil(units / limits.max_jobs)
        why = f"--max_jobs={limits.max_jobs}"
    return k, why


def trade_wall_time(
    units: int, figures: CostFigures, limits: PackingLimits, nodes_free: int
) -> tuple[int, int, int | None, str]:
    """Jobs, the fastest plan's jobs, the next cheaper plan's jobs, and why, on `nodes_free` free nodes (a single-node
    server with a start-up and known seconds per unit). The candidates: each number of units per job k the caps
    allow (at least units / max_jobs, at most what fits the time limit's margin), each with its fewest jobs
    ceil(units / k). Their wall time is the queue wait plus the FIFO makespan; the fastest is the least (the fewer
    jobs on a tie); the choice is the fewest jobs, so the fewest GPU-hours (start-up is paid once per job), whose
    wall time is within max_wall_ratio of the fastest's. The next cheaper plan is the fastest of those with fewer
    jobs than the choice (None: there is none): what a larger --max_wall_ratio would buy first."""
    unit_s = figures.unit_s
    k_low = -(-units // limits.max_jobs) if limits.max_jobs else 1
    k_high, fit = units, ""
    if limits.time_limit_s is not None:
        fits = math.floor((limits.margin * limits.time_limit_s - figures.startup_s) / unit_s)
        k_high = min(units, max(fits, 1))
        if fits < 1:
            fit = f"; a unit does not fit {limits.margin:.0%} of the time limit"
    if k_low > k_high:  # the cap wins over the time limit, and says so
        jobs = -(-units // k_low)
        return jobs, jobs, None, f"--max_jobs={limits.max_jobs}"
    candidates = sorted({-(-units // k) for k in range(k_low, k_high + 1)})
    walls = {jobs: plan_wall_s(units, figures, jobs, nodes_free) for jobs in candidates}
    fastest = min(candidates, key=lambda jobs: (walls[jobs], jobs))
    bound = limits.max_wall_ratio * walls[fastest] * (1 + 1e-9)
    chosen = min(jobs for jobs in candidates if walls[jobs] <= bound)
    cheaper = min((jobs for jobs in candidates if jobs < chosen), key=lambda jobs: (walls[jobs], jobs), default=None)
    why = f"the fewest GPU-hours within {limits.max_wall_ratio:g}x the fastest plan's wall time{fit}"
    return chosen, fastest, cheaper, why


def plan_wall_s(units: int, figures: CostFigures, jobs: int, nodes_free: int) -> float:
    """Queue wait + the FIFO makespan of `units` split over `jobs` jobs (shares differing by at most one, the
    larger first) on `nodes_free` nodes."""
    small, extra = divmod(units, jobs)
    durations = [figures.startup_s + (small + (i < extra)) * figures.unit_s for i in range(jobs)]
    return figures.queue_wait_s + makespan(durations, figures.nodes, nodes_free)


@dataclass(frozen=True)
class PackingPlan:
    """`jobs` jobs over `units` units (shares differing by at most one), with the costs that follow;
    `fastest_jobs`: the fastest plan's jobs where auto traded GPU-hours for wall time (None elsewhere);
    `cheaper_jobs`: there, the next cheaper plan's, beyond --max_wall_ratio (None: none, or no trade)."""

    units: int
    jobs: int
    figures: CostFigures
    reason: str
    nodes_free: int | None = None  # None: as many as the jobs need
    nodes_source: str = ""  # where nodes_free came from, or the assumption made without it, in words
    time_limit_s: float | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)
    fastest_jobs: int | None = None
    cheaper_jobs: int | None = None

    @property
    def units_per_job(self) -> int:
        return -(-self.units // self.jobs)

    def durations(self, jobs: int | None = None) -> list[float] | None:
        """Each job's seconds (start-up + its units), for `jobs` jobs (default: the plan's); None when unknown."""
        jobs = jobs or self.jobs
        unit_s = self.figures.unit_s
        if unit_s is None:
            return None
        small, extra = divmod(self.units, jobs)
        return [self.figures.startup_s + (small + (i < extra)) * unit_s for i in range(jobs)]

    @property
    def rate(self) -> int:
        """What an hour of a job costs: GPUs held, or nodes for a CPU-only server."""
        return self.figures.gpus * self.figures.nodes or self.figures.nodes

    def startup_hours(self, jobs: int | None = None) -> float:
        return (jobs or self.jobs) * self.figures.startup_s * self.rate / 3600

    def gpu_hours(self, jobs: int | None = None) -> float | None:
        """Start-up + generation hours of `jobs` jobs (default: the plan's); None when unknown."""
        generation = self.generation_hours()
        return None if generation is None else self.startup_hours(jobs) + generation

    def generation_hours(self) -> float | None:
        unit_s = self.figures.unit_s
        return None if unit_s is None else self.units * unit_s * self.rate / 3600

    def wall_s(self, jobs: int | None = None, nodes_free: int | None = None) -> float | None:
        """Queue wait + makespan of `jobs` jobs (default: the plan's) on `nodes_free` nodes (default: the plan's,
        else as many as the jobs need); None when the seconds per unit are unknown."""
        durations = self.durations(jobs)
        if durations is None:
            return None
        free = nodes_free or self.nodes_free or len(durations) * self.figures.nodes
        return self.figures.queue_wait_s + makespan(durations, self.figures.nodes, free)


def plan_packing(
    units: int,
    figures: CostFigures,
    limits: PackingLimits,
    jobs: int | None = None,
    nodes_free: int | None = None,
    notes: tuple[str, ...] = (),
) -> PackingPlan:
    """`jobs` given (--num_jobs=N, or 1 on none/Docker): the costs of that packing; None: chosen here, trading
    GPU-hours for wall time on `nodes_free` free nodes (trade_wall_time), or where they are unknown (None) by the
    start-up share and the time limit (choose_units_per_job)."""
    fastest = cheaper = None
    if jobs is not None:
        jobs, reason = max(min(jobs, units), 1), "as given"
    elif nodes_free is not None and _tradable(units, figures):
        jobs, fastest, cheaper, why = trade_wall_time(units, figures, limits, nodes_free)
        reason = f"auto: {why}"
    else:
        k, why = choose_units_per_job(units, figures, limits)
        jobs, reason = -(-units // k), f"auto: {why}"
    return PackingPlan(
        units, jobs, figures, reason, nodes_free=nodes_free, time_limit_s=limits.time_limit_s, notes=notes,
        fastest_jobs=fastest, cheaper_jobs=cheaper,
    )  # fmt: skip


def _tradable(units: int, figures: CostFigures) -> bool:
    """Whether the packing changes wall time against GPU-hours: several units, a single-node server with a
    start-up to share, and known seconds per unit (elsewhere choose_units_per_job says why it keeps one way)."""
    unit_s = figures.unit_s
    return units > 1 and figures.nodes == 1 and figures.startup_s > 0 and unit_s is not None and unit_s > 0


def makespan(durations: list[float], nodes_per_job: int, nodes_free: int) -> float:
    """Wall time of jobs started first come, first served as nodes free up (each holds `nodes_per_job` nodes until
    it ends), on `nodes_free` nodes; queue waits from other users' jobs are not counted."""
    if len(durations) * nodes_per_job <= nodes_free:
        return max(durations, default=0.0)  # every job starts at once
    free, now, running, end = max(nodes_free, nodes_per_job), 0.0, [], 0.0
    for duration in durations:
        while free < nodes_per_job:
            now = max(now, heapq.heappop(running))
            free += nodes_per_job
        free -= nodes_per_job
        heapq.heappush(running, now + duration)
        end = max(end, now + duration)
    return end


def simulation_table(units: int, figures: CostFigures, limits: PackingLimits, nodes_free: list[int]) -> list[str]:
    """One job, auto, the next cheaper plan (what a larger --max_wall_ratio would buy first), the fastest plan and
    one unit per job at each number of free nodes: jobs, GPU-hours, wall time (queue wait + the FIFO makespan),
    against one unit per job and against the fastest plan; a Markdown table."""
    lines = [
        f"{units} units of {figures.samples_per_unit:g} problems at {figures.seconds_per_sample:.3g} s per problem "
        f"({figures.unit_s:.0f} s per unit), start-up {figures.startup_s / 60:g} min, {_count(figures.gpus, 'GPU')} "
        f"per job, time limit {_duration(limits.time_limit_s) if limits.time_limit_s else 'none'}, queue wait "
        f"{_duration(figures.queue_wait_s)}; auto: the fewest GPU-hours within {limits.max_wall_ratio:g}x the "
        "fastest plan's wall time",
        "",
        "| free nodes | packing | jobs | units/job | GPU-hours (start-up + generation) | wall time "
        "| vs one unit per job | vs the fastest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for free in nodes_free:
        baseline = plan_packing(units, figures, limits, jobs=units, nodes_free=free)
        auto = plan_packing(units, figures, limits, nodes_free=free)
        fastest = plan_packing(units, figures, limits, jobs=auto.fastest_jobs or auto.jobs, nodes_free=free)
        base_hours, base_wall, fastest_wall = baseline.gpu_hours(), baseline.wall_s(), fastest.wall_s()
        rows = [("1 job", plan_packing(units, figures, limits, jobs=1, nodes_free=free)), ("**auto**", auto)]
        if auto.cheaper_jobs is not None:
            rows.append(("next cheaper", plan_packing(units, figures, limits, jobs=auto.cheaper_jobs, nodes_free=free)))
        for name, plan in [*rows, ("fastest", fastest), (f"{units} jobs", baseline)]:
            startup, hours, wall = plan.startup_hours(), plan.gpu_hours(), plan.wall_s()
            over = limits.time_limit_s and max(plan.durations()) > limits.time_limit_s
            lines.append(
                f"| {free} | {name} | {plan.jobs} | {plan.units_per_job} | {hours:,.0f} "
                f"({startup:,.0f} + {hours - startup:,.0f}) | {wall / 3600:.2f} h"
                f"{' (over the time limit)' if over else ''} | {hours / base_hours - 1:+.0%} GPU-hours, "
                f"{wall / base_wall:.2f}x wall | {wall / fastest_wall:.2f}x wall |"
            )
    return lines


def describe(plan: PackingPlan, prefix: str = "plan: ") -> list[str]:
    """The lines `kit plan` prints and every --dry_run of generate/eval starts with."""
    shown = "GPU-hours"
    lines = [
        f"{_count(plan.units, 'unit')} in {_count(plan.jobs, 'job')}"
        + (f" of {_per_job(plan.units, plan.jobs)} units" if plan.jobs > 1 and plan.units > plan.jobs else "")
        + f" ({plan.reason})"
    ]
    gen = plan.generation_hours()
    cpu = plan.figures.gpus == 0
    hours = f"start-up {_hours(plan.startup_hours())}, generation {_hours(gen)}"
    if cpu:
        lines.append(f"expected {shown}: start-up 0, generation 0 (no GPUs held); node-hours: {hours}")
    else:
        held = f"{_count(plan.figures.gpus, 'GPU')} x {_count(plan.figures.nodes, 'node')}"
        lines.append(f"expected {shown}: {hours} ({held} per job)")
    wall = plan.wall_s()
    free = plan.nodes_free or plan.jobs * plan.figures.nodes
    if wall is None:
        lines.append("expected wall time: unknown (so are the seconds per unit)")
    else:
        nodes = f" ({plan.nodes_source})" if plan.nodes_source else ""
        queue, waited = plan.figures.queue_source, plan.figures.queue_wait_s
        lines.append(
            f"expected wall time: {_duration(wall)} on {free} free node{'s' if free > 1 else ''}"
            + (nodes if plan.nodes_free else " (as many as the jobs)")
            + (f", queue wait {_duration(waited)} included ({queue})" if waited else f", {queue}" if queue else "")
            + f"; longest job {_duration(max(plan.durations()))}"
            + (f" of a {_duration(plan.time_limit_s)} limit" if plan.time_limit_s else "")
        )  # fmt: skip
    if plan.nodes_free is None and plan.nodes_source and wall is not None:
        lines.append(
            f"free nodes unknown ({plan.nodes_source}): the wall time is for as many nodes as the jobs"
            + (
                ", and auto packs by the start-up share and the time limit; --nodes_free=N trades GPU-hours for "
                "wall time"
                if plan.reason.startswith("auto")
                else "; --nodes_free=N plans for another number"
            )
        )
    if plan.fastest_jobs is not None and wall is not None:
        fastest_wall = plan.wall_s(plan.fastest_jobs)
        lines.append(f"chosen:  {_packing(plan, plan.jobs)} ({wall / fastest_wall:.2f}x the fastest plan's wall time)")
        lines.append(f"fastest: {_packing(plan, plan.fastest_jobs)}")
        if plan.cheaper_jobs is not None:
            ratio = math.ceil(plan.wall_s(plan.cheaper_jobs) / fastest_wall * 100 - 1e-9) / 100
            lines.append(
                f"cheaper: {_packing(plan, plan.cheaper_jobs)} ({_saved(plan, plan.cheaper_jobs)} vs chosen; "
                f"--max_wall_ratio={ratio:.2f} allows it)"
            )
    label = _hours_label(plan)
    if gen is not None and plan.jobs < plan.units:
        one = plan.startup_hours(plan.units) + gen
        saved = one - (plan.startup_hours() + gen)
        lines.append(
            f"vs one unit per job ({plan.units} jobs): {_hours(one)} {label}, {_hours(saved)} {label} saved "
            f"({saved / one:.0%}); its wall time {_duration(plan.wall_s(plan.units, free))} on the same nodes"
        )
    elif gen is not None:
        lines.append(f"one unit per job: nothing saved vs one unit per job ({_hours(plan.startup_hours())} {label})")
    lines.append(f"figures: {plan.figures.source}")
    lines += [f"  assumed: {a}" for a in plan.figures.assumptions]
    lines += list(plan.notes)
    return [prefix + line for line in lines]


def _packing(plan: PackingPlan, jobs: int) -> str:
    """One packing of the plan's units in a line: jobs, units per job, GPU-hours, wall time."""
    label = _hours_label(plan)
    return (
        f"{_count(jobs, 'job')} of {_per_job(plan.units, jobs)} unit{'s' if plan.units > jobs else ''}, "
        f"{_hours(plan.gpu_hours(jobs))} {label}, "
        f"wall time {_duration(plan.wall_s(jobs))}"
    )


def _saved(plan: PackingPlan, jobs: int) -> str:
    """What `jobs` jobs cost against the plan's: '-34% GPU-hours'."""
    return f"{plan.gpu_hours(jobs) / plan.gpu_hours() - 1:+.0%} {_hours_label(plan)}"


def _hours_label(plan: PackingPlan) -> str:
    """What the plan's hours count: GPU-hours, or node-hours for a CPU-only server."""
    return "node-hours" if plan.figures.gpus == 0 else "GPU-hours"


def _per_job(units: int, jobs: int) -> str:
    """The units each of `jobs` jobs runs: '20', or '62 or 61' where the shares differ by one."""
    small, extra = divmod(units, jobs)
    return " or ".join(str(n) for n in ([small + 1] if extra else []) + ([small] if small and jobs > extra else []))


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def _hours(value: float | None) -> str:
    if value is None:
        return "unknown"
    return f"{value:.3g}" if value < 100 else f"{value:,.0f}"


def _duration(seconds: float | None) -> str:
    if seconds is None:
        return "unknown"
    seconds = round(seconds)
    if seconds < 60:
        return f"{seconds}s"
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"
