"""Executions as the server runs them: a stateless run, and a session (a long-lived isolated process that runs
cells one at a time). Both answer `{status, stdout, stderr, truncated, ...}`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import time
from dataclasses import dataclass, field

from pipeline_kit.sandbox.limits import ExecuteRequest, Limits
from pipeline_kit.sandbox.pool import CappedReader, WorkerPool, feed, pipe, read_lines

STATUS_GRACE = 10.0  # seconds past the timeout before the server stops waiting for a worker's report
DRAIN_AFTER_CELL = 0.2  # seconds to read what a cell's background processes still write


def _kill(pid: int | None) -> None:
    if pid is not None:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


class Output:
    """stdout and stderr of one execution, capped, with a shared byte budget for flooding code."""

    def __init__(self, out_fd: int, err_fd: int, req: ExecuteRequest, limits: Limits):
        budget = [limits.output_kill]
        keep = req.max_output_characters * 4 + 4  # UTF-8 needs at most 4 bytes a character
        self.cap = req.max_output_characters
        self.readers = [CappedReader(out_fd, keep, budget), CappedReader(err_fd, keep, budget)]

    async def wait(self, timeout: float | None) -> None:
        await asyncio.wait([r.done for r in self.readers], timeout=timeout)
        for r in self.readers:
            r.close()

    def result(self, status: str, **extra) -> dict:
        texts, truncated = [], False
        for reader in self.readers:
            text = reader.data.decode(errors="replace")
            if len(text) > self.cap or reader.truncated:
                text = text[: self.cap] + f"\n<output cut: more than {self.cap} characters>"
                truncated = True
            texts.append(text)
        return {"status": status, "stdout": texts[0], "stderr": texts[1], "truncated": truncated, **extra}


def _add_note(result: dict, note: str) -> None:
    """The server's own word on an execution, after whatever the code wrote to stderr."""
    result["stderr"] += ("\n" if result["stderr"] else "") + note


def _status(report: dict) -> str:
    if report.get("timed_out") or report.get("cpu_limit"):
        return "timeout"
    return "completed" if report.get("exit_code") == 0 else "error"


async def _read_report(status_fd: int, deadline: float) -> tuple[int | None, dict]:
    """The supervisor's pid (from its `pid N` line) and its JSON report; a report with an `error` when it did not
    come in time (the supervisor is then killed) or the supervisor died without one."""
    reader = await read_lines(status_fd)
    pid = None
    try:
        first = await asyncio.wait_for(reader.readline(), timeout=max(0.1, deadline - time.monotonic()))
        if first.startswith(b"pid "):
            pid = int(first.split()[1])
            line = await asyncio.wait_for(reader.readline(), timeout=max(0.1, deadline - time.monotonic()))
        else:
            line = first
        return pid, json.loads(line) if line.strip() else {"error": "the execution's supervisor exited unannounced"}
    except TimeoutError:
        _kill(pid)
        return pid, {"error": "the sandbox worker did not report in time; the execution was killed"}
    finally:
        reader.feed_eof()


async def run_stateless(pool: WorkerPool, req: ExecuteRequest, limits: Limits) -> dict:
    start = time.monotonic()
    code_r, code_w = pipe()
    in_r, in_w = pipe()
    out_r, out_w = pipe()
    err_r, err_w = pipe()
    st_r, st_w = pipe()
    message = {
        "kind": "run",
        "language": req.language,
        "timeout": req.timeout,
        "cpu_seconds": req.cpu_seconds,
        "limits": limits.as_dict(),
    }
    try:
        pool.send(message, [code_r, in_r, out_w, err_w, st_w])
    finally:
        for fd in (code_r, in_r, out_w, err_w, st_w):
            os.close(fd)
    output = Output(out_r, err_r, req, limits)
    feeders = [
        asyncio.ensure_future(feed(code_w, req.code.encode())),
        asyncio.ensure_future(feed(in_w, req.std_input.encode())),
    ]
    pid, report = await _read_report(st_r, start + req.timeout + STATUS_GRACE)
    await output.wait(timeout=STATUS_GRACE)  # the namespace is gone once the report is in, so this is end of file
    for task in feeders:
        task.cancel()
    if report.get("oom_killed"):
        report["error"] = f"killed: its processes together used more than the memory limit ({limits.memory >> 20} MiB)"
    elif report.get("exit_code") == -signal.SIGSYS:  # the worker's seccomp filter (isolation.refuse_ipc)
        report["error"] = "killed: it made a system call through another ABI (i386's int 0x80 or x32), which is refused"
    status = _status(report) if "error" not in report else "error"
    result = output.result(status, exit_code=report.get("exit_code"), wall_seconds=round(time.monotonic() - start, 4))
    if "error" in report:
        _add_note(result, report["error"])
    return result


