"""The handle on a submitted experiment, what `run_pipeline` returns and `Experiment.load` finds again from any
process: job states, waiting, logs, cancelling and why jobs failed (after submitit's `Job`), on none, Docker and
Slurm, and what its generation jobs measured. `kit status [--verbose]`, `kit logs` and `kit cancel` are this class's
methods printed."""

from __future__ import annotations

from dataclasses import dataclass, field

from pipeline_kit import output_lock
from pipeline_kit.cluster import ClusterConfig, load_cluster_config
from pipeline_kit.errors import JobFailed, UserError
from pipeline_kit.launch import job_logs, job_status, records, slurm_states
from pipeline_kit.launch.cancel import cancel_experiment
from pipeline_kit.launch.failure_report import failure_report
from pipeline_kit.launch.figures import job_figures
from pipeline_kit.launch.job_states import FINAL, JobStatus
from pipeline_kit.measurements import JobFigures

LOOKBACK_RUNS = 20  # how many earlier runs `last_work` reads (each is one remote command over SSH)

# why a job ended without succeeding, where its logs do not say
_NO_REPORT = {
    "CANCELLED": "cancelled before it ended (kit cancel, Ctrl-C, or a parent that failed under afterok)",
    "LOST": "the scheduler no longer knows the job (purged from its accounting, or another cluster's)",
    "FAILED": "no log says why; see `kit logs`",
}


@dataclass(frozen=True)
class JobFailure:
    """One job that ended without succeeding: its final state and why, as kit found it (the failing command and
    its log's first error lines, else the container start-up or scheduler output); `failed_units` for arrays."""

    job: str
    state: str
    reason: str
    failed_units: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class JobLogs:
    """Where one job's logs are: kit's command logs (<log_dir>/<job>/<command>.log, and kit.log) and, on Slurm,
    the sbatch/srun output files nemo-run keeps. Read one with `Experiment.tail`."""

    job: str
    logs: list[str]
    scheduler_outputs: list[str]


