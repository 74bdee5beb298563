"""What every job builder takes besides its own spec (`JobOptions`: the experiment name, Slurm settings, what to
run after, the chain of dependent copies), and `chain`, which turns a builder's plan into named, ordered Jobs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline_kit.errors import UserError
from pipeline_kit.pipeline.model import CommandGroup, Job
from pipeline_kit.slurm_time import check_slurm_time


@dataclass
class JobOptions:
    """`expname` names the jobs; `after`: earlier Jobs of the same Pipeline (stages composed in Python);
    `run_after`: earlier experiments; `dependent_jobs`: N more copies of each job, each after the previous one
    (to get past a wall-time limit). `partition`, `time_min` and `sbatch_kwargs` apply where a group sets none."""

    expname: str
    partition: str | None = None
    time_min: str | None = None
    sbatch_kwargs: dict[str, str | bool] = field(default_factory=dict)
    after: list[Job] = field(default_factory=list)
    run_after: list[str] = field(default_factory=list)
    dependent_jobs: int = 0
    dependency_type: str | None = None

    def __post_init__(self) -> None:
        if self.dependent_jobs < 0:
            raise UserError(f"--dependent_jobs must be 0 or more, got {self.dependent_jobs}.")
        if self.time_min is not None:
            check_slurm_time(self.time_min, "--time_min")

    def apply_to(self, group: CommandGroup) -> None:
        """The options' Slurm settings on a CommandGroup, where the group does not set its own."""
        group.hardware.partition = group.hardware.partition or self.partition
        group.hardware.time_min = group.hardware.time_min or self.time_min
        group.hardware.sbatch_kwargs = {**self.sbatch_kwargs, **group.hardware.sbatch_kwargs}


@dataclass
class JobPlan:
    """One job of a builder's plan: its name suffix ('' for the experiment's name), groups and Job fields
    (array_size, inputs, outputs, ...)."""

    suffix: str
    groups: list[CommandGroup]
    fields: dict = field(default_factory=dict)


def chain(options: JobOptions, plan: Callable[[int], list[JobPlan]]) -> list[Job]:
    """Each planned job, plus `options.dependent_jobs` copies of each. `plan(copy)` returns fresh JobPlans for copy
    0, 1, ... of the chain; copy 0 runs after `options.after`, copy N after copy N-1."""
    jobs: list[Job] = []
    previous: dict[str, Job] = {}
    for i in range(options.dependent_jobs + 1):
        for planned in plan(i):
            for g in planned.groups:
                options.apply_to(g)
            name = "-".join(filter(None, [options.expname, planned.suffix, f"dep{i}" if i else ""]))
            job = Job(
                name=name,
                groups=planned.groups,
                after=[previous[planned.suffix]] if planned.suffix in previous else list(options.after),
                run_after=list(options.run_after),
                dependency_type=options.dependency_type,
                **planned.fields,
            )
            previous[planned.suffix] = job
            jobs.append(job)
    return jobs
