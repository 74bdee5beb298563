"""One submission of a Pipeline: builds the nemo-run Experiment (one task per Job; a het job's groups form one
task group), then dry-runs it (printing every script and request) or runs it and records the result."""

from __future__ import annotations

import contextlib
import io
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from pipeline_kit.errors import UserError
from pipeline_kit.launch import records
from pipeline_kit.launch.executors import adjust_slurm_task, docker_executor, local_executor, slurm_executor
from pipeline_kit.launch.nemorun_env import import_nemo_run
from pipeline_kit.launch.packaging import CONTAINER_CODE_DIR, PackagedCode
from pipeline_kit.pipeline.model import Job
from pipeline_kit.pipeline.render import ScriptContext, local_job_script, slurm_group_script


@dataclass
class Submission:
    pipeline: object  # Pipeline (kept untyped to avoid an import cycle)
    jobs: list[Job]
    log_dir: str
    ports: dict[int, int]
    code: PackagedCode
    external: dict[str, list[records.ExperimentRecord]]  # per job: the earlier experiments it runs after

    def external_slurm_ids(self, job: Job) -> list[str]:
        return [i for rec in self.external[job.name] for j in rec.jobs for i in j.slurm_ids]

    def after_rc_files(self, job: Job) -> list[str]:
        """The .rc files a none/local job waits for: its parents' in this pipeline, then earlier experiments'."""
        own = [f"{self.log_dir}/{d.name}.rc" for d in job.after]
        return own + [f"{rec.log_dir}/{j.name}.rc" for rec in self.external[job.name] for j in rec.jobs]

    def dependency_type(self, job: Job) -> str:
        return job.dependency_type or self.pipeline.cluster.dependency_type

    def _ctx(self, in_container: bool) -> ScriptContext:
        p = self.pipeline
        return ScriptContext(
            p.cluster.executor,
            p.name,
            CONTAINER_CODE_DIR if in_container else self.code.cluster_dir,
            self.log_dir,
        )

    def scripts(self, job: Job) -> list[str]:
        """The script(s) of a job: one per group on Slurm, one for the whole job on none/local."""
        kind = self.pipeline.cluster.executor
        if kind == "slurm":
            return [
                slurm_group_script(job, gi, self._ctx(g.container is not None), self.ports)
                for gi, g in enumerate(job.groups)
            ]
        ctx = self._ctx(kind == "local")
        return [local_job_script(job, ctx, self.ports, self.after_rc_files(job), self.dependency_type(job))]

    @contextlib.contextmanager
    def experiment(self):
        """The nemo-run Experiment with every job added (nemo-run only allows adding inside its context)."""
        p = self.pipeline
        run = import_nemo_run(p.cluster)
        # kit prints its own summary: nemo-run's goodbye message costs ~1.7 s of syntax highlighting, its exit
        # status one more scheduler query per job
        with run.Experiment(
            p.name, log_level="WARN", jobs=[], enable_goodbye_message=False, skip_status_at_exit=True
        ) as exp:
            self._add_jobs(run, exp)
            yield exp

    def _add_jobs(self, run, exp) -> None:
        p = self.pipeline
        kind = p.cluster.executor
        for job in self.jobs:
            scripts = [run.Script(inline=s) for s in self.scripts(job)]
            deps = [d.name for d in job.after]
            if kind == "none":
                exp.add(scripts[0], executor=local_executor(run, p.cluster), name=job.name, dependencies=deps)
            elif kind == "local":
                log_dirs = [self.log_dir, *(rec.log_dir for rec in self.external[job.name])]
                ex = docker_executor(run, p.cluster, job, self.code.local_dir, log_dirs, p.mount_paths)
                exp.add(scripts[0], executor=ex, name=job.name, dependencies=deps)
            else:
                het = len(job.groups) > 1
                external = self.external_slurm_ids(job)
                executors = [
                    slurm_executor(
                        run,
                        p.cluster,
                        job,
                        g,
                        het,
                        self.code.cluster_dir,
                        self.log_dir,
                        p.mount_paths,
                        external,
                    )
                    for g in job.groups
                ]
                if het:
                    exp.add(scripts, executor=executors, name=job.name, dependencies=deps)
                else:
                    exp.add(scripts[0], executor=executors[0], name=job.name, dependencies=deps)
                task = exp.jobs[-1]
                kept = task.executors if het else task.executor  # a het group's executors are merged into one
                adjust_slurm_task(kept, job, p.cluster, external)

    def dry_run(self) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), self.experiment() as exp:
            exp.dryrun(log=False)
        for job, task in zip(self.jobs, exp.jobs, strict=True):
            out.write(f"==== job {job.name} ({self.pipeline.cluster.executor})\n")
            infos = getattr(task, "_dryrun_infos", None) or [task._dryrun_info]
            for info in infos:
                out.write(_describe_request(info.request) + "\n")
            deps = [f"<job {d.name}>" for d in job.after] + self.external_slurm_ids(job)
            if self.pipeline.cluster.executor == "slurm" and deps:  # nemo-run adds it only when it calls sbatch
                out.write(f"---- sbatch --dependency={self.dependency_type(job)}:{':'.join(deps)}\n")
            for i, script in enumerate(self.scripts(job)):
                out.write(f"---- script {job.name}[{i}]\n{script}")
        return out.getvalue()

    def submit(self, run_id: str, wait: bool):
        from pipeline_kit.launch.monitor import local_outcome, wait_for_states
        from pipeline_kit.pipeline.runner import RunResult

        p = self.pipeline
        record = records.ExperimentRecord(p.name, run_id, p.cluster.executor, self.log_dir)
        chatter = io.StringIO()  # nemo-run's progress panels; kit prints its own summary
        with contextlib.redirect_stdout(chatter), _cancel_on_interrupt(p.cluster, record), self.experiment() as exp:
            record.nemo_run_id = exp._id
            record.jobs = [
                records.JobRecord(j.name, t.id, [g.name for g in j.groups], j.array_size)
                for j, t in zip(self.jobs, exp.jobs, strict=True)
            ]
            if p.cluster.executor != "slurm":  # a local run is visible to `kit status` while it runs
                records.save_record(p.cluster, record)
            try:
                exp.run(detach=p.cluster.executor == "slurm", tail_logs=False)
            except Exception as e:
                if type(e).__module__.startswith("docker."):  # the daemon is down or not where DOCKER_HOST says
                    where = os.environ.get("DOCKER_HOST", "the default socket")
                    raise UserError(
                        f"cannot reach the Docker daemon at {where} ({str(e).splitlines()[0][:160]}); start dockerd "
                        "or point DOCKER_HOST at it."
                    ) from None
                raise
            for rec, task in zip(record.jobs, exp.jobs, strict=True):
                handle = task.handle if hasattr(task, "handle") else task.handles[0]
                if p.cluster.executor == "slurm" and handle:
                    rec.slurm_ids = [handle.rstrip("/").split("/")[-1]]
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
        result = RunResult(p.name, run_id, slurm_ids={r.name: r.slurm_ids for r in record.jobs})
        result.states = {r.name: r.state for r in record.jobs if r.state}
        if wait and p.cluster.executor == "slurm":
            result.states = wait_for_states(p.cluster, record)
        return result


