"""One submission of a Pipeline: builds the nemo-run Experiment (one task per Job, or per part of a Slurm array
larger than the cluster's MaxArraySize; a het job's groups form one task group), then dry-runs it (printing every
script and request) or runs it and records the result."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_kit import output_lock
from pipeline_kit.errors import UserError
from pipeline_kit.launch import detached, records
from pipeline_kit.launch.cancel import cancel_experiment
from pipeline_kit.launch.detached import script_alive
from pipeline_kit.launch.executors import (
    SlurmSpec,
    adjust_slurm_task,
    component_flags,
    docker_executor,
    slurm_executor,
    slurm_spec,
)
from pipeline_kit.launch.experiment import Experiment
from pipeline_kit.launch.follow import LogFollower, service_logs
from pipeline_kit.launch.images import prepare_slurm_images
from pipeline_kit.launch.job_logs import experiment_folder
from pipeline_kit.launch.job_status import local_outcome
from pipeline_kit.launch.mounts import check_sources_at_submission
from pipeline_kit.launch.nemorun_env import import_nemo_run
from pipeline_kit.launch.packaging import CONTAINER_CODE_DIR, PackagedCode
from pipeline_kit.launch.remote import remote_run
from pipeline_kit.launch.sbatch_errors import refusal_reason, what_to_fix
from pipeline_kit.launch.sbatch_render import experiment_id, render_task
from pipeline_kit.pipeline.model import Job
from pipeline_kit.pipeline.pipeline import Pipeline
from pipeline_kit.pipeline.render import CANCELLED_RC, ScriptContext, local_job_script, slurm_group_script

DEFAULT_MAX_ARRAY_SIZE = 1001  # Slurm's default MaxArraySize: indices 0..1000


@dataclass(frozen=True)
class Task:
    """One nemo-run task: a whole Job, or one part of an array too large for one Slurm array. Element i of a
    part runs unit `unit_offset + i`."""

    job: Job
    name: str
    unit_offset: int = 0
    array_size: int | None = None


def max_array_size(cluster) -> int:
    """The cluster config's `max_array_size`, else MaxArraySize from `scontrol show config` (default 1001)."""
    if cluster.max_array_size is not None:
        return cluster.max_array_size
    out = remote_run(cluster, "scontrol show config 2>/dev/null | grep -i '^MaxArraySize'", check=False).stdout
    value = out.partition("=")[2].strip()
    return int(value) if value.isdigit() else DEFAULT_MAX_ARRAY_SIZE


def plan_tasks(jobs: list[Job], cluster) -> list[Task]:
    """On Slurm an array larger than MaxArraySize becomes several arrays of at most that many elements."""
    if cluster.executor != "slurm" or not any(j.array_size for j in jobs):
        return [Task(j, j.name, 0, j.array_size) for j in jobs]
    limit = max_array_size(cluster)
    tasks = []
    for job in jobs:
        if not job.array_size or job.array_size <= limit:
            tasks.append(Task(job, job.name, 0, job.array_size))
            continue
        for k, start in enumerate(range(0, job.array_size, limit)):
            tasks.append(Task(job, f"{job.name}-part{k}", start, min(limit, job.array_size - start)))
    return tasks


