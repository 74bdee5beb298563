"""What a generation job measures as it runs (pipeline_kit.measurements' JobFigures): its server's start-up, its
queue wait, and per unit the samples it requested, the tokens they generated, the seconds they took and the
requests it tried again. The file is rewritten once the server answers and after each unit, so a job killed at its
wall time keeps what it finished."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.registry import task_class
from pipeline_kit.measurements import (
    JOB_START_VAR,
    SUBMITTED_VAR,
    JobFigures,
    ServerKey,
    UnitFigures,
    figures_file,
    read_figures,
    write_figures,
)
from pipeline_kit.overrides import config_value

PROCESS_START = time.time()  # the start of this client (near enough: before its heavy imports), without $KIT_JOB_START


def unit_label(output_file: str) -> str:
    """A unit's name as ++units writes it (greedy, rs3, chunk_2, rs3_chunk_2); another file's stem as it is."""
    stem = Path(output_file).stem
    return (stem.removeprefix("output").lstrip("-_") or "greedy") if stem.startswith("output") else stem


def prompt_name(cfg: GenerateConfig) -> str:
    """The prompt config of the generation type ('' for a type without one, e.g. reward, or a user's type that does
    not name its key)."""
    key = getattr(task_class(cfg.generation_type), "prompt_key", None)
    try:
        return str(config_value(cfg, key)) if key else ""
    except AttributeError:
        return ""


def _epoch(environ: Mapping[str, str], name: str) -> float | None:
    try:
        return float(environ[name])
    except (KeyError, ValueError):
        return None


class FiguresRecorder:
    """The figures of one job's client, written to `<$KIT_LOG_DIR>/measurements/<$KIT_JOB>.<$KIT_UNIT>.json`; off
    (every call does nothing) where $KIT_LOG_DIR is unset (the script run by hand). A client that runs after another
    one of the same job (kit eval runs one per benchmark in turn, on one server) writes `<job>.<unit>.2.json`, ...,
    with `startup_s` None: the first one paid the start-up. Writing never fails the job: a failure is one line."""

    def __init__(self, cfg: GenerateConfig, environ: Mapping[str, str] = os.environ, say=None, done_before: int = 0):
        self.say = say or (lambda line: print(f"kit generate: {line}", file=sys.stderr, flush=True))
        self.cfg = cfg
        self.done_before = done_before  # units found done already (skipped)
        self.path: Path | None = None
        self.units: list[UnitFigures] = []
        self.ready_at: float | None = None  # time.monotonic() when the server answered
        self.startup_s: float | None = None
        self.generation_s = 0.0
        log_dir, job = environ.get("KIT_LOG_DIR"), environ.get("KIT_JOB")
        if not log_dir or not job:
            return
        self.expname, self.job, self.prompt = environ.get("KIT_EXPNAME", ""), job, prompt_name(cfg)
        given_start = _epoch(environ, JOB_START_VAR)
        self.job_started_at = given_start if given_start is not None else PROCESS_START
        submitted = _epoch(environ, SUBMITTED_VAR)
        self.queue_wait_s = max(0.0, self.job_started_at - submitted) if submitted is not None else None
        # the server's component (the first) of a heterogeneous job, else the job's: the queue the wait was spent in
        self.partition = environ.get("SLURM_JOB_PARTITION_HET_GROUP_0") or environ.get("SLURM_JOB_PARTITION", "")
        unit = environ.get("KIT_UNIT") or None
        self.element, self.path, self.first_client = unit or "", figures_file(log_dir, job, unit), True
        for k in range(2, 1000):  # an earlier client of this very job (same start) wrote one: the next name
            earlier = read_figures(self.path) if given_start is not None and self.path.exists() else None
            if earlier is None or earlier.job_started_at != given_start:
                break
            self.first_client = False
            self.element = f"{unit}.{k}" if unit else str(k)
            self.path = figures_file(log_dir, job, self.element)

    def nothing_to_do(self) -> None:
        """Every unit was done already: the job requests nothing, and says so (`kit status --verbose` then shows the
        last run that generated)."""
        if self.path is not None:
            self._write()

    def server_ready(self) -> None:
        """The server answered: the job's start-up ends (for a server kit started, and the job's first client)."""
        self.ready_at = time.monotonic()
        if self.path is None:
            return
        if self.cfg.server.server_log is not None and self.first_client:
            self.startup_s = max(0.0, time.time() - self.job_started_at)
        self._write()

    def unit_done(
        self, output_file: str, samples: int, tokens: int, seconds: float, retries: int = 0, clamped: int = 0
    ) -> None:
        """A unit's final file is written: `samples` requested in this job, their `tokens`, `seconds` from its first
        request, its `retries` (requests tried again after a 429, a 5xx, a lost connection) and `clamped` (requests
        whose max_tokens was fitted to the server's context window)."""
        if self.path is None or samples == 0:
            return
        self.units.append(UnitFigures(unit_label(output_file), samples, tokens, round(seconds, 3), retries, clamped))
        if self.ready_at is not None:
            self.generation_s = time.monotonic() - self.ready_at
        self._write()

    def _write(self) -> None:
        server = self.cfg.server
        figures = JobFigures(
            ServerKey(server.model, server.server_type or "", server.gpus, server.nodes),
            self.prompt,
            self.cfg.max_concurrent_requests,
            None if self.startup_s is None else round(self.startup_s, 3),
            None if self.queue_wait_s is None else round(self.queue_wait_s, 3),
            round(self.generation_s, 3),
            tuple(self.units),
            self.expname,
            self.job,
            element=self.element,
            job_started_at=self.job_started_at,
            units_done_before=self.done_before,
            partition=self.partition,
        )
        try:
            write_figures(self.path, figures)
        except OSError as e:
            self.say(f"cannot write the job's measurements to {self.path} ({e.strerror or e}); generation goes on")
            self.path = None  # one line, not one per unit
