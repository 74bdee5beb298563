"""The figures a packing plan (pipeline_kit.packing) is computed from: a server's start-up, seconds per sample and
samples per unit, the partition's queue wait; measured by earlier jobs (pipeline_kit.measurements) or a stated
estimate. Pure: no I/O, no heavy imports."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

from pipeline_kit.measurements import JobFigures

# The estimate used where no job of this server has been measured; each is printed with the plan that uses it.
STARTUP_FIXED_S = 120.0  # container start, imports, CUDA graphs / warm-up, before the weights count
LOAD_BYTES_PER_S = 500e6  # reading the weights from a shared filesystem
TOKENS_PER_S_PER_GPU = 400.0  # a batched server's total decode throughput, per GPU
TOKENS_PER_S_CPU = 20.0  # a CPU-only server's
RECENT_JOBS = 5  # the measured figures are the median over this many last jobs
RECENT_SUBMISSIONS = 10  # the queue wait is the median over this many last submissions to the partition


@dataclass(frozen=True)
class CostFigures:
    """What a plan is computed from. `startup_s`: job start to server ready (0: a server kit does not start);
    `seconds_per_sample` of one server at its request pool's concurrency (None: unknown); `samples_per_unit`: the
    mean over the run's units (None: unknown); `gpus`/`nodes`: what one job holds (0 GPUs: a CPU-only server or
    none); `source`: where the figures came from, in words; `assumptions`: the estimate's, one line each;
    `queue_wait_s`: from submission to the first job's start (0: none recorded), and `queue_source`: whence."""

    startup_s: float
    seconds_per_sample: float | None
    samples_per_unit: float | None
    gpus: int
    nodes: int
    source: str
    assumptions: tuple[str, ...] = ()
    queue_wait_s: float = 0.0
    queue_source: str = ""

    @property
    def unit_s(self) -> float | None:
        """Seconds of generation per unit, or None when unknown."""
        if self.seconds_per_sample is None or self.samples_per_unit is None:
            return None
        return self.seconds_per_sample * self.samples_per_unit


def measured_figures(
    jobs: list[JobFigures], samples_per_unit: float | None, gpus: int, nodes: int
) -> CostFigures | None:
    """The median start-up and seconds per sample over the last RECENT_JOBS measured jobs (oldest first, as
    measurements.stored_figures gives them); samples per unit from those jobs' units when the caller has none."""
    recent = [j for j in jobs if j.seconds_per_sample is not None][-RECENT_JOBS:]
    if not recent:
        return None
    starts = [j.startup_s for j in recent if j.startup_s is not None]
    startup = statistics.median(starts) if starts else 0.0
    per_sample = statistics.median(j.seconds_per_sample for j in recent)
    source = f"measured {len(recent)} time{'s' if len(recent) > 1 else ''} ({recent[-1].server.describe()})"
    if samples_per_unit is None:
        unit_samples = [u.samples for j in recent for u in j.units if u.samples]
        samples_per_unit = statistics.median(unit_samples) if unit_samples else None
        source += "; samples per unit from those jobs (the input is not readable here)" if unit_samples else ""
    return CostFigures(startup, per_sample, samples_per_unit, gpus, nodes, source)


def measured_queue_wait(jobs: list[JobFigures], partition: str | None) -> tuple[float, str] | None:
    """The median queue wait of the last RECENT_SUBMISSIONS submissions to `partition` (any server), and where it
    came from; None when none was recorded there. A submission's wait is its first-started element's (a later
    element may have waited for the run's own jobs, which the queue model counts already)."""
    if not partition:
        return None
    first: dict[tuple[str, str, int], float] = {}
    for j in jobs:
        if j.partition != partition or j.queue_wait_s is None or j.job_started_at is None:
            continue
        submission = (j.expname, j.job, round(j.job_started_at - j.queue_wait_s))
        first[submission] = min(first.get(submission, math.inf), j.queue_wait_s)
    if not first:
        return None
    recent = list(first.values())[-RECENT_SUBMISSIONS:]  # jobs come oldest first, and so do their submissions
    wait = statistics.median(recent)
    submissions = f"{len(recent)} submission{'s' if len(recent) > 1 else ''}"
    return wait, f"the median of {submissions} to partition {partition} recorded here"


def estimated_figures(
    model_bytes: int | None,
    gpus: int,
    nodes: int,
    tokens_per_sample: int,
    samples_per_unit: float | None,
    starts_server: bool = True,
) -> CostFigures:
    """The stated estimate where nothing was measured: start-up = STARTUP_FIXED_S + model bytes / LOAD_BYTES_PER_S;
    seconds per sample = tokens_to_generate / (TOKENS_PER_S_PER_GPU x GPUs), or / TOKENS_PER_S_CPU without GPUs."""
    if not starts_server:
        why = "an external server: no start-up, no GPUs held; its speed unmeasured"
        return CostFigures(0.0, None, samples_per_unit, 0, 1, "estimated", (why,))
    total_gpus = gpus * nodes
    rate = TOKENS_PER_S_PER_GPU * total_gpus if total_gpus else TOKENS_PER_S_CPU
    loading = (model_bytes or 0) / LOAD_BYTES_PER_S
    assumptions = [
        f"start-up {STARTUP_FIXED_S:.0f} s + weights at {LOAD_BYTES_PER_S / 1e6:.0f} MB/s"
        + (
            f" ({model_bytes / 1e9:.3g} GB: {loading:.0f} s)"
            if model_bytes
            else " (model folder not readable here: 0 s)"
        ),
        f"{rate:.0f} tokens/s per server ("
        + (f"{TOKENS_PER_S_PER_GPU:.0f} per GPU x {total_gpus}" if total_gpus else "a CPU-only server")
        + f"), each sample the whole tokens_to_generate={tokens_per_sample}",
    ]
    if samples_per_unit is None:
        assumptions.append("samples per unit unknown (the input is not readable here)")
    return CostFigures(
        STARTUP_FIXED_S + loading, tokens_per_sample / rate, samples_per_unit, gpus, nodes, "estimated",
        tuple(assumptions),
    )  # fmt: skip


def given_figures(
    startup_min: float,
    tokens_per_s: float,
    problems_per_unit: int,
    tokens_per_problem: int,
    gpus: int,
    queue_wait_min: float = 0.0,
) -> CostFigures:
    """Figures as `kit plan simulate` and perf/simulate_packing.py take them: one node per job."""
    per_problem = tokens_per_problem / tokens_per_s
    queue = "given" if queue_wait_min else ""
    return CostFigures(
        startup_min * 60, per_problem, problems_per_unit, gpus, 1, "given", (), queue_wait_min * 60, queue
    )
