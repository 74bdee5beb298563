"""Reads back a submitted experiment: job states (sacct on Slurm, nemo-run elsewhere), array units, log files,
and cancels it. Everything starts from the experiment record."""

from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch.records import ExperimentRecord, JobRecord
from pipeline_kit.launch.remote import remote_run
from pipeline_kit.pipeline.render import CANCELLED_RC

FINAL = ("SUCCEEDED", "FAILED", "CANCELLED")
_SLURM = {
    "COMPLETED": "SUCCEEDED",
    "RUNNING": "RUNNING",
    "COMPLETING": "RUNNING",
    "SUSPENDED": "RUNNING",
    "STOPPED": "RUNNING",
    "PENDING": "PENDING",
    "REQUEUED": "PENDING",
    "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING",
    "RESIZING": "PENDING",
    "CONFIGURING": "PENDING",
    "CANCELLED": "CANCELLED",
    "REVOKED": "CANCELLED",
}  # everything else (FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, BOOT_FAIL, DEADLINE, PREEMPTED) is FAILED

_STATE_NAMES = {
    "SUCCEEDED": "SUCCEEDED",
    "FAILED": "FAILED",
    "CANCELLED": "CANCELLED",
    "RUNNING": "RUNNING",
    "PENDING": "PENDING",
    "SUBMITTED": "PENDING",
    "UNKNOWN": "UNKNOWN",
}


def app_state_name(state) -> str:
    """nemo-run/torchx AppState → one of kit's state words."""
    return _STATE_NAMES.get(getattr(state, "name", str(state)), "UNKNOWN")


@dataclass
class JobStatus:
    name: str
    state: str
    failed_units: dict[int, str] = field(default_factory=dict)


def combine(states: list[str]) -> str:
    """One state for several (array units, het components)."""
    if not states:
        return "PENDING"
    for s in ("RUNNING", "PENDING", "FAILED", "CANCELLED", "UNKNOWN"):
        if s in states:
            return s
    return "SUCCEEDED"


def slurm_rows(cluster: ClusterConfig, ids: list[str]) -> dict[str, str]:
    """sacct JobID → kit state, for every allocation of the given jobs (array elements `ID_N`, het `ID+N`)."""
    if not ids:
        return {}
    cmd = f"sacct -n -P -X -j {','.join(ids)} -o JobID,State"
    out = remote_run(cluster, cmd).stdout
    rows = {}
    for line in out.splitlines():
        job_id, _, state = line.partition("|")
        word = state.split()[0] if state.strip() else "PENDING"
        rows[job_id] = _SLURM.get(word, "FAILED")
    return rows


def _slurm_status(cluster: ClusterConfig, job: JobRecord, rows: dict[str, str]) -> JobStatus:
    base = job.slurm_ids[0] if job.slurm_ids else None
    mine = {k: v for k, v in rows.items() if base and (k == base or k.startswith((f"{base}_", f"{base}+")))}
    if job.array_size:
        failed = {}
        for k, v in mine.items():
            unit = k.split("_", 1)[1] if "_" in k else ""
            if unit.isdigit() and v in ("FAILED", "CANCELLED"):
                failed[int(unit)] = v
        states = list(mine.values())
        seen = sum(1 for k in mine if k.partition("_")[2].isdigit())
        if seen < job.array_size and "PENDING" not in states:
            states.append("RUNNING")  # accounting lags behind: units not listed yet are still to come
        return JobStatus(job.name, combine(states), failed)
    if f"{base}+0" in mine:  # het job: the batch script (and so the job's outcome) lives in component 0
        return JobStatus(job.name, mine[f"{base}+0"])
    return JobStatus(job.name, combine(list(mine.values())))


def local_outcome(record: ExperimentRecord, job: JobRecord) -> str | None:
    """SUCCEEDED/FAILED/CANCELLED from the .rc file a none/local job leaves when it ends; None while it has none."""
    try:
        rc = (Path(record.log_dir) / f"{job.name}.rc").read_text().strip()
    except OSError:
        return None
    if rc == CANCELLED_RC:
        return "CANCELLED"
    return "SUCCEEDED" if rc == "0" else "FAILED"


