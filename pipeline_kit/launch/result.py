"""What `run_pipeline` returns: the experiment's record, log folder, Slurm ids and known job states."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline_kit.launch import records


@dataclass
class RunResult:
    """What a run left: `record` and `log_dir` (None for a dry run), each job's Slurm ids and known states."""

    expname: str
    run_id: str
    log_dir: str | None = None
    record: records.ExperimentRecord | None = None
    slurm_ids: dict[str, list[str]] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)
    dry_run_text: str = ""

    @property
    def ok(self) -> bool:
        """True only once every job is known to have SUCCEEDED: never for a dry run or an unwaited Slurm run."""
        if self.record is None:
            return False
        return all(self.states.get(job.name) == "SUCCEEDED" for job in self.record.jobs)
