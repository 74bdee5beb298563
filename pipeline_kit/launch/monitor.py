"""Reads back a submitted experiment: job states (sacct on Slurm, nemo-run elsewhere), array units, log files,
and cancels it. Everything starts from the experiment record."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shlex
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch.detached import script_alive
from pipeline_kit.launch.nemorun_env import import_nemo_run
from pipeline_kit.launch.records import ExperimentRecord, JobRecord
from pipeline_kit.launch.remote import remote_run
from pipeline_kit.measurements import MEASUREMENTS_DIR, JobFigures, experiment_figures
from pipeline_kit.pipeline.render import CANCELLED_RC

FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "LOST")  # LOST: the scheduler no longer knows the job (see wait)
LOST_AFTER_S = 60.0
_SLURM = {
    "COMPLETED": "SUCCEEDED",
    "RUNNING": "RUNNING",
    "COMPLETING": "RUNNING",
    "SUSPENDED": "RUNNING",
    "STOPPED": "RUNNING",
    "PENDING": "PENDING",
    "REQUEUED": "PENDING",
    "REQUEUE_HOLD": "PENDING",
    "REQUEUE_FED": "PENDING",
    "RESIZING": "PENDING",
    "CONFIGURING": "PENDING",
    "CANCELLED": "CANCELLED",
    "REVOKED": "CANCELLED",
}  # everything else (FAILED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, BOOT_FAIL, DEADLINE, PREEMPTED) is FAILED
# the Slurm states that end a job without its script failing, and what each means for the user
SLURM_FAILURES = {
    "NODE_FAIL": "its node failed (Slurm lost contact with the node's slurmd)",
    "BOOT_FAIL": "its node failed to boot",
    "TIMEOUT": "it reached its time limit",
    "OUT_OF_MEMORY": "it ran out of memory",
    "DEADLINE": "it reached its deadline",
    "PREEMPTED": "a job of higher priority preempted it",
}


class SlurmFailure(str):
    """The state FAILED (it equals "FAILED") of a job that Slurm ended: `word` is Slurm's state (NODE_FAIL, TIMEOUT,
    ...), `describe()` the state with what happened, as `kit status` shows it."""

    word: str

    def __new__(cls, word: str) -> SlurmFailure:
        state = super().__new__(cls, "FAILED")
        state.word = word
        return state

    def describe(self) -> str:
        return f"FAILED ({self.word}: {SLURM_FAILURES[self.word]})"


def describe(state: str) -> str:
    """A state as `kit status` shows it: FAILED with Slurm's reason where Slurm ended the job."""
    return state.describe() if isinstance(state, SlurmFailure) else state


_STATE_NAMES = {
    "SUCCEEDED": "SUCCEEDED",
    "FAILED": "FAILED",
    "CANCELLED": "CANCELLED",
    "RUNNING": "RUNNING",
    "PENDING": "PENDING",
    "SUBMITTED": "PENDING",
    "UNKNOWN": "UNKNOWN",
}


def app_state_name(state) -> str:
    """nemo-run/torchx AppState → one of kit's state words."""
    return _STATE_NAMES.get(getattr(state, "name", str(state)), "UNKNOWN")


@dataclass
class JobStatus:
    name: str
    state: str
    failed_units: dict[int, str] = field(default_factory=dict)  # unit -> its state, with Slurm's reason (describe)
    reason: str = ""  # why Slurm ended the job (a SlurmFailure's describe()), '' when its own script decided


def combine(states: list[str]) -> str:
    """One state for several (array units, het components)."""
    if not states:
        return "PENDING"
    for s in ("RUNNING", "PENDING", "FAILED", "CANCELLED", "UNKNOWN"):
        if s in states:
            return s
    return "SUCCEEDED"


def slurm_rows(cluster: ClusterConfig, ids: list[str]) -> dict[str, str]:
    """sacct JobID → kit state, for every allocation of the given jobs (array elements `ID_N`, pending or
    cancelled-while-pending array ranges `ID_[0-7%2]`, het components `ID+N`); a state that Slurm ended the job in
    (NODE_FAIL, TIMEOUT, ...) is a SlurmFailure, FAILED with the reason."""
    if not ids:
        return {}
    cmd = f"sacct -n -P -X -j {','.join(ids)} -o JobID,State"
    out = remote_run(cluster, cmd).stdout
    rows = {}
    for line in out.splitlines():
        job_id, _, state = line.partition("|")
        word = state.split()[0] if state.strip() else "PENDING"
        rows[job_id] = SlurmFailure(word) if word in SLURM_FAILURES else _SLURM.get(word, "FAILED")
    return rows


