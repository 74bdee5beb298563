"""Cancelling a submitted experiment: scancel for the Slurm jobs still pending or running, SIGTERM to a none job's
script, nemo-run's cancel for Docker containers; a job that already ended is left alone."""

from __future__ import annotations

import contextlib
import io
import os
import signal
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch import slurm_states
from pipeline_kit.launch.job_states import FINAL
from pipeline_kit.launch.job_status import local_outcome
from pipeline_kit.launch.nemorun_env import import_nemo_run
from pipeline_kit.launch.records import ExperimentRecord, JobRecord
from pipeline_kit.launch.remote import remote_run
from pipeline_kit.pipeline.render import CANCELLED_RC


def cancel_experiment(cluster: ClusterConfig, record: ExperimentRecord) -> list[str]:
    """Cancel every job that may still run; returns the names of the jobs it cancelled (a job that had already
    ended, in any state, is left alone and not listed)."""
    if record.executor == "slurm":
        rows = slurm_states.slurm_rows(cluster, [i for j in record.jobs for i in j.slurm_ids])
        live = [
            j for j in record.jobs if j.slurm_ids and slurm_states.slurm_status(cluster, j, rows).state not in FINAL
        ]
        if live:
            remote_run(cluster, f"scancel {' '.join(i for j in live for i in j.slurm_ids)}")
        return [j.name for j in live]
    if record.executor == "none":
        return [job.name for job in record.jobs if job.state is None and _signal_local_job(record, job)]

    run = import_nemo_run(cluster)
    acted = []
    with contextlib.redirect_stdout(io.StringIO()), run.Experiment.from_id(record.nemo_run_id) as exp:
        for job in record.jobs:
            if job.state is None and local_outcome(record, job) is None:
                exp.cancel(job.task_id)
                acted.append(job.name)
    for job in acted:  # a killed container cannot record that it was cancelled: its script never ends
        rc_file = Path(record.log_dir) / f"{job}.rc"
        if not rc_file.exists():
            write_atomic(rc_file, CANCELLED_RC + "\n")
    return acted


def _signal_local_job(record: ExperimentRecord, job: JobRecord) -> bool:
    """SIGTERM to a none job's script (its pid file; checked to still be that script); its trap stops its commands."""

    try:
        pid = int((Path(record.log_dir) / f"{job.name}.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    if b"bash" not in cmdline or local_outcome(record, job) is not None:
        return False
    os.kill(pid, signal.SIGTERM)
    return True
