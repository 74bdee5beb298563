"""The packing of a generation's units into jobs on a cluster: what `--num_jobs` asks (N, auto, or the executor's
default), with the figures gathered for pipeline_kit.packing's cost model (measured jobs under the cluster's
job_dir, else the model folder's size, the GPUs and tokens_to_generate; the input's rows; the partition's recorded
queue waits) and the free nodes (--nodes_free, else the partition's idle nodes from sinfo)."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from functools import lru_cache

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.inference.config import InferenceConfig
from pipeline_kit.jobs.options import JobOptions
from pipeline_kit.measurements import JobFigures, ServerKey, stored_figures
from pipeline_kit.overrides import take_override
from pipeline_kit.packing import MAX_WALL_RATIO, PackingLimits, PackingPlan, plan_packing
from pipeline_kit.packing_figures import CostFigures, estimated_figures, measured_figures, measured_queue_wait
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


def check_packing_limits(
    max_startup_share: float,
    max_jobs: int | None,
    max_wall_ratio: float = MAX_WALL_RATIO,
    nodes_free: int | None = None,
) -> None:
    if not 0 < max_startup_share < 1:
        raise UserError(f"--max_startup_share={max_startup_share} is not a share between 0 and 1; e.g. 0.1 for 10%.")
    if max_jobs is not None and max_jobs < 1:
        raise UserError(f"--max_jobs={max_jobs} must be at least 1.")
    if not max_wall_ratio >= 1:  # NaN too
        raise UserError(
            f"--max_wall_ratio={max_wall_ratio} must be at least 1.0 (a wall time at most this many times the "
            "fastest plan's); e.g. 1.25."
        )
    if nodes_free is not None and nodes_free < 1:
        raise UserError(f"--nodes_free={nodes_free} must be at least 1.")


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
    max_wall_ratio: float = MAX_WALL_RATIO,
) -> PackingPlan:
    """`work`: per input (input file, its chunks, units still to run, its ++overrides). The plan for the units to
    run: as asked (--num_jobs=N, 1 on none/Docker) or chosen (auto) on the free nodes (`nodes_free`, else
    free_nodes asks)."""
    check_packing_limits(max_startup_share, max_jobs, max_wall_ratio, nodes_free)
    units = sum(todo for _, _, todo, _ in work)
    partition = options.partition or cluster.partition
    stored = stored_figures(cluster.job_dir)  # every server's: a queue wait is the partition's
    figures = with_queue_wait(cluster, run_figures(cluster, server, work, stored), stored, partition)
    limits = PackingLimits(max_startup_share, max_jobs, time_limit_s(cluster, options), max_wall_ratio=max_wall_ratio)
    jobs = asked_jobs(cluster, num_jobs)
    source = "--nodes_free" if nodes_free is not None else ""
    if nodes_free is None and units and figures.unit_s is not None:  # the wall time can be told: on how many nodes
        nodes_free, source = free_nodes(cluster, partition)
    plan = replace(plan_packing(units, figures, limits, jobs, nodes_free), nodes_source=source)
    if jobs is not None and parse_num_jobs(num_jobs) is None:
        return replace(plan, reason=f"--num_jobs={jobs}, the default on executor {cluster.executor}")
    return plan


def free_nodes(cluster: ClusterConfig, partition: str | None) -> tuple[int | None, str]:
    """The nodes the run's jobs may start on, and whence (in words); None and why where nothing can tell: on
    none/Docker 1 (the jobs run one after another on this machine); on Slurm the partition's idle nodes now, from
    `sinfo` here (not over an ssh tunnel)."""
    if cluster.executor != "slurm":
        return 1, f"executor {cluster.executor} runs the jobs one after another on this machine"
    if cluster.ssh_tunnel is not None:
        return None, "sinfo is not asked over the ssh tunnel"
    where = f"partition {partition}" if partition else "the cluster"
    states = _sinfo_states(shutil.which("sinfo"), partition)
    if states is None:
        return None, "sinfo cannot be run here"
    if not states:
        return None, f"sinfo lists no {where}"
    idle = sum(count for count, state in states if state == "idle")
    if not idle:
        return None, f"no node of {where} is idle now (sinfo)"
    return idle, f"idle now in {where}, from sinfo; --nodes_free=N plans for another number"


@lru_cache(maxsize=8)
def _sinfo_states(sinfo: str | None, partition: str | None) -> tuple[tuple[int, str], ...] | None:
    """(nodes, state) per line of `sinfo` for the partition, asked once per process (the plan that is printed is the
    plan that is submitted); None when sinfo cannot be run."""
    if sinfo is None:
        return None
    command = [sinfo, "-h", "-o", "%D %T", *(["-p", partition] if partition else [])]
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    if proc.returncode != 0:
        return None
    lines = (line.split() for line in proc.stdout.splitlines())
    return tuple((int(n), state) for n, state, *_ in (f for f in lines if len(f) >= 2) if n.isdigit())


def with_queue_wait(
    cluster: ClusterConfig, figures: CostFigures, stored: list[JobFigures], partition: str | None
) -> CostFigures:
    """The figures with the partition's recorded queue wait (measured_queue_wait), on Slurm; 0, said so, where none
    was recorded."""
    if cluster.executor != "slurm" or not partition:
        return figures
    found = measured_queue_wait(stored, partition)
    if found is None:
        return replace(figures, queue_source=f"no queue wait recorded for partition {partition} (counted as 0)")
    wait, source = found
    return replace(figures, queue_wait_s=wait, queue_source=source)


def run_figures(
    cluster: ClusterConfig,
    server: ServerSpec,
    work: list[tuple[str, int | None, int, tuple[str, ...]]],
    stored: list[JobFigures] | None = None,
) -> CostFigures:
    """Measured figures of this server (model, type, GPUs, nodes) under the cluster's job_dir (`stored`: every
    figure read there already), else the estimate."""
    samples = samples_per_unit(work)
    gpus, nodes = (server.gpus, server.nodes) if server.starts_server else (0, 1)
    key = server_key(server)
    mine = [f for f in stored if f.server == key] if stored is not None else stored_figures(cluster.job_dir, key)
    found = measured_figures(mine, samples, gpus, nodes)
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
