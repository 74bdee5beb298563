"""The words of a job's state, as `kit status` shows them and `Experiment` returns them: FINAL, JobStatus, combining
the states of array units and het components, Slurm's reasons for ending a job (SlurmFailure) and nemo-run's
states in kit's words. No I/O: job_status.py and slurm_states.py read the states."""

from __future__ import annotations

from dataclasses import dataclass, field

FINAL = ("SUCCEEDED", "FAILED", "CANCELLED", "LOST")  # LOST: the scheduler no longer knows the job (see wait)
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