@dataclass(eq=False)
class Session:
    """One isolated process (its own namespaces, PID 1 of them) that keeps a Python namespace across cells."""

    id: str
    channel: socket.socket
    pid: int | None = None  # the supervisor outside its PID namespace: killing it ends the session
    cells: int = 0
    created: float = field(default_factory=time.time)
    last_used: float = field(default_factory=time.time)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    alive: bool = True
    status: asyncio.StreamReader | None = None  # the supervisor's pipe, held open while the session lives

    @classmethod
    async def start(cls, session_id: str, pool: WorkerPool, limits: Limits) -> Session:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        st_r, st_w = pipe()
        message = {"kind": "session", "cpu_seconds": limits.session_cpu_seconds, "limits": limits.as_dict()}
        try:
            pool.send(message, [theirs.fileno(), st_w])
        finally:
            theirs.close()
            os.close(st_w)
        reader = await read_lines(st_r)
        first = await asyncio.wait_for(reader.readline(), timeout=30)
        ours.setblocking(False)
        if not first.startswith(b"pid "):
            ours.close()
            raise RuntimeError(f"the sandbox worker could not start a session: {first.decode(errors='replace')}")
        return cls(session_id, ours, pid=int(first.split()[1]), status=reader)

    def running(self) -> bool:
        """Alive as far as the server knows, and its supervisor still exists (a crash or a kill -9 ends it)."""
        if not self.alive or self.pid is None:
            return False
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return False
        return True

    def kill(self) -> None:
        self.alive = False
        _kill(self.pid)
        self.channel.close()  # its worker takes its cgroups back once the supervisor is gone

    async def run_cell(self, req: ExecuteRequest, limits: Limits) -> dict:
        """One cell. A timeout or a crash ends the session (its state is lost; clients replay their cells)."""
        start = time.monotonic()
        loop = asyncio.get_running_loop()
        in_r, in_w = pipe()
        out_r, out_w = pipe()
        err_r, err_w = pipe()
        cell = {"code": req.code, "language": req.language, "cpu_seconds": req.cpu_seconds}
        try:
            socket.send_fds(self.channel, [json.dumps(cell).encode()], [in_r, out_w, err_w])
        except OSError:
            self.kill()
        finally:
            for fd in (in_r, out_w, err_w):
                os.close(fd)
        if not self.alive:
            for fd in (in_w, out_r, err_r):
                os.close(fd)
            return {"status": "error", "stdout": "", "stderr": "the session's process is gone", "truncated": False}
        output = Output(out_r, err_r, req, limits)
        feeder = asyncio.ensure_future(feed(in_w, req.std_input.encode()))
        self.last_used = time.time()
        try:
            reply = await asyncio.wait_for(loop.sock_recv(self.channel, 1 << 16), timeout=req.timeout)
            report = json.loads(reply) if reply else {"exit_code": None, "error": "the session's process exited"}
            if not reply and time.monotonic() - start >= 0.95 * req.timeout:
                report = {"timed_out": True}  # its CPU-time limit (as long as the timeout) ended it
        except TimeoutError:
            report = {"timed_out": True}
        if "error" in report or report.get("timed_out"):
            self.kill()  # killing the supervisor kills PID 1 of the session, and with it every process in it
        await output.wait(timeout=DRAIN_AFTER_CELL if self.alive else STATUS_GRACE)
        feeder.cancel()
        self.cells += 1
        status = "error" if "error" in report else _status(report)
        result = output.result(
            status,
            exit_code=report.get("exit_code"),
            wall_seconds=round(time.monotonic() - start, 4),
            session_id=self.id,
            cell=self.cells,
        )
        if "error" in report:
            _add_note(result, report["error"] + "; the session was reset")
        if report.get("timed_out"):
            _add_note(result, f"timed out after {req.timeout:g} s; the session was reset")
        return result

    def describe(self) -> dict:
        return {
            "id": self.id,
            "pid": self.pid,
            "cells": self.cells,
            "created": self.created,
            "last_used": self.last_used,
        }
