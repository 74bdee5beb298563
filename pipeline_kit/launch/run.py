"""Running a Pipeline: check the jobs and their inputs, pick a run id and log folder, pack the code once, then
submit (or dry-run) through a Submission. It returns the experiment's handle (launch.experiment)."""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
import time
from pathlib import Path

from pipeline_kit import output_lock
from pipeline_kit.atomic import missing_folders, remove_made_folders, write_atomic
from pipeline_kit.errors import SubmissionRefused, UserError
from pipeline_kit.launch import records
from pipeline_kit.launch.experiment import Experiment
from pipeline_kit.launch.mounts import user_mounts
from pipeline_kit.launch.packaging import PackagedCode, package_code, plan_code
from pipeline_kit.launch.submit import Submission
from pipeline_kit.pipeline.pipeline import Pipeline
from pipeline_kit.pipeline.render import resolve_ports

_run_counter = itertools.count()


def new_run_id() -> str:
    """Time, microseconds, pid and a per-process counter: unique for runs of one name in one second and process."""
    now = time.time()
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(now))
    return f"{stamp}-{int(now % 1 * 1e6):06d}-{os.getpid()}-{next(_run_counter):03d}"


def run_pipeline(
    pipeline: Pipeline,
    dry_run: bool = False,
    wait: bool | None = None,
    wait_timeout: float | None = None,
    follow: str | None = None,
) -> Experiment:
    """Submit every job; returns the experiment's handle (status, wait, logs, cancel, failures). `wait`: None, the
    executor's way: on none/local the jobs run while this waits (in the foreground: Ctrl-C cancels them), on Slurm
    it returns after submission; True: wait on every executor (on Slurm for at most `wait_timeout` seconds; a job
    Slurm no longer knows is LOST and not waited for); False: return once submitted, on none too, whose jobs then
    run detached (launch/detached.py), so that the handle's status, wait and cancel work mid-run as on Slurm
    (Docker still waits). `follow` ("kit" or "all", see launch.follow): on none/local, say where the logs go, then
    show those lines of them while the jobs work. A dry run's handle holds only the scripts and requests
    (`dry_run_text`).

    Raises SubmissionRefused (a UserError) when an input check, the cluster config, sbatch or the Docker daemon
    refuses the pipeline: nothing of it runs then. A job that fails does not raise: see `Experiment.wait`."""
    try:
        detach = wait is False and pipeline.cluster.executor == "none"
        experiment = _submit(pipeline, dry_run, None if detach else follow, detach)
    except SubmissionRefused:
        raise
    except UserError as e:
        raise SubmissionRefused(str(e)) from e
    if wait and pipeline.cluster.executor == "slurm" and not dry_run:  # (none/local waited for the jobs)
        experiment.wait(wait_timeout)
    return experiment


def _submit(pipeline: Pipeline, dry_run: bool, follow: str | None, detach: bool = False) -> Experiment:
    """Everything up to the jobs being queued (on none/local: run), where a UserError means nothing runs. The run
    locks the outputs kit can see (pipeline_kit.output_lock) from here on: on none/local until its jobs end; on
    Slurm its queued jobs hold the locks (until they end or `kit cancel`). A detached none run (wait=False) holds
    them only while it is being submitted."""
    jobs = pipeline.ordered_jobs()
    run_id = new_run_id()
    log_dir = pipeline.log_dir or f"{pipeline.cluster_root()}/logs/{pipeline.name}/{run_id}"
    external = {job.name: [records.load_latest(pipeline.cluster, e) for e in job.run_after] for job in jobs}
    writers = input_writers(pipeline, external, dry_run)
    outputs = locked_outputs(pipeline)
    own = kit_paths(pipeline, log_dir)
    if dry_run:
        for line in output_lock.live_holders(outputs):
            print(line, file=sys.stderr, flush=True)
        _, _, key = plan_code(pipeline.cwd, pipeline.allow_uncommitted, pipeline.cluster, own)
        root = pipeline.cluster_root()
        code = PackagedCode(key, f"{pipeline.cluster.job_dir}/code/{key}", f"{root}/code/{key}", True)
        submission = Submission(pipeline, jobs, log_dir, resolve_ports(jobs), code, external, writers)
        return Experiment(pipeline.name, run_id, pipeline.cluster, dry_run_text=submission.dry_run())
    # packed first: the survey of the working tree (launch.worktree) sees the outputs as they were, without the lock
    code = package_code(pipeline.cluster, pipeline.cwd, pipeline.allow_uncommitted, pipeline.reuse_code, own)
    after = tuple(sorted({name for job in jobs for name in job.run_after}))
    locks = output_lock.acquire(outputs, pipeline.name, run_id, pipeline.cluster.name, after=after)
    plans = PlanFiles()
    try:
        plans.write(pipeline)
        submission = Submission(pipeline, jobs, log_dir, resolve_ports(jobs), code, external, writers)
        submission.locks = [str(p) for p in locks.paths]
        if pipeline.cluster.executor != "slurm":
            os.makedirs(log_dir, exist_ok=True)
        experiment = submission.submit_detached(run_id) if detach else submission.submit(run_id, follow)
        if pipeline.cluster.executor == "slurm":
            locks.update(run_id=run_id, slurm_ids=[i for ids in experiment.slurm_ids.values() for i in ids])
            locks.keep()
    except UserError:  # refused: nothing was queued, so nothing was planned either
        plans.restore()
        raise
    finally:
        locks.release()
    sys.stdout.flush()
    return experiment


