"""`Pipeline`: a name, a cluster config and jobs. `run()` checks the jobs, packs the code once, renders every job
and submits them through nemo-run (or, with dry_run, prints what would be submitted and submits nothing)."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.launch import records
from pipeline_kit.launch.packaging import PackagedCode, package_code, plan_code
from pipeline_kit.pipeline.model import Job
from pipeline_kit.pipeline.render import resolve_ports


@dataclass
class RunResult:
    expname: str
    run_id: str
    slurm_ids: dict[str, list[str]] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)
    dry_run_text: str = ""

    @property
    def ok(self) -> bool:
        return all(s == "SUCCEEDED" for s in self.states.values())


@dataclass
class Pipeline:
    name: str
    cluster: ClusterConfig
    jobs: list[Job]
    log_dir: str | None = None
    mount_paths: list[str] = field(default_factory=list)
    reuse_code: bool = True
    allow_uncommitted: bool = False
    cwd: str = field(default_factory=os.getcwd)

    def __post_init__(self) -> None:
        if not self.jobs:
            raise UserError(f"pipeline '{self.name}' has no jobs; add at least one.")
        names = [j.name for j in self.jobs]
        for n in names:
            if names.count(n) > 1:
                raise UserError(f"pipeline '{self.name}' has two jobs named '{n}'; give them distinct names.")
        for job in self.jobs:
            for dep in job.after:
                if dep not in self.jobs:
                    raise UserError(
                        f"job '{job.name}' runs after '{dep.name}', which is not in pipeline '{self.name}'."
                    )
        if self.log_dir is not None and not os.path.isabs(self.log_dir):
            raise UserError(f"--log_dir {self.log_dir} is relative; give an absolute path.")

    # ------------------------------------------------------------------ planning
    def ordered_jobs(self) -> list[Job]:
        """Jobs in dependency order; a cycle is an error that names a job on it."""
        done: list[Job] = []
        visiting: set[int] = set()

        def visit(job: Job) -> None:
            if job in done:
                return
            if id(job) in visiting:
                raise UserError(f"pipeline '{self.name}': job '{job.name}' depends on itself through 'after'.")
            visiting.add(id(job))
            for dep in job.after:
                visit(dep)
            visiting.discard(id(job))
            done.append(job)

        for job in self.jobs:
            visit(job)
        return done

    def _external_records(self, job: Job) -> list[records.ExperimentRecord]:
        return [records.load_latest(self.cluster, expname) for expname in job.run_after]

    def _cluster_root(self) -> str:
        return self.cluster.ssh_tunnel.job_dir if self.cluster.ssh_tunnel else self.cluster.job_dir

    # ------------------------------------------------------------------ running
    def run(self, dry_run: bool = False, wait: bool | None = None) -> RunResult:
        """Submit every job. On none/local this waits; on Slurm it returns after submission unless `wait`."""
        jobs = self.ordered_jobs()
        run_id = time.strftime("%Y%m%d-%H%M%S") + f"-{os.getpid()}"
        log_dir = self.log_dir or f"{self._cluster_root()}/logs/{self.name}/{run_id}"
        ext = {job.name: self._external_records(job) for job in jobs}
        if dry_run:
            _, _, key = plan_code(self.cwd, self.allow_uncommitted)
            code = PackagedCode(key, f"{self.cluster.job_dir}/code/{key}", f"{self._cluster_root()}/code/{key}", True)
        else:
            code = package_code(self.cluster, self.cwd, self.allow_uncommitted, self.reuse_code)
        ports = resolve_ports(jobs)

        from pipeline_kit.launch.submit import Submission

        submission = Submission(self, jobs, log_dir, ports, code, ext)
        if dry_run:
            return RunResult(self.name, run_id, dry_run_text=submission.dry_run())
        if self.cluster.executor != "slurm":
            os.makedirs(log_dir, exist_ok=True)
        result = submission.submit(run_id, wait=bool(wait) or self.cluster.executor != "slurm")
        sys.stdout.flush()
        return result