def array_units(spec: str) -> list[int] | None:
    """The unit indices of an array row's task part: `5` → [5]; `[0-7]`, `[2-5,7]`, `[0-7%2]` → every index in
    the brackets (the `%N` throttle is not a unit). None when `spec` is not an array task part."""
    if spec.isdigit():
        return [int(spec)]
    if not (spec.startswith("[") and spec.endswith("]")):
        return None
    units: list[int] = []
    for part in spec[1:-1].split("%", 1)[0].split(","):
        first, _, last = part.partition("-")
        if not first.isdigit() or (last and not last.isdigit()):
            return None
        units.extend(range(int(first), int(last or first) + 1))
    return units


def _unit_offsets(job: JobRecord) -> list[int]:
    """Per slurm id of an array job, the index of its first unit: an array larger than MaxArraySize is split into
    several Slurm arrays, each over a consecutive range of units (a record without offsets has one id, from 0)."""
    if len(job.unit_offsets) == len(job.slurm_ids):
        return list(job.unit_offsets)
    return [0] * len(job.slurm_ids)


def _rows_of(base: str, rows: dict[str, str]) -> dict[str, str]:
    """The rows of one slurm id, keyed by what follows it: '' (the job), '_<task part>' or '+<component>'."""
    return {k[len(base) :]: v for k, v in rows.items() if k == base or k.startswith((f"{base}_", f"{base}+"))}


def _slurm_status(cluster: ClusterConfig, job: JobRecord, rows: dict[str, str]) -> JobStatus:
    """One state for a job from the sacct rows of all its slurm ids."""
    if job.array_size:
        own: dict[int, str] = {}  # units with a row of their own (`ID_5`): they started
        ranged: dict[int, str] = {}  # units of a bracket row (`ID_[0-7%2]`): not started yet, or never will
        # a row without a task part: sacct shows it for a moment, pending or already ended (`ID COMPLETED` before
        # the rows of the units, one of which may have failed), so it never decides the job
        other: list[str] = []
        for base, offset in zip(job.slurm_ids, _unit_offsets(job), strict=True):
            for rest, state in _rows_of(base, rows).items():
                indices = array_units(rest[1:]) if rest.startswith("_") else None
                if indices is None:
                    other.append(state)
                    continue
                target = own if rest[1:].isdigit() else ranged
                for i in indices:
                    target[offset + i] = state
        units = {**ranged, **own}  # an element's own row wins over a range that still lists it
        states = list(units.values())
        if len(units) < job.array_size:  # accounting lags behind: units not listed yet are still to come
            states.append("PENDING" if not units and all(v == "PENDING" for v in other) else "RUNNING")
        # the units that ran and did not succeed (a bracket row's units never started: CANCELLED there is not listed)
        failed = {i: describe(v) for i, v in units.items() if v == "FAILED" or (v == "CANCELLED" and i in own)}
        reasons = [f"unit {i}: {describe(v)}" for i, v in sorted(units.items()) if isinstance(v, SlurmFailure)]
        return JobStatus(job.name, combine(states), failed, "; ".join(reasons))
    states: list[str] = []
    for base in job.slurm_ids:
        mine = _rows_of(base, rows)
        if "+0" in mine:  # het job: the batch script (and so the job's outcome) lives in component 0
            states.append(mine["+0"])
        else:
            states.extend(mine.values())
    reason = next((describe(v) for v in states if isinstance(v, SlurmFailure)), "")
    return JobStatus(job.name, combine(states), reason=reason)


def local_outcome(record: ExperimentRecord, job: JobRecord) -> str | None:
    """SUCCEEDED/FAILED/CANCELLED from the .rc file a none/local job leaves when it ends; None while it has none."""
    try:
        rc = (Path(record.log_dir) / f"{job.name}.rc").read_text().strip()
    except OSError:
        return None
    if rc == CANCELLED_RC:
        return "CANCELLED"
    return "SUCCEEDED" if rc == "0" else "FAILED"


def _local_unit_failures(record: ExperimentRecord, job: JobRecord) -> dict[int, str]:
    failed = {}
    for rc_file in (Path(record.log_dir) / f"{job.name}.units").glob("*.rc"):
        if rc_file.read_text().strip() != "0":
            failed[int(rc_file.stem)] = "FAILED"
    return failed


def experiment_status(cluster: ClusterConfig, record: ExperimentRecord) -> list[JobStatus]:
    if record.executor == "slurm":
        rows = slurm_rows(cluster, [i for j in record.jobs for i in j.slurm_ids])
        return [_slurm_status(cluster, j, rows) for j in record.jobs]
    finished = {j.name: local_outcome(record, j) for j in record.jobs}
    live = {}
    if any(state is None for state in finished.values()):
        live = _detached_states(record) if record.detached else _nemo_run_states(cluster, record)
    out = []
    for job in record.jobs:
        state = finished[job.name] or live.get(job.task_id, "UNKNOWN")
        out.append(JobStatus(job.name, state, _local_unit_failures(record, job) if job.array_size else {}))
    return out