def _local_unit_failures(record: ExperimentRecord, job: JobRecord) -> dict[int, str]:
    failed = {}
    for rc_file in (Path(record.log_dir) / f"{job.name}.units").glob("*.rc"):
        if rc_file.read_text().strip() != "0":
            failed[int(rc_file.stem)] = "FAILED"
    return failed


def experiment_status(cluster: ClusterConfig, record: ExperimentRecord) -> list[JobStatus]:
    if record.executor == "slurm":
        rows = slurm_rows(cluster, [i for j in record.jobs for i in j.slurm_ids])
        return [_slurm_status(cluster, j, rows) for j in record.jobs]
    finished = {j.name: local_outcome(record, j) for j in record.jobs}
    live = {}
    if any(state is None for state in finished.values()):
        live = _nemo_run_states(cluster, record)
    out = []
    for job in record.jobs:
        state = finished[job.name] or live.get(job.task_id, "UNKNOWN")
        out.append(JobStatus(job.name, state, _local_unit_failures(record, job) if job.array_size else {}))
    return out


def _nemo_run_states(cluster: ClusterConfig, record: ExperimentRecord) -> dict[str, str]:
    import contextlib
    import io

    from pipeline_kit.launch.nemorun_env import import_nemo_run

    run = import_nemo_run(cluster)
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            exp = run.Experiment.from_id(record.nemo_run_id)
        except (FileNotFoundError, AssertionError):
            return {}
        with exp:
            statuses = exp.status(return_dict=True) or {}
    return {task: app_state_name(info.get("status")) for task, info in statuses.items()}


def wait_for_states(cluster: ClusterConfig, record: ExperimentRecord, poll_s: float = 1.0) -> dict[str, str]:
    while True:
        statuses = experiment_status(cluster, record)
        if all(s.state in FINAL for s in statuses):
            return {s.name: s.state for s in statuses}
        time.sleep(poll_s)


def cancel_experiment(cluster: ClusterConfig, record: ExperimentRecord) -> list[str]:
    """Cancel every job that may still run; returns the names of the jobs it acted on."""
    if record.executor == "slurm":
        ids = [i for j in record.jobs for i in j.slurm_ids]
        if ids:
            remote_run(cluster, f"scancel {' '.join(ids)}")
        return [j.name for j in record.jobs if j.slurm_ids]
    if record.executor == "none":
        return [job.name for job in record.jobs if job.state is None and _signal_local_job(record, job)]
    import contextlib
    import io

    from pipeline_kit.launch.nemorun_env import import_nemo_run

    run = import_nemo_run(cluster)
    acted = []
    with contextlib.redirect_stdout(io.StringIO()), run.Experiment.from_id(record.nemo_run_id) as exp:
        for job in record.jobs:
            if job.state is None:
                exp.cancel(job.task_id)
                acted.append(job.name)
    return acted


def _signal_local_job(record: ExperimentRecord, job: JobRecord) -> bool:
    """SIGTERM to a none job's script (its pid file; checked to still be that script); its trap stops its commands."""
    import signal

    try:
        pid = int((Path(record.log_dir) / f"{job.name}.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    if b"bash" not in cmdline or local_outcome(record, job) is not None:
        return False
    os.kill(pid, signal.SIGTERM)
    return True


def log_files(cluster: ClusterConfig, record: ExperimentRecord) -> dict[str, list[str]]:
    """Per job, the command logs kit wrote under <log dir>/<job>/ (over ssh when the cluster is remote)."""
    if cluster.ssh_tunnel:
        find = f"cd {shlex.quote(record.log_dir)} 2>/dev/null && find . -mindepth 2 -maxdepth 2 -name '*.log'"
        listing = [p.removeprefix("./") for p in remote_run(cluster, find, check=False).stdout.split()]
    else:
        listing = [str(p.relative_to(record.log_dir)) for p in Path(record.log_dir).glob("*/*.log")]
    out: dict[str, list[str]] = {job.name: [] for job in record.jobs}
    for rel in sorted(listing):
        job_name = rel.split("/", 1)[0]
        if job_name in out:
            out[job_name].append(f"{record.log_dir}/{rel}")
    return out


def tail(cluster: ClusterConfig, path: str, lines: int) -> str:
    if cluster.ssh_tunnel:
        return remote_run(cluster, f"tail -n {lines} {shlex.quote(path)}", check=False).stdout
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])