@contextlib.contextmanager
def _cancel_on_interrupt(cluster, record: records.ExperimentRecord):
    """On none and Docker, Ctrl-C cancels the running jobs (a none script stops what it started; Docker kills the
    container), so nemo-run's wait ends normally with the jobs CANCELLED. A KeyboardInterrupt inside that wait would
    leave it hanging on its threads."""
    import signal
    import threading

    if cluster.executor == "slurm" or threading.current_thread() is not threading.main_thread():
        yield
        return
    from pipeline_kit.launch.monitor import cancel_experiment, local_outcome
    from pipeline_kit.pipeline.render import CANCELLED_RC

    def cancel(signum, frame):
        print("kit: interrupted; cancelling the running jobs", file=sys.stderr, flush=True)
        running = [job for job in record.jobs if local_outcome(record, job) is None]
        cancel_experiment(cluster, record)
        for job in running:  # a killed container cannot record it itself
            rc_file = Path(record.log_dir) / f"{job.name}.rc"
            if not rc_file.exists():
                records.write_atomic(rc_file, CANCELLED_RC + "\n")

    previous = signal.signal(signal.SIGINT, cancel)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _describe_request(request) -> str:
    """What nemo-run would submit: the sbatch script for Slurm; the container or process spec otherwise."""
    if hasattr(request, "materialize"):
        return request.materialize()
    text = repr(request)
    return text.replace(os.environ.get("NEMORUN_HOME", "\0"), "$NEMORUN_HOME")