class PlanFiles:
    """Each job's plan_files, written where kit can see them (see `visible_path`) when the run is submitted, and taken
    back (with the folders made for them) when the submission is refused."""

    def __init__(self) -> None:
        self.before: dict[str, str | None] = {}  # what each file held before (None: it did not exist)
        self.made: list[Path] = []  # the folders made for them, innermost first

    def write(self, pipeline: Pipeline) -> None:
        for job in pipeline.jobs:
            for path, text in job.plan_files.items():
                here = visible_path(pipeline, job, path)
                if here is None:
                    continue
                folder = os.path.dirname(here)
                self.made = missing_folders(folder) + self.made
                os.makedirs(folder, exist_ok=True)
                try:
                    with open(here) as f:
                        self.before.setdefault(here, f.read())
                except FileNotFoundError:
                    self.before.setdefault(here, None)
                write_atomic(here, text)

    def restore(self) -> None:
        for path, text in self.before.items():
            if text is None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
            else:
                write_atomic(path, text)
        remove_made_folders(self.made)


def locked_outputs(pipeline: Pipeline) -> list[str]:
    """The outputs of the pipeline's jobs as this machine sees them (see `visible_path`), which the run locks;
    outputs kit cannot see from here (a cluster reached over SSH) are not locked."""
    seen = (visible_path(pipeline, job, out) for job in pipeline.jobs for out in job.outputs)
    return sorted({os.path.normpath(path) for path in seen if path is not None})


def kit_paths(pipeline: Pipeline, log_dir: str) -> list[str]:
    """What this submission reads or writes by its own path, never from the packed code: its jobs' inputs and
    outputs and its log folder (untracked files there are no code to refuse, see launch.worktree)."""
    return [log_dir, *(path for job in pipeline.jobs for path in (*job.inputs, *job.outputs))]


def _within(path: str, folder: str) -> bool:
    path, folder = os.path.normpath(path), os.path.normpath(folder)
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def input_writers(
    pipeline: Pipeline, external: dict[str, list[records.ExperimentRecord]], dry_run: bool = False
) -> dict[str, dict[str, str]]:
    """Per job: each input that another job of this pipeline or of a --run_after experiment writes, with that
    writer's name (checked when the job starts). Any other input must exist now where kit can see it (see
    `visible_path`; on Slurm not for a dry run, which may plan for a cluster from elsewhere); the rest is checked
    when the job starts."""
    out: dict[str, dict[str, str]] = {}
    for job in pipeline.jobs:
        written = [(o, f"job '{other.name}'") for other in pipeline.jobs if other is not job for o in other.outputs]
        written += [
            (o, f"job '{j.name}' of experiment '{rec.expname}'")
            for rec in external.get(job.name, [])
            for j in rec.jobs
            for o in j.outputs
        ]
        mine: dict[str, str] = {}
        for path in job.inputs:
            writer = next((who for out_path, who in written if _within(path, out_path)), None)
            if writer is not None:
                mine[path] = writer
                continue
            here = visible_path(pipeline, job, path) if not (dry_run and pipeline.cluster.executor == "slurm") else None
            if here is not None and not os.path.exists(here):
                seen = "" if here == path else f" (here {here}, through the job's container mounts)"
                fix = job.input_hints.get(path, "fix the path or add the job that makes it")
                raise UserError(
                    f"job '{job.name}': input {path}{seen} does not exist, and no job of this pipeline or of "
                    f"--run_after writes it; {fix}."
                )
        out[job.name] = mine
    return out


def visible_path(pipeline: Pipeline, job, path: str) -> str | None:
    """Where kit sees a job's input on this machine, or None where it cannot: on none the path itself; on a Slurm
    cluster reached without SSH (this is its login node) and on Docker, the path itself for a job without
    containers, else the host side of the container mount that holds it (a path no mount holds may be inside
    the image)."""

    cluster = pipeline.cluster
    if cluster.executor == "none":
        return path
    if cluster.ssh_tunnel is not None:
        return None
    if not any(group.container for group in job.groups):
        return path
    for mount in user_mounts(cluster, pipeline.mount_paths):
        source, target = mount.spec.split(":")[:2]
        if _within(path, target):
            return os.path.normpath(source + "/" + os.path.relpath(path, target))
    return None
