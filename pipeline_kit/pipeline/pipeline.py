"""`Pipeline`: a name, a cluster config and jobs: data only. `pipeline_kit.launch.run_pipeline` checks, packs,
renders and submits it (or prints what it would submit, with dry_run)."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.pipeline.model import Job


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

    def cluster_root(self) -> str:
        """The job_dir as jobs see it (the remote one over an SSH tunnel)."""
        return self.cluster.ssh_tunnel.job_dir if self.cluster.ssh_tunnel else self.cluster.job_dir
