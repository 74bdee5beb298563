"""The packing of a generation's units into jobs on a cluster: what `--num_jobs` asks (N, auto, or the executor's
default), with the figures gathered for pipeline_kit.packing's cost model (measured jobs under the cluster's
job_dir, else the model folder's size, the GPUs and tokens_to_generate; the input's rows)."""

from __future__ import annotations

import os
from dataclasses import replace
from functools import lru_cache

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.inference.config import InferenceConfig
from pipeline_kit.jobs.options import JobOptions
from pipeline_kit.measurements import ServerKey, stored_figures
from pipeline_kit.overrides import take_override
from pipeline_kit.packing import (
    CostFigures,
    PackingLimits,
    PackingPlan,
    estimated_figures,
    measured_figures,
    plan_packing,
)
from pipeline_kit.servers.base import ServerSpec
from pipeline_kit.slurm_time import slurm_seconds

AUTO = "auto"
DEFAULT_TOKENS = InferenceConfig.tokens_to_generate


def parse_num_jobs(value: str | int | None) -> int | str | None:
    """--num_jobs: a whole number of at least 1, or 'auto'; None: the executor's default."""
    if value is None or value == AUTO:
        return value
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise UserError(
            f"--num_jobs={value} is not a whole number or 'auto'; e.g. --num_jobs=8 or --num_jobs=auto."
        ) from None
    if number < 1:
        raise UserError(f"--num_jobs must be at least 1, got {number}.")
    return number


def check_packing_limits(max_startup_share: float, max_jobs: int | None) -> None:
    if not 0 < max_startup_share < 1:
        raise UserError(f"--max_startup_share={max_startup_share} is not a share between 0 and 1; e.g. 0.1 for 10%.")
    if max_jobs is not None and max_jobs < 1:
        raise UserError(f"--max_jobs={max_jobs} must be at least 1.")


def asked_jobs(cluster: ClusterConfig, num_jobs: int | str | None) -> int | None:
    """The jobs asked for: N; None for auto (the default on Slurm); 1, the default elsewhere."""
    num_jobs = parse_num_jobs(num_jobs)
    if num_jobs is None:
        return None if cluster.executor == "slurm" else 1
    return None if num_jobs == AUTO else num_jobs


def server_key(server: ServerSpec) -> ServerKey:
    return ServerKey(server.name, server.server_type, server.gpus, server.nodes)


def packing_plan(
    cluster: ClusterConfig,
    server: ServerSpec,
    work: list[tuple[str, int | None, int, tuple[str, ...]]],
    options: JobOptions,
    num_jobs: int | str | None,
    max_startup_share: float = 0.1,
    max_jobs: int | None = None,
    nodes_free: int | None = None,
) -> PackingPlan:
    """`work`: per input (input file, its chunks, units still to run, its ++overrides). The plan for the units to
    run: as asked (--num_jobs=N, 1 on none/Docker) or chosen (auto)."""
    check_packing_limits(max_startup_share, max_jobs)
    units = sum(todo for _, _, todo, _ in work)
    figures = run_figures(cluster, server, work)
    limits = PackingLimits(max_startup_share, max_jobs, time_limit_s(cluster, options))
    jobs = asked_jobs(cluster, num_jobs)
    plan = plan_packing(units, figures, limits, jobs, nodes_free)
    if jobs is not None and parse_num_jobs(num_jobs) is None:
        return replace(plan, reason=f"--num_jobs={jobs}, the default on executor {cluster.executor}")
    return plan


def run_figures(
    cluster: ClusterConfig, server: ServerSpec, work: list[tuple[str, int | None, int, tuple[str, ...]]]
) -> CostFigures:
    """Measured figures of this server (model, type, GPUs, nodes) under the cluster's job_dir, else the estimate."""
    samples = samples_per_unit(work)
    gpus, nodes = (server.gpus, server.nodes) if server.starts_server else (0, 1)
    found = measured_figures(stored_figures(cluster.job_dir, server_key(server)), samples, gpus, nodes)
    if found is not None:
        return found
    tokens = [_tokens_to_generate(overrides) for _, _, todo, overrides in work if todo] or [DEFAULT_TOKENS]
    return estimated_figures(
        model_bytes(server.model) if server.starts_server else None,
        gpus,
        nodes,
        max(tokens),
        samples,
        server.starts_server,
    )


def samples_per_unit(work: list[tuple[str, int | None, int, tuple[str, ...]]]) -> float | None:
    """The mean samples of a unit still to run: each input's rows / its chunks; None when an input is not readable
    here (a path where the job runs, a GenSelect folder)."""
    total = units = 0
    for input_file, chunks, todo, _ in work:
        if not todo:
            continue
        rows = input_rows(input_file)
        if rows is None:
            return None
        total += rows / (chunks or 1) * todo
        units += todo
    return total / units if units else None


def input_rows(path: str) -> int | None:
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return _count_lines(path, stat.st_size, stat.st_mtime_ns) if os.path.isfile(path) else None


@lru_cache(maxsize=64)
def _count_lines(path: str, size: int, mtime_ns: int) -> int | None:
    """Lines of a file (a last one without its newline counted), cached by the file's size and time."""
    lines, last = 0, b"\n"
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                lines, last = lines + block.count(b"\n"), block[-1:]
    except OSError:
        return None
    return lines + (last != b"\n")


def model_bytes(model: str) -> int | None:
    """The model folder's size on disk (its weights, mostly); None when it is not a folder here."""
    if not os.path.isdir(model):
        return None
    total = 0
    for root, _, files in os.walk(model):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def time_limit_s(cluster: ClusterConfig, options: JobOptions) -> float | None:
    """A job's time limit on Slurm (--time_min, else its partition's), in seconds; None elsewhere or unknown."""
    if cluster.executor != "slurm":
        return None
    limit = cluster.time_limit(options.partition, options.time_min)
    return float(slurm_seconds(limit)) if limit else None


def _tokens_to_generate(overrides: tuple[str, ...]) -> int:
    value, _ = take_override(overrides, "inference.tokens_to_generate")
    try:
        return int(value) if value not in (None, "null") else DEFAULT_TOKENS  # null: whatever fits, unknown here
    except ValueError:
        return DEFAULT_TOKENS  # the generation config's own check names it
