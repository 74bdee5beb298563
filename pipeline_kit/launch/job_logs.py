"""A submitted experiment's logs: the command logs kit writes under <log dir>/<job>/, the sbatch and srun output
nemo-run keeps for Slurm jobs, and the container start-up lines (pyxis, enroot) in them; read over ssh when the
cluster is remote."""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch.records import ExperimentRecord
from pipeline_kit.launch.remote import remote_run


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
    """The last lines of a log, ending on a newline (a log cut off mid-line does not run into what follows)."""
    if cluster.ssh_tunnel:
        text = remote_run(cluster, f"tail -n {lines} {shlex.quote(path)}", check=False).stdout
    else:
        try:
            with open(path, errors="replace") as f:
                text = "".join(f.readlines()[-lines:])
        except FileNotFoundError:
            text = ""
    return text if not text or text.endswith("\n") else text + "\n"


def job_of_task(record: ExperimentRecord, task: str) -> str | None:
    """The job a nemo-run task folder belongs to: its name, or `<name>-partK` for a split array."""
    return next((j.name for j in record.jobs if task == j.name or task.startswith(f"{j.name}-part")), None)


def scheduler_outputs(cluster: ClusterConfig, record: ExperimentRecord) -> dict[str, list[str]]:
    """Per Slurm job, the sbatch and srun output files nemo-run keeps (what the batch script and the scheduler
    wrote: container start-up, `kit: service ... exited`, srun errors)."""
    out: dict[str, list[str]] = {job.name: [] for job in record.jobs}
    if record.executor != "slurm" or not record.nemo_run_id:
        return out
    root = nemo_run_dir(cluster, record)
    listing = remote_run(cluster, f"cd {shlex.quote(root)} 2>/dev/null && ls -1 -- */*.out", check=False).stdout
    for rel in sorted(listing.split()):
        job = job_of_task(record, rel.split("/", 1)[0])
        if job is not None:
            out[job].append(f"{root}/{rel}")
    return out


# pyxis and enroot report a container that did not start only in the srun output that nemo-run keeps
STARTUP_PATTERN = "pyxis|enroot"


def nemo_run_dir(cluster: ClusterConfig, record: ExperimentRecord) -> str:
    """Where nemo-run keeps an experiment's batch scripts and srun output on the cluster."""
    return experiment_folder(cluster, record.expname, record.nemo_run_id)


def experiment_folder(cluster: ClusterConfig, expname: str, exp_id: str) -> str:
    """nemo-run's folder of experiment `exp_id` on the Slurm side: under the SSH tunnel's job_dir, else
    job_dir/experiments."""
    base = cluster.ssh_tunnel.job_dir if cluster.ssh_tunnel else os.path.join(cluster.job_dir, "experiments")
    return os.path.join(base, expname, exp_id)  # as nemo-run joins it


def container_startup_lines(cluster: ClusterConfig, record: ExperimentRecord, lines: int) -> dict[str, list[str]]:
    """Per Slurm job, the first `lines` non-blank pyxis/enroot lines of its srun output, under a `<file>:` line
    for each output file (one grep, over ssh when the cluster is remote)."""
    out: dict[str, list[str]] = {job.name: [] for job in record.jobs}
    files: dict[str, str] = {}
    if record.executor != "slurm" or not record.nemo_run_id:
        return out
    grep = (
        f"cd {shlex.quote(nemo_run_dir(cluster, record))} 2>/dev/null && "
        f"grep -H -E {shlex.quote(STARTUP_PATTERN)} -- */*.out 2>/dev/null"
    )
    found = remote_run(cluster, grep, check=False).stdout.splitlines()
    for hit in found:
        path, _, line = hit.partition(":")
        job = job_of_task(record, path.split("/", 1)[0])
        if job is None or not line.split("pyxis:", 1)[-1].strip() or len(out[job]) >= lines:
            continue
        if files.get(job) != path:
            files[job] = path
            out[job].append(f"{path}:")
        out[job].append(f"  {line}")
    return out