@dataclass
class Submission:
    pipeline: Pipeline
    jobs: list[Job]
    log_dir: str
    ports: dict[int, int]
    code: PackagedCode
    external: dict[str, list[records.ExperimentRecord]]  # per job: the earlier experiments it runs after
    input_writers: dict[str, dict[str, str]]  # per job: the inputs another job writes, with that job's name
    submitted_at: float | None = None  # set when it is submitted (a dry run's scripts leave it out)
    locks: list[str] = field(default_factory=list)  # the output locks the run holds (pipeline_kit.output_lock)

    def __post_init__(self) -> None:
        self.tasks = plan_tasks(self.jobs, self.pipeline.cluster)

    def split_note(self) -> str:
        """One line per job that was split into several Slurm arrays."""
        lines = []
        for job in self.jobs:
            parts = [t for t in self.tasks if t.job is job]
            if len(parts) > 1:
                ranges = ", ".join(f"{t.unit_offset}-{t.unit_offset + t.array_size - 1}" for t in parts)
                lines.append(
                    f"kit: job {job.name} has {job.array_size} units, more than the cluster's MaxArraySize "
                    f"({parts[0].array_size}): submitted as {len(parts)} Slurm arrays (units {ranges})"
                )
        return "".join(f"{line}\n" for line in lines)

    def external_slurm_ids(self, job: Job) -> list[str]:
        return [i for rec in self.external[job.name] for j in rec.jobs for i in j.slurm_ids]

    def after_rc_files(self, job: Job) -> list[str]:
        """The .rc files a none/local job waits for: its parents' in this pipeline, then earlier experiments'."""
        own = [f"{self.log_dir}/{d.name}.rc" for d in job.after]
        return own + [f"{rec.log_dir}/{j.name}.rc" for rec in self.external[job.name] for j in rec.jobs]

    def dependency_type(self, job: Job) -> str:
        return job.dependency(self.pipeline.cluster.dependency_type, self.pipeline.cluster.executor)

    def _ctx(self, in_container: bool) -> ScriptContext:
        p = self.pipeline
        return ScriptContext(
            p.cluster.executor,
            p.name,
            CONTAINER_CODE_DIR if in_container else self.code.cluster_dir,
            self.log_dir,
            self.submitted_at,
        )

    def scripts(self, task: Task) -> list[str]:
        """The script(s) of a task: one per group on Slurm, one for the whole job on none/local."""
        job, kind = task.job, self.pipeline.cluster.executor
        inputs = self.input_writers.get(job.name, {})
        if kind == "slurm":
            return [
                slurm_group_script(job, gi, self._ctx(g.container is not None), self.ports, inputs, task.unit_offset)
                for gi, g in enumerate(job.groups)
            ]
        ctx = self._ctx(kind == "local")
        return [local_job_script(job, ctx, self.ports, self.after_rc_files(job), self.dependency_type(job), inputs)]

    @contextlib.contextmanager
    def experiment(self, exp_id: str | None = None):
        """The nemo-run Experiment with every job added (nemo-run only allows adding inside its context); `exp_id`:
        its id (by default nemo-run's new one)."""
        p = self.pipeline
        run = import_nemo_run(p.cluster)
        # kit prints its own summary: nemo-run's goodbye message costs ~1.7 s of syntax highlighting, its exit
        # status one more scheduler query per job
        with run.Experiment(
            p.name, id=exp_id, log_level="WARN", jobs=[], enable_goodbye_message=False, skip_status_at_exit=True
        ) as exp:
            self._add_jobs(run, exp)
            yield exp

    def slurm_specs(self, task: Task) -> list[SlurmSpec]:
        """One SlurmSpec per group of a task's job (a het job's components)."""
        p, job = self.pipeline, task.job
        release = output_lock.release_in_job(self.locks, sum(t.array_size or 1 for t in self.tasks))
        external = self.external_slurm_ids(job)
        het = len(job.groups) > 1
        cluster_dir, mounts = self.code.cluster_dir, p.mount_paths
        return [
            slurm_spec(p.cluster, job, g, het, cluster_dir, self.log_dir, mounts, external, task.array_size, release)
            for g in job.groups
        ]

    def _task_names(self, job: Job) -> list[str]:
        return [t.name for t in self.tasks if t.job is job]

    def _add_jobs(self, run, exp) -> None:
        p = self.pipeline
        kind = p.cluster.executor
        for task in self.tasks:
            job = task.job
            scripts = [run.Script(inline=s) for s in self.scripts(task)]
            deps = [name for d in job.after for name in self._task_names(d)]
            if kind == "local":
                log_dirs = [self.log_dir, *(rec.log_dir for rec in self.external[job.name])]
                ex = docker_executor(run, p.cluster, job, self.code.local_dir, log_dirs, p.mount_paths)
                exp.add(scripts[0], executor=ex, name=task.name, dependencies=deps)
            else:
                het = len(job.groups) > 1
                external = self.external_slurm_ids(job)
                executors = [slurm_executor(run, spec) for spec in self.slurm_specs(task)]
                if het:
                    exp.add(scripts, executor=executors, name=task.name, dependencies=deps)
                else:
                    exp.add(scripts[0], executor=executors[0], name=task.name, dependencies=deps)
                added = exp.jobs[-1]
                kept = added.executors if het else added.executor  # a het group's executors are merged into one
                adjust_slurm_task(kept, job, p.cluster, external)

    def dry_run(self) -> str:
        """Every task's request and scripts. On Slurm the sbatch scripts come from launch/sbatch_render.py, without
        nemo-run's import (tests/test_sbatch_render.py holds them to nemo-run's own); on none, how kit starts each
        script (launch/detached.py); on local, nemo-run's description of the container it would start."""
        kind = self.pipeline.cluster.executor
        if kind == "slurm":
            requests = self.rendered_sbatch(experiment_id(self.pipeline.name))
        elif kind == "none":
            env = dict(self.pipeline.cluster.env_vars)
            requests = [detached.describe(task.name, self.log_dir, env) for task in self.tasks]
        else:
            requests = self.nemo_run_requests()
        out = io.StringIO()
        out.write(self.split_note())
        for task, described in zip(self.tasks, requests, strict=True):
            job = task.job
            out.write(f"==== job {task.name} ({self.pipeline.cluster.executor})\n")
            out.write(described)
            deps = [f"<job {name}>" for d in job.after for name in self._task_names(d)]
            deps += self.external_slurm_ids(job)
            if self.pipeline.cluster.executor == "slurm" and deps:  # nemo-run adds it only when it calls sbatch
                out.write(f"---- sbatch --dependency={self.dependency_type(job)}:{':'.join(deps)}\n")
            for i, script in enumerate(self.scripts(task)):
                out.write(f"---- script {task.name}[{i}]\n{script}")
        return out.getvalue()

    def rendered_sbatch(self, exp_id: str) -> list[str]:
        """Each task's sbatch script as nemo-run would submit it in experiment `exp_id`, rendered by kit."""
        cluster = self.pipeline.cluster
        folder = experiment_folder(cluster, self.pipeline.name, exp_id)
        out = []
        for task in self.tasks:
            het = [component_flags(cluster, g) for g in task.job.groups] if len(task.job.groups) > 1 else None
            out.append(render_task(self.slurm_specs(task), task.name, folder, het) + "\n")
        return out

    def nemo_run_requests(self, exp_id: str | None = None) -> list[str]:
        """Each task's request as nemo-run's own dry run describes it (on Slurm: its sbatch scripts)."""
        with contextlib.redirect_stdout(io.StringIO()), self.experiment(exp_id) as exp:
            exp.dryrun(log=False)
        out = []
        for added in exp.jobs:
            infos = getattr(added, "_dryrun_infos", None) or [added._dryrun_info]
            out.append("".join(_describe_request(info.request) + "\n" for info in infos))
        return out

    def submit(self, run_id: str, follow: str | None = None) -> Experiment:
        """`follow` (none/local; see launch.follow): say where the logs go, then show the jobs' lines as they come."""
        p = self.pipeline
        if follow is None or p.cluster.executor == "slurm":
            return self._submit(run_id)

        if p.cluster.executor == "local":
            _check_docker_daemon()  # its error stays the only line
        sys.stderr.write(f"{p.name}: logs in {self.log_dir}\n")
        sys.stderr.flush()
        with LogFollower(self.log_dir, service_logs(self.jobs), follow):
            return self._submit(run_id)

    def submit_detached(self, run_id: str) -> Experiment:
        """none: each job's script started in its own session (launch/detached.py), in the order of the jobs (each
        waits for its parents' .rc files itself); returns at once with no state known yet (see `_run_none`)."""
        p = self.pipeline
        record = records.ExperimentRecord(p.name, run_id, p.cluster.executor, self.log_dir, detached=True)
        record.jobs = [
            records.JobRecord(
                job.name, job.name, [g.name for g in job.groups], job.array_size, outputs=list(job.outputs)
            )
            for job in self.jobs
        ]
        records.save_record(p.cluster, record)
        self.submitted_at = time.time()
        for task in self.tasks:
            detached.start(self.scripts(task)[0], task.name, self.log_dir, dict(p.cluster.env_vars))
        return Experiment(p.name, run_id, p.cluster, record)

    def _run_none(self, run_id: str) -> Experiment:
        """none in the foreground: the jobs start as submit_detached starts them (no nemo-run), and this waits until
        each has written its .rc file, or its script ended without one (killed: FAILED). Ctrl-C or a kill of this
        process cancels what still runs."""
        p = self.pipeline
        experiment = self.submit_detached(run_id)
        record = experiment.record
        pending = list(record.jobs)
        with _cancel_on_interrupt(p.cluster, record):
            while pending:
                time.sleep(0.05)
                for job in list(pending):
                    alive = script_alive(record.log_dir, job.name)
                    state = local_outcome(record, job)
                    if alive is False:  # ended: with its outcome, or killed before it wrote one
                        state = local_outcome(record, job) or "FAILED"
                    elif state is not None and alive:
                        continue  # it stops what it started, then exits: done when it has
                    if state is not None:
                        job.state = state
                        pending.remove(job)
        records.save_record(p.cluster, record)
        return Experiment(p.name, run_id, p.cluster, record, {r.name: r.state for r in record.jobs})

    def _submit(self, run_id: str) -> Experiment:
        """Queue the jobs (on none/local: run them, and wait until they end) and record them."""

        p = self.pipeline
        if p.cluster.executor == "none":
            return self._run_none(run_id)
        containers = any(g.container for j in self.jobs for g in j.groups)
        if p.cluster.executor == "local" or (p.cluster.executor == "slurm" and containers):
            check_sources_at_submission(p.cluster, p.mount_paths)
        if p.cluster.executor == "slurm" and containers:
            prepare_slurm_images(p.cluster, {g.container for j in self.jobs for g in j.groups if g.container})
        record = records.ExperimentRecord(p.name, run_id, p.cluster.executor, self.log_dir, locks=list(self.locks))
        sys.stderr.write(self.split_note())
        chatter = io.StringIO()  # nemo-run's progress panels; kit prints its own summary
        self.submitted_at = time.time()  # the jobs' scripts are rendered below, just before they are queued
        with contextlib.redirect_stdout(chatter), _cancel_on_interrupt(p.cluster, record), self.experiment() as exp:
            record.nemo_run_id = exp._id
            by_task = dict(zip(self.tasks, exp.jobs, strict=True))
            record.jobs = [
                records.JobRecord(
                    job.name,
                    next(added.id for t, added in by_task.items() if t.job is job),
                    [g.name for g in job.groups],
                    job.array_size,
                    unit_offsets=[t.unit_offset for t in self.tasks if t.job is job] if job.array_size else [],
                    outputs=list(job.outputs),
                )
                for job in self.jobs
            ]
            if p.cluster.executor != "slurm":  # a local run is visible to `kit status` while it runs
                records.save_record(p.cluster, record)
            try:
                exp.run(detach=p.cluster.executor == "slurm", tail_logs=False)
            except Exception as e:
                if p.cluster.executor == "slurm":
                    raise self._refused(e, by_task) from None
                if type(e).__module__.startswith("docker."):  # the daemon is down or not where DOCKER_HOST says
                    raise _docker_unreachable(e) from None
                raise
            if p.cluster.executor == "slurm":
                for rec, job in zip(record.jobs, self.jobs, strict=True):
                    rec.slurm_ids = [
                        _slurm_id(added) for t, added in by_task.items() if t.job is job and _slurm_id(added)
                    ]
        # leaving the context waits for local jobs (nemo-run's run() returns at once for jobs without deps)
        if p.cluster.executor != "slurm":
            for rec in record.jobs:
                # nemo-run may return a moment before the script's last line ran; a job that never
                # writes its .rc file was killed or could not start
                deadline = time.monotonic() + 10
                while local_outcome(record, rec) is None and time.monotonic() < deadline:
                    time.sleep(0.1)
                rec.state = local_outcome(record, rec) or "FAILED"
        records.save_record(p.cluster, record)
        return Experiment(p.name, run_id, p.cluster, record, {r.name: r.state for r in record.jobs if r.state})

    def _refused(self, error: Exception, by_task: dict) -> UserError:
        """sbatch refused a job: cancel the ones already queued (nothing half-submitted stays) and say why."""
        queued = [_slurm_id(added) for added in by_task.values() if _slurm_id(added)]
        if queued:
            remote_run(self.pipeline.cluster, f"scancel {' '.join(queued)}", check=False)
        failed = next((t for t, added in by_task.items() if not _slurm_id(added)), None)
        stderr = str(getattr(getattr(error, "result", None), "stderr", "") or error)
        reason = refusal_reason(stderr)
        undone = f"; the {len(queued)} job(s) it had queued were cancelled" if queued else ""
        hint = what_to_fix(self.pipeline.cluster, failed.job, reason) if failed else "fix what it names"
        name = failed.name if failed else "?"
        return UserError(f"sbatch refused job {name} ({reason}): {hint}{undone}. Nothing of it runs; submit again.")


