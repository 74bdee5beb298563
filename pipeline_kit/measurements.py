"""What generation jobs measured (server start-up, queue wait, tokens/s and samples/s per unit): one JSON file per job
under its experiment's log folder (<log_dir>/measurements/), read back across experiments by the planner and status."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from pipeline_kit.atomic import write_atomic

MEASUREMENTS_DIR = "measurements"  # under an experiment's log folder ($KIT_LOG_DIR in a job)
LOGS_GLOB = f"logs/*/*/{MEASUREMENTS_DIR}/*.json"  # every experiment's, under a cluster's job_dir
# what kit's job scripts export (pipeline/render.py), in epoch seconds: when kit submitted the job (absent in a dry
# run's text), and when the job (a Slurm array element; a unit of a none/Docker array) started
SUBMITTED_VAR = "KIT_SUBMITTED_AT"
JOB_START_VAR = "KIT_JOB_START"


@dataclass(frozen=True)
class ServerKey:
    """What a figure is comparable by: the same model served the same way."""

    model: str
    server_type: str
    gpus: int
    nodes: int

    def describe(self) -> str:
        return f"{self.model} on {self.server_type}, {self.gpus} GPU(s) x {self.nodes} node(s)"


@dataclass(frozen=True)
class UnitFigures:
    """One unit as a job ran it: `samples` requested there (those already done before are not counted), the tokens
    they generated, the seconds from its first request to its file done, and `retries`: requests tried again after
    a 429, a 5xx or a lost connection; `clamped`: requests whose max_tokens was cut to what the server's context
    window left the prompt (both 0 in the files of an older kit)."""

    label: str
    samples: int
    tokens: int
    seconds: float
    retries: int = 0
    clamped: int = 0


@dataclass(frozen=True)
class JobFigures:
    """One job (or array element) of a generation run. `startup_s`: from the job's start to the server answering
    (None: a server kit did not start, or one an earlier client of the same job waited for); `queue_wait_s`: from
    submission to the job's start (None: unknown); `generation_s`: from the server answering to the last unit done
    (0 until one is; units are written as they finish, so a killed job keeps the units it finished);
    `units_done_before`: the units the job found done already and skipped (a rerun with every unit done has nothing
    to do: no units, only this count); `partition`: the Slurm partition of the job (of its server's component in a
    heterogeneous job; '' elsewhere and in the files of an older kit), whose queue the wait was spent in."""

    server: ServerKey
    prompt: str
    max_concurrent_requests: int
    startup_s: float | None
    queue_wait_s: float | None
    generation_s: float
    units: tuple[UnitFigures, ...]
    expname: str = ""
    job: str = ""
    recorded_at: float = field(default_factory=time.time)
    element: str = ""  # $KIT_UNIT: the array element (or none/Docker array unit); "0" for a job without an array
    job_started_at: float | None = None  # epoch seconds ($KIT_JOB_START, else the client's own start)
    units_done_before: int = 0
    partition: str = ""

    @property
    def nothing_to_do(self) -> bool:
        """Every unit of the job was done before it started: it requested nothing."""
        return not self.units and self.units_done_before > 0

    @property
    def samples(self) -> int:
        return sum(u.samples for u in self.units)

    @property
    def tokens(self) -> int:
        return sum(u.tokens for u in self.units)

    @property
    def retries(self) -> int:
        return sum(u.retries for u in self.units)

    @property
    def clamped(self) -> int:
        return sum(u.clamped for u in self.units)

    @property
    def seconds_per_sample(self) -> float | None:
        return self.generation_s / self.samples if self.samples else None

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1)

    @classmethod
    def from_dict(cls, data: dict) -> JobFigures:
        data = dict(data)
        data["server"] = ServerKey(**data["server"])
        data["units"] = tuple(UnitFigures(**u) for u in data["units"])
        return cls(**data)


def figures_file(log_dir: str | Path, job: str, element: str | None = None) -> Path:
    """Where a job (an array's element `element`) writes its figures."""
    name = job if element in (None, "") else f"{job}.{element}"
    return Path(log_dir) / MEASUREMENTS_DIR / f"{name}.json"


def write_figures(path: str | Path, figures: JobFigures) -> None:
    write_atomic(path, figures.to_json())


def read_figures(path: str | Path) -> JobFigures | None:
    """A figures file; None when it is unreadable (a job of an older kit, a disk that filled): figures are advice."""
    try:
        return JobFigures.from_dict(json.loads(Path(path).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def experiment_figures(log_dir: str | Path) -> list[JobFigures]:
    """The figures of one experiment's jobs, oldest first."""
    found = (read_figures(p) for p in sorted((Path(log_dir) / MEASUREMENTS_DIR).glob("*.json")))
    return sorted((f for f in found if f is not None), key=lambda f: f.recorded_at)


def stored_figures(job_dir: str | Path, server: ServerKey | None = None) -> list[JobFigures]:
    """Every experiment's figures under a cluster's `job_dir` (of `server` only, when given), oldest first."""
    found = (read_figures(p) for p in Path(job_dir).glob(LOGS_GLOB))
    return sorted(
        (f for f in found if f is not None and (server is None or f.server == server)), key=lambda f: f.recorded_at
    )
