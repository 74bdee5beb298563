"""Experiment records: one JSON file per submission under <job_dir>/kit/<expname>/, written atomically, so that
`kit status/logs/cancel` and `--run_after` find an experiment from a later process."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline_kit.atomic import write_atomic  # also used as records.write_atomic (submit.py)
from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError


@dataclass
class JobRecord:
    name: str
    task_id: str
    groups: list[str]
    array_size: int | None = None
    # one id; a het job's components share it. An array larger than the cluster's MaxArraySize is split into
    # several Slurm arrays: one id each, whose element i is unit `unit_offsets[k] + i`
    slurm_ids: list[str] = field(default_factory=list)
    state: str | None = None  # final state, once known without asking the scheduler
    unit_offsets: list[int] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)  # what the job writes (an input of a --run_after job)


@dataclass
class ExperimentRecord:
    expname: str
    run_id: str
    executor: str
    log_dir: str
    nemo_run_id: str | None = None
    jobs: list[JobRecord] = field(default_factory=list)
    detached: bool = False  # none's jobs, started by kit in their own sessions, without nemo-run (launch/detached.py)
    locks: list[str] = field(default_factory=list)  # its output locks (pipeline_kit.output_lock), for `kit cancel`

    def job(self, name: str) -> JobRecord:
        return next(j for j in self.jobs if j.name == name)


def records_dir(cluster: ClusterConfig, expname: str) -> Path:
    return Path(cluster.job_dir) / "kit" / expname


def save_record(cluster: ClusterConfig, record: ExperimentRecord) -> None:
    write_atomic(records_dir(cluster, record.expname) / f"{record.run_id}.json", json.dumps(asdict(record), indent=1))


def run_files(cluster: ClusterConfig, expname: str) -> list[Path]:
    """The record files of every submission of `expname` on this cluster, oldest first (run ids start with the time)."""
    return sorted(records_dir(cluster, expname).glob("*.json"))


def read_record(path: Path) -> ExperimentRecord:
    data = json.loads(path.read_text())
    data["jobs"] = [JobRecord(**j) for j in data["jobs"]]
    return ExperimentRecord(**data)


def load_latest(cluster: ClusterConfig, expname: str) -> ExperimentRecord:
    """The newest submission of `expname` on this cluster."""
    runs = run_files(cluster, expname)
    if not runs:
        raise UserError(
            f"no experiment named '{expname}' was submitted to {cluster.source} (looked in {records_dir(cluster, expname)}); "
            "check the name and --cluster."
        )
    return read_record(runs[-1])


def recorded_outputs(cluster: ClusterConfig) -> list[str]:
    """The outputs every recorded job on this cluster writes (all experiments, all runs): kit's own folders, never
    code to pack (launch.worktree). A record that cannot be read names none."""
    out: list[str] = []
    for path in (Path(cluster.job_dir) / "kit").glob("*/*.json"):
        try:
            jobs = json.loads(path.read_text())["jobs"]
            out += [o for job in jobs for o in job.get("outputs", ())]  # records older than `outputs` lack it
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return out