def _detached_states(record: ExperimentRecord) -> dict[str, str]:
    """none, run detached: RUNNING while a job's script runs, PENDING before it started, FAILED when it ended
    without writing its outcome (killed); keyed by task id as nemo-run's states are."""
    out = {}
    for job in record.jobs:
        alive = script_alive(record.log_dir, job.name)
        if alive is False:  # its outcome may have landed just before it exited
            out[job.task_id] = local_outcome(record, job) or "FAILED"
        else:
            out[job.task_id] = "RUNNING" if alive else "PENDING"
    return out


def _nemo_run_states(cluster: ClusterConfig, record: ExperimentRecord) -> dict[str, str]:

    run = import_nemo_run(cluster)
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            exp = run.Experiment.from_id(record.nemo_run_id)
        except (FileNotFoundError, AssertionError):
            return {}
        with exp:
            statuses = exp.status(return_dict=True) or {}
    return {task: app_state_name(info.get("status")) for task, info in statuses.items()}


def squeue_known(cluster: ClusterConfig, ids: list[str]) -> set[str]:
    """The ids among `ids` that squeue still lists, in any state (it forgets a job MinJobAge after its end)."""
    if not ids:
        return set()
    out = remote_run(cluster, f"squeue -h -t all -j {','.join(ids)} -o %i", check=False).stdout
    listed = {line.split("_", 1)[0].split("+", 1)[0] for line in out.split()}
    return listed & set(ids)


def wait_for_states(
    cluster: ClusterConfig,
    record: ExperimentRecord,
    poll_s: float = 1.0,
    timeout_s: float | None = None,
    lost_after_s: float = LOST_AFTER_S,
) -> dict[str, str]:
    """Poll until every job has a final state; returns job name → state.

    On Slurm a job that neither sacct nor squeue has known for `lost_after_s` (since it was last seen, or since
    the wait began) is LOST: it is not waited for any longer, and one line on stderr says so. After `timeout_s`
    (None: no limit) the wait gives up with one line on stderr and returns the states as they are, the
    unfinished ones not final."""
    started = time.monotonic()
    last_seen = {job.name: started for job in record.jobs}
    lost: set[str] = set()
    while True:
        if record.executor == "slurm":
            rows = slurm_rows(cluster, [i for j in record.jobs for i in j.slurm_ids if j.name not in lost])
            statuses = [_slurm_status(cluster, j, rows) for j in record.jobs]
            now = time.monotonic()
            unseen = []
            for job, status in zip(record.jobs, statuses, strict=True):
                if job.name in lost:
                    status.state = "LOST"
                elif any(_rows_of(i, rows) for i in job.slurm_ids):
                    last_seen[job.name] = now
                elif status.state not in FINAL:
                    unseen.append(job)
            queued = squeue_known(cluster, [i for j in unseen for i in j.slurm_ids]) if unseen else set()
            for job, status in zip(record.jobs, statuses, strict=True):
                if job not in unseen:
                    continue
                if queued & set(job.slurm_ids):
                    last_seen[job.name] = now
                elif now - last_seen[job.name] >= lost_after_s:
                    lost.add(job.name)
                    status.state = "LOST"
                    ids = ",".join(job.slurm_ids) or "no id"
                    print(
                        f"kit: job {job.name} (slurm job {ids}) is LOST: neither sacct nor squeue has known it for "
                        f"{now - last_seen[job.name]:.0f} s (purged, or another cluster's?); not waiting for it",
                        file=sys.stderr,
                        flush=True,
                    )
        else:
            statuses = experiment_status(cluster, record)
        if all(s.state in FINAL for s in statuses):
            return {s.name: s.state for s in statuses}
        if timeout_s is not None and time.monotonic() - started >= timeout_s:
            unfinished = ", ".join(f"{s.name} ({s.state})" for s in statuses if s.state not in FINAL)
            print(
                f"kit: stopped waiting after {timeout_s:g} s; not finished: {unfinished}", file=sys.stderr, flush=True
            )
            return {s.name: s.state for s in statuses}
        time.sleep(poll_s)


def slurm_placement(cluster: ClusterConfig, job_id: str) -> tuple[str, str | None]:
    """squeue's state word for a Slurm job (PENDING, CONFIGURING, RUNNING, ...; '' once squeue no longer lists
    it) and, while it runs, its first node."""
    out = remote_run(cluster, f"squeue -h -j {job_id} -o '%T %N'", check=False).stdout.split()
    if not out:
        return "", None
    if out[0] == "RUNNING" and len(out) > 1:
        return "RUNNING", remote_run(cluster, f"scontrol show hostnames {out[1]} | head -n1").stdout.strip()
    return out[0], None


