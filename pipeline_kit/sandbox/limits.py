"""What one execution may use, and the checked form of a `POST /execute` body (stdlib only)."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

GiB, MiB = 1 << 30, 1 << 20
LANGUAGES = ("python", "ipython", "shell")
SESSION_HEADER = "X-Session-ID"  # a request with it runs in that session
CELLS_HEADER = "X-Session-Cells"  # how many successful cells the client has run in the session (for replay)


@dataclass(frozen=True)
class Limits:
    """Per execution (a session's cell shares its session's process, memory and files)."""

    memory: int = 4 * GiB  # address space of each process (RLIMIT_AS)
    processes: int = 64  # processes and threads of the execution (RLIMIT_NPROC in its own user namespace)
    file_size: int = 256 * MiB  # largest file it may write (RLIMIT_FSIZE)
    tmp_size: int = 512 * MiB  # its private /tmp (a tmpfs, so it counts as memory)
    open_files: int = 256
    max_timeout: float = 600.0  # the largest `timeout` a request may ask for
    output_kill: int = 16 * MiB  # bytes of stdout+stderr after which a flooding execution is stopped
    session_cpu_seconds: int = 3600  # a session's CPU time over all its cells

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class ExecuteRequest:
    code: str
    language: str = "python"
    timeout: float = 10.0  # wall seconds; CPU time is capped at the same number of seconds, rounded up
    std_input: str = ""
    max_output_characters: int = 10_000

    @property
    def cpu_seconds(self) -> int:
        return math.ceil(self.timeout)


class BadRequest(ValueError):
    """A request the server answers with 400 and this message."""


def parse_request(body: object, limits: Limits) -> ExecuteRequest:
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object with at least 'code'")
    unknown = sorted(set(body) - set(ExecuteRequest.__dataclass_fields__))
    if unknown:
        raise BadRequest(f"unknown field '{unknown[0]}'; known: {', '.join(ExecuteRequest.__dataclass_fields__)}")
    if not isinstance(body.get("code"), str):
        raise BadRequest("'code' is required and must be a string")
    req = ExecuteRequest(**body)
    if req.language not in LANGUAGES:
        raise BadRequest(f"language '{req.language}' is not one of {', '.join(LANGUAGES)}")
    if not isinstance(req.timeout, int | float) or not 0 < req.timeout <= limits.max_timeout:
        raise BadRequest(f"timeout {req.timeout!r} must be a number of seconds in (0, {limits.max_timeout:g}]")
    if not isinstance(req.std_input, str):
        raise BadRequest("'std_input' must be a string")
    if not isinstance(req.max_output_characters, int) or req.max_output_characters < 0:
        raise BadRequest("'max_output_characters' must be a non-negative integer")
    return req