@dataclass
class Experiment:
    """One submission of a pipeline. `states` holds the states last seen (on none and Docker final once
    run_pipeline returns, when it waited; empty for a detached none run); `status()` asks again. A dry run's handle
    has only `dry_run_text`."""

    expname: str
    run_id: str
    cluster: ClusterConfig
    record: records.ExperimentRecord | None = None
    states: dict[str, str] = field(default_factory=dict)
    dry_run_text: str = ""

    @classmethod
    def load(
        cls, expname: str, cluster: ClusterConfig | str | None = None, config_dir: str | None = None
    ) -> Experiment:
        """The newest submission of `expname` on `cluster` (a ClusterConfig, or a config name or YAML path looked up
        as `--cluster` is, with `config_dir` first; None: the `none` cluster). A config loaded here needs none of
        its env_vars exported: looking at a run does not start a job."""
        if not isinstance(cluster, ClusterConfig):
            cluster = load_cluster_config(cluster, config_dir, inspect_only=True)
        record = records.load_latest(cluster, expname)
        return cls(expname, record.run_id, cluster, record, {j.name: j.state for j in record.jobs if j.state})

    # what was submitted
    @property
    def jobs(self) -> list[str]:
        return [job.name for job in self._record().jobs]

    @property
    def log_dir(self) -> str | None:
        """The run's log folder (None for a dry run)."""
        return self.record.log_dir if self.record else None

    @property
    def slurm_ids(self) -> dict[str, list[str]]:
        """Per job, its Slurm job ids (several for an array larger than MaxArraySize); [] elsewhere."""
        return {job.name: list(job.slurm_ids) for job in self.record.jobs} if self.record else {}

    @property
    def ok(self) -> bool:
        """True only once every job is known to have SUCCEEDED: never for a dry run or an unwaited Slurm run."""
        return self.record is not None and all(self.states.get(job.name) == "SUCCEEDED" for job in self.record.jobs)

    # states
    def statuses(self) -> list[JobStatus]:
        """Each job's state now (sacct on Slurm, the .rc files and nemo-run elsewhere) and its failed array units."""
        found = job_status.experiment_status(self.cluster, self._record())
        self.states = {s.name: s.state for s in found}
        return found

    def status(self) -> dict[str, str]:
        """Job name -> state now: PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED, LOST or UNKNOWN."""
        return {s.name: s.state for s in self.statuses()}

    def done(self) -> bool:
        """Whether every job has ended (in any final state)."""
        return all(state in FINAL for state in self.status().values())

    def wait(self, timeout: float | None = None, check: bool = False) -> dict[str, str]:
        """Wait until every job has ended, for at most `timeout` seconds (None: no limit; after it the states are
        returned as they are, and one line on stderr names the unfinished jobs); returns job -> state. On Slurm a
        job the scheduler no longer knows ends LOST. `check`: raise JobFailed if a job ended without succeeding."""
        self.states = job_status.wait_for_states(self.cluster, self._record(), timeout_s=timeout)
        if all(state in FINAL for state in self.states.values()):  # its jobs no longer write the outputs
            output_lock.release_run(self._record().locks, self._record().run_id)
        if check and any(state in FINAL and state != "SUCCEEDED" for state in self.states.values()):
            raise JobFailed(self.expname, self.failures())
        return dict(self.states)

    def result(self, timeout: float | None = None) -> dict[str, str]:
        """Wait, then return the states if every job SUCCEEDED; raise JobFailed naming why if one did not, or
        TimeoutError if some had not ended after `timeout` seconds."""
        states = self.wait(timeout, check=True)
        unfinished = [f"{job} ({state})" for job, state in states.items() if state not in FINAL]
        if unfinished:
            raise TimeoutError(f"experiment {self.expname}: not finished after {timeout:g} s: {', '.join(unfinished)}")
        return states

    def figures(self) -> dict[str, list[JobFigures]]:
        """Per job, what its generation clients measured as they ran (pipeline_kit.measurements: the server's
        start-up, the queue wait, each unit's samples, tokens and seconds), one entry per array element; written as
        units finish, so a running or killed job shows the units it finished."""
        return job_figures(self.cluster, self._record())

    def last_work(self, jobs: list[str], runs: int = LOOKBACK_RUNS) -> dict[str, tuple[str, list[JobFigures]]]:
        """Per job of `jobs`, (run id, figures) of the newest earlier submission of this experiment's name (of the
        `runs` before this one) where the job generated something: what `kit status --verbose` shows for a rerun
        that had nothing to do (every unit was done already). A job no such run measured is left out."""
        found: dict[str, tuple[str, list[JobFigures]]] = {}
        earlier = [p for p in records.run_files(self.cluster, self.expname) if p.stem < self.run_id][-runs:]
        for path in reversed(earlier):
            record = records.read_record(path)
            for job, figures in job_figures(self.cluster, record).items():
                if job in jobs and job not in found and any(f.units for f in figures):
                    found[job] = (record.run_id, figures)
            if len(found) == len(jobs):
                break
        return found

    # why, and the logs
    def failures(self, lines: int = 20) -> list[JobFailure]:
        """The jobs that ended without succeeding (by the states last seen; call status() or wait() first to
        refresh them), each with why (`lines` of its report at most)."""
        found = {}
        if any(state == "FAILED" for state in self.states.values()):
            found = {s.name: s for s in job_status.experiment_status(self.cluster, self._record())}
        failures = []
        for job, state in self.states.items():
            if state in FINAL and state != "SUCCEEDED":
                status = found.get(job)
                slurm = f"slurm: {status.reason}\n" if status is not None and status.reason else ""  # NODE_FAIL, ...
                why = slurm + self.why_failed(job, lines) or _NO_REPORT.get(state, "")
                failures.append(JobFailure(job, state, why, status.failed_units if status is not None else {}))
        return failures

    def why_failed(self, job: str, lines: int = 20) -> str:
        """Why a job failed, as kit found it: its kit.log (the failing command or service, its exit code and its
        log's first error lines), else the container start-up lines, else the end of its batch output ('' if
        none says)."""
        return failure_report(self.cluster, self._record(), job, lines)

    def logs(self, job: str | None = None) -> dict[str, JobLogs]:
        """Per job (or only `job`), where its logs are."""
        record = self._record()
        kit_logs = job_logs.log_files(self.cluster, record)
        scheduler = job_logs.scheduler_outputs(self.cluster, record)
        names = [job] if job is not None else list(kit_logs)
        for name in names:
            if name not in kit_logs:
                raise UserError(f"experiment {self.expname} has no job '{name}' (its jobs: {', '.join(kit_logs)}).")
        return {name: JobLogs(name, kit_logs[name], scheduler[name]) for name in names}

    def tail(self, path: str, lines: int = 20) -> str:
        """The last `lines` lines of a log of this experiment (read over ssh when the cluster is remote)."""
        return job_logs.tail(self.cluster, path, lines)

    def container_startup(self, lines: int = 20) -> dict[str, list[str]]:
        """Per Slurm job, the pyxis/enroot lines of its srun output (a container that did not start says why only
        there), under a `<file>:` line per output file; empty elsewhere."""
        return job_logs.container_startup_lines(self.cluster, self._record(), lines)

    @property
    def scheduler_dir(self) -> str:
        """Where nemo-run keeps this experiment's batch scripts and srun output on the cluster."""
        return job_logs.nemo_run_dir(self.cluster, self._record())

    def placement(self, job: str) -> tuple[str, str | None]:
        """Slurm: the scheduler's word for `job` now (squeue's PENDING, CONFIGURING, RUNNING, ...; '' once it no
        longer lists the job) and, while it runs, its first node (where its first group's services listen)."""
        ids = self.slurm_ids.get(job) if self.record and self.record.executor == "slurm" else None
        if not ids:
            raise UserError(f"experiment {self.expname}: '{job}' is not one of its Slurm jobs; placement is Slurm's.")
        return slurm_states.slurm_placement(self.cluster, ids[0])

    # stopping it
    def cancel(self) -> list[str]:
        """Cancel every job that may still run (and free the outputs it locked); returns the names of the jobs it
        cancelled (not those that had already ended)."""
        acted = cancel_experiment(self.cluster, self._record())
        output_lock.release_run(self._record().locks, self._record().run_id)
        return acted

    def _record(self) -> records.ExperimentRecord:
        if self.record is None:
            raise UserError(f"experiment {self.expname} was a dry run: nothing was submitted; run it without dry_run.")
        return self.record