def cancel_experiment(cluster: ClusterConfig, record: ExperimentRecord) -> list[str]:
    """Cancel every job that may still run; returns the names of the jobs it cancelled (a job that had already
    ended, in any state, is left alone and not listed)."""
    if record.executor == "slurm":
        rows = slurm_rows(cluster, [i for j in record.jobs for i in j.slurm_ids])
        live = [j for j in record.jobs if j.slurm_ids and _slurm_status(cluster, j, rows).state not in FINAL]
        if live:
            remote_run(cluster, f"scancel {' '.join(i for j in live for i in j.slurm_ids)}")
        return [j.name for j in live]
    if record.executor == "none":
        return [job.name for job in record.jobs if job.state is None and _signal_local_job(record, job)]

    run = import_nemo_run(cluster)
    acted = []
    with contextlib.redirect_stdout(io.StringIO()), run.Experiment.from_id(record.nemo_run_id) as exp:
        for job in record.jobs:
            if job.state is None and local_outcome(record, job) is None:
                exp.cancel(job.task_id)
                acted.append(job.name)
    for job in acted:  # a killed container cannot record that it was cancelled: its script never ends
        rc_file = Path(record.log_dir) / f"{job}.rc"
        if not rc_file.exists():
            write_atomic(rc_file, CANCELLED_RC + "\n")
    return acted


def _signal_local_job(record: ExperimentRecord, job: JobRecord) -> bool:
    """SIGTERM to a none job's script (its pid file; checked to still be that script); its trap stops its commands."""

    try:
        pid = int((Path(record.log_dir) / f"{job.name}.pid").read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (OSError, ValueError):
        return False
    if b"bash" not in cmdline or local_outcome(record, job) is not None:
        return False
    os.kill(pid, signal.SIGTERM)
    return True


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


def job_figures(cluster: ClusterConfig, record: ExperimentRecord) -> dict[str, list[JobFigures]]:
    """Per job, what its generation clients measured (pipeline_kit.measurements), by array element; read over ssh
    when the cluster is remote. A file that does not parse is left out (figures are advice)."""
    if cluster.ssh_tunnel:
        folder = shlex.quote(f"{record.log_dir}/{MEASUREMENTS_DIR}")
        cat = f'for f in {folder}/*.json; do [ -f "$f" ] && cat "$f" && printf \'\\036\'; done'
        found = []
        for text in remote_run(cluster, cat, check=False).stdout.split("\036"):  # JSON escapes control characters
            try:
                found.append(JobFigures.from_dict(json.loads(text)))
            except (ValueError, KeyError, TypeError):
                continue
    else:
        found = experiment_figures(record.log_dir)
    out: dict[str, list[JobFigures]] = {job.name: [] for job in record.jobs}
    for figures in sorted(found, key=lambda f: [int(p) for p in f.element.split(".") if p.isdigit()]):
        if figures.job in out:
            out[figures.job].append(figures)
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


def _job_of_task(record: ExperimentRecord, task: str) -> str | None:
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
        job = _job_of_task(record, rel.split("/", 1)[0])
        if job is not None:
            out[job].append(f"{root}/{rel}")
    return out


def failure_report(cluster: ClusterConfig, record: ExperimentRecord, job: str, lines: int = 20) -> str:
    """Why a job failed, as kit found it: its kit.log (the failing command or service, its exit code and its
    log's first error lines), else the container start-up lines, else the end of its batch output."""
    text = tail(cluster, f"{record.log_dir}/{job}/kit.log", lines)
    if not text:
        text = "\n".join(container_startup_lines(cluster, record, lines)[job])
    if not text:
        outputs = scheduler_outputs(cluster, record)[job]
        text = "".join(tail(cluster, path, 5) for path in outputs[:2])
    return text if not text or text.endswith("\n") else text + "\n"


# pyxis and enroot report a container that did not start only in the srun output that nemo-run keeps
STARTUP_PATTERN = "pyxis|enroot"


def nemo_run_dir(cluster: ClusterConfig, record: ExperimentRecord) -> str:
    """Where nemo-run keeps an experiment's batch scripts and srun output on the cluster."""
    if cluster.ssh_tunnel:
        return f"{cluster.ssh_tunnel.job_dir}/{record.expname}/{record.nemo_run_id}"
    return f"{cluster.job_dir}/experiments/{record.expname}/{record.nemo_run_id}"


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
        job = _job_of_task(record, path.split("/", 1)[0])
        if job is None or not line.split("pyxis:", 1)[-1].strip() or len(out[job]) >= lines:
            continue
        if files.get(job) != path:
            files[job] = path
            out[job].append(f"{path}:")
        out[job].append(f"  {line}")
    return out
