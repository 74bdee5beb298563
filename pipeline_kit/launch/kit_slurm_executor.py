"""nemo-run's SlurmExecutor with dependencies on other experiments' jobs. Import only after `import_nemo_run`."""

from __future__ import annotations

from dataclasses import dataclass, field

from nemo_run import SlurmExecutor


@dataclass(kw_only=True)
class KitSlurmExecutor(SlurmExecutor):
    # nemo-run replaces `dependencies` with the handles of in-pipeline dependencies at launch, dropping any others;
    # these Slurm job ids of earlier experiments are added back when the sbatch script is written.
    external_job_ids: list[str] = field(default_factory=list)

    def parse_deps(self) -> list[str]:
        return list(dict.fromkeys([*super().parse_deps(), *self.external_job_ids]))
