"""A Slurm job's state read from the scheduler: sacct's rows (array units, bracket rows of units that never
started, het components, several Slurm arrays per job) in kit's words, squeue's view of jobs it still lists, and
where a running job was placed; over ssh when the cluster is remote."""

from __future__ import annotations

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.launch.job_states import SLURM_FAILURES, JobStatus, SlurmFailure, combine, describe
from pipeline_kit.launch.records import JobRecord
from pipeline_kit.launch.remote import remote_run

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


def unit_offsets(job: JobRecord) -> list[int]:
    """Per slurm id of an array job, the index of its first unit: an array larger than MaxArraySize is split into
    several Slurm arrays, each over a consecutive range of units (a record without offsets has one id, from 0)."""
    if len(job.unit_offsets) == len(job.slurm_ids):
        return list(job.unit_offsets)
    return [0] * len(job.slurm_ids)


def rows_of(base: str, rows: dict[str, str]) -> dict[str, str]:
    """The rows of one slurm id, keyed by what follows it: '' (the job), '_<task part>' or '+<component>'."""
    return {k[len(base) :]: v for k, v in rows.items() if k == base or k.startswith((f"{base}_", f"{base}+"))}


def slurm_status(cluster: ClusterConfig, job: JobRecord, rows: dict[str, str]) -> JobStatus:
    """One state for a job from the sacct rows of all its slurm ids."""
    if job.array_size:
        own: dict[int, str] = {}  # units with a row of their own (`ID_5`): they started
        ranged: dict[int, str] = {}  # units of a bracket row (`ID_[0-7%2]`): not started yet, or never will
        # a row without a task part: sacct shows it for a moment, pending or already ended (`ID COMPLETED` before
        # the rows of the units, one of which may have failed), so it never decides the job
        other: list[str] = []
        for base, offset in zip(job.slurm_ids, unit_offsets(job), strict=True):
            for rest, state in rows_of(base, rows).items():
                indices = array_units(rest[1:]) if rest.startswith("_") else None
                if indices is None:
                    other.append(state)
                    continue
                target = own if rest[1:].isdigit() else ranged
                for i in indices:
                    target[offset + i] = state
        units = {**ranged, **own}  # an element's own row wins over a range that still lists it
        states = list(units.values())
        if len(units) < job.array_size:  # accounting lags behind: units not listed yet are still to come; while
            # every row listed is pending (one array of a split submission recorded before the next), so is the job
            states.append("PENDING" if all(v == "PENDING" for v in (*states, *other)) else "RUNNING")
        # the units that ran and did not succeed (a bracket row's units never started: CANCELLED there is not listed)
        failed = {i: describe(v) for i, v in units.items() if v == "FAILED" or (v == "CANCELLED" and i in own)}
        reasons = [f"unit {i}: {describe(v)}" for i, v in sorted(units.items()) if isinstance(v, SlurmFailure)]
        return JobStatus(job.name, combine(states), failed, "; ".join(reasons))
    states: list[str] = []
    for base in job.slurm_ids:
        mine = rows_of(base, rows)
        if "+0" in mine:  # het job: the batch script (and so the job's outcome) lives in component 0
            states.append(mine["+0"])
        else:
            states.extend(mine.values())
    reason = next((describe(v) for v in states if isinstance(v, SlurmFailure)), "")
    return JobStatus(job.name, combine(states), reason=reason)


def squeue_known(cluster: ClusterConfig, ids: list[str]) -> set[str]:
    """The ids among `ids` that squeue still lists, in any state (it forgets a job MinJobAge after its end)."""
    if not ids:
        return set()
    out = remote_run(cluster, f"squeue -h -t all -j {','.join(ids)} -o %i", check=False).stdout
    listed = {line.split("_", 1)[0].split("+", 1)[0] for line in out.split()}
    return listed & set(ids)


def slurm_placement(cluster: ClusterConfig, job_id: str) -> tuple[str, str | None]:
    """squeue's state word for a Slurm job (PENDING, CONFIGURING, RUNNING, ...; '' once squeue no longer lists
    it) and, while it runs, its first node."""
    out = remote_run(cluster, f"squeue -h -j {job_id} -o '%T %N'", check=False).stdout.split()
    if not out:
        return "", None
    if out[0] == "RUNNING" and len(out) > 1:
        return "RUNNING", remote_run(cluster, f"scontrol show hostnames {out[1]} | head -n1").stdout.strip()
    return out[0], None
