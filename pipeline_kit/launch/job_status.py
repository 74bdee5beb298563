"""The states of a submitted experiment's jobs, read back from its record: Slurm's accounting (slurm_states.py), the
.rc file a none/local job leaves when it ends, its detached script, or nemo-run; and waiting until every job has
a final state (a Slurm job the scheduler forgot is LOST)."""

from __future__ import annotations

import contextlib
import io
import sys
import time
from pathlib import Path

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch import slurm_states
from pipeline_kit.launch.detached import script_alive
from pipeline_kit.launch.job_states import FINAL, JobStatus, app_state_name
from pipeline_kit.launch.nemorun_env import import_nemo_run
from pipeline_kit.launch.records import ExperimentRecord, JobRecord
from pipeline_kit.pipeline.render import CANCELLED_RC

LOST_AFTER_S = 60.0


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
        rows = slurm_states.slurm_rows(cluster, [i for j in record.jobs for i in j.slurm_ids])
        return [slurm_states.slurm_status(cluster, j, rows) for j in record.jobs]
    finished = {j.name: local_outcome(record, j) for j in record.jobs}
    live = {}
    if any(state is None for state in finished.values()):
        live = _detached_states(record) if record.detached else _nemo_run_states(cluster, record)
    out = []
    for job in record.jobs:
        state = finished[job.name] or live.get(job.task_id, "UNKNOWN")
        out.append(JobStatus(job.name, state, _local_unit_failures(record, job) if job.array_size else {}))
    return out


def _detached_states(record: ExperimentRecord) -> dict[str, str]:
    """none, run detached: RUNNING while a job's script runs, PENDING before it started, FAILED when it ended
    without writing its outcome (killed); keyed by task id as nemo-run's states are."""
    out = {}
    for job in record.jobs:
        alive = script_alive(record.log_dir, job.name)
        if alive is False:  # its outcome may have landed just before it exited
            out[job.task_id] = local_outcome(record, job) or "FAILED"
        else:
            out[job.task_id] = "RUNNING" if alive else "PENDING"
    return out


def _nemo_run_states(cluster: ClusterConfig, record: ExperimentRecord) -> dict[str, str]:

    run = import_nemo_run(cluster)
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            exp = run.Experiment.from_id(record.nemo_run_id)
        except (FileNotFoundError, AssertionError):
            return {}
        with exp:
            statuses = exp.status(return_dict=True) or {}
    return {task: app_state_name(info.get("status")) for task, info in statuses.items()}


def wait_for_states(
    cluster: ClusterConfig,
    record: ExperimentRecord,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
    lost_after_s: float = LOST_AFTER_S,
) -> dict[str, str]:
    """Poll until every job has a final state; returns job name → state.

    On Slurm a job that neither sacct nor squeue has known for `lost_after_s` (since it was last seen, or since
    the wait began) is LOST: it is not waited for any longer, and one line on stderr says so. After `timeout_s`
    (None: no limit) the wait gives up with one line on stderr and returns the states as they are, the
    unfinished ones not final."""
    started = time.monotonic()
    last_seen = {job.name: started for job in record.jobs}
    lost: set[str] = set()
    while True:
        if record.executor == "slurm":
            rows = slurm_states.slurm_rows(cluster, [i for j in record.jobs for i in j.slurm_ids if j.name not in lost])
            statuses = [slurm_states.slurm_status(cluster, j, rows) for j in record.jobs]
            now = time.monotonic()
            unseen = []
            for job, status in zip(record.jobs, statuses, strict=True):
                if job.name in lost:
                    status.state = "LOST"
                elif any(slurm_states.rows_of(i, rows) for i in job.slurm_ids):
                    last_seen[job.name] = now
                elif status.state not in FINAL:
                    unseen.append(job)
            queued = slurm_states.squeue_known(cluster, [i for j in unseen for i in j.slurm_ids]) if unseen else set()
            for job, status in zip(record.jobs, statuses, strict=True):
                if job not in unseen:
                    continue
                if queued & set(job.slurm_ids):
                    last_seen[job.name] = now
                elif now - last_seen[job.name] >= lost_after_s:
                    lost.add(job.name)
                    status.state = "LOST"
                    ids = ",".join(job.slurm_ids) or "no id"
                    print(
                        f"kit: job {job.name} (slurm job {ids}) is LOST: neither sacct nor squeue has known it for "
                        f"{now - last_seen[job.name]:.0f} s (purged, or another cluster's?); not waiting for it",
                        file=sys.stderr,
                        flush=True,
                    )
        else:
            statuses = experiment_status(cluster, record)
        if all(s.state in FINAL for s in statuses):
            return {s.name: s.state for s in statuses}
        if timeout_s is not None and time.monotonic() - started >= timeout_s:
            unfinished = ", ".join(f"{s.name} ({s.state})" for s in statuses if s.state not in FINAL)
            print(
                f"kit: stopped waiting after {timeout_s:g} s; not finished: {unfinished}", file=sys.stderr, flush=True
            )
            return {s.name: s.state for s in statuses}
        time.sleep(poll_s)