def _docker_unreachable(error: Exception) -> UserError:
    where = os.environ.get("DOCKER_HOST", "the default socket")
    return UserError(
        f"cannot reach the Docker daemon at {where} ({str(error).splitlines()[0][:160]}); start dockerd or point "
        "DOCKER_HOST at it."
    )


def _check_docker_daemon() -> None:
    """The Docker daemon answers (as nemo-run's Docker executor will reach it: docker.from_env)."""
    import docker

    try:
        docker.from_env().ping()
    except Exception as e:
        if type(e).__module__.startswith("docker."):
            raise _docker_unreachable(e) from None
        raise


def _slurm_id(added) -> str | None:
    handle = added.handle if hasattr(added, "handle") else (added.handles or [None])[0]
    return handle.rstrip("/").split("/")[-1] if handle else None


@contextlib.contextmanager
def _cancel_on_interrupt(cluster, record: records.ExperimentRecord):
    """On none and Docker, Ctrl-C (or SIGTERM, SIGHUP) cancels the running jobs (a none script stops what it started; Docker kills the
    container), so nemo-run's wait ends normally with the jobs CANCELLED. A KeyboardInterrupt inside that wait would
    leave it hanging on its threads."""

    if cluster.executor == "slurm" or threading.current_thread() is not threading.main_thread():
        yield
        return

    def cancel(signum, frame):
        print("kit: interrupted; cancelling the running jobs", file=sys.stderr, flush=True)
        running = [job for job in record.jobs if local_outcome(record, job) is None]
        cancel_experiment(cluster, record)
        for job in running:  # a killed container cannot record it itself
            rc_file = Path(record.log_dir) / f"{job.name}.rc"
            if not rc_file.exists():
                records.write_atomic(rc_file, CANCELLED_RC + "\n")

    # a `kill` and a closed terminal stop the jobs as Ctrl-C does
    stop_signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {signum: signal.signal(signum, cancel) for signum in stop_signals}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _describe_request(request) -> str:
    """What nemo-run would submit: the sbatch script for Slurm; the container or process spec otherwise."""
    if hasattr(request, "materialize"):
        return request.materialize()
    text = repr(request)
    return text.replace(os.environ.get("NEMORUN_HOME", "\0"), "$NEMORUN_HOME")
