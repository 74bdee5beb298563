"""The server's side of the workers: start them (one per CPU by default), hand them executions with their pipes,
restart one that died; and the asyncio pipe helpers that feed code/stdin in and read capped output out."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field

from pipeline_kit.sandbox.cgroups import ServerCgroup
from pipeline_kit.sandbox.isolation import NOBODY, Layers

WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
DEFAULT_READONLY = ["/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin", "/etc"]


class WorkerStartError(RuntimeError):
    """A worker could not build its namespaces (user namespaces off, a container's seccomp, ...)."""


def python_paths() -> list[str]:
    """The interpreter and the packages the sandboxed code imports from: this Python's prefixes."""
    return sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})


@dataclass
class Worker:
    process: subprocess.Popen
    control: socket.socket

    def send(self, message: dict, fds: list[int]) -> None:
        socket.send_fds(self.control, [json.dumps(message).encode()], fds)


@dataclass
class WorkerPool:
    size: int
    layers: Layers
    readonly_paths: list[str] = field(default_factory=list)
    workers: list[Worker] = field(default_factory=list)
    restarts: int = 0
    cgroup: ServerCgroup | None = None  # per-execution memory cgroups go under it, when the host allows them
    _next: itertools.count = field(default_factory=itertools.count)

    def start(self) -> None:
        if self.layers.memory_cgroup:
            owner = NOBODY if self.layers.user_ns else 0  # the uid the workers run as, outside
            self.cgroup = ServerCgroup.create(owner, owner)
        self.workers = [self._start_one() for _ in range(self.size)]

    def active_layers(self) -> list[str]:
        """The layers in force: memory_cgroup only where it could be made."""
        return [name for name in self.layers.describe() if name != "memory_cgroup" or self.cgroup is not None]

    def _start_one(self) -> Worker:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {
            "control_fd": theirs.fileno(),
            "layers": {name: getattr(self.layers, name) for name in self.layers.__dataclass_fields__},
            "readonly_paths": DEFAULT_READONLY + python_paths() + self.readonly_paths,
        }
        process = subprocess.Popen(
            [sys.executable, "-I", WORKER_SCRIPT, json.dumps(config)],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
        )
        theirs.close()
        ours.settimeout(30)
        try:
            hello = json.loads(ours.recv(1 << 16) or b'{"error": "the worker exited"}')
        except (TimeoutError, ValueError) as e:
            process.kill()
            raise WorkerStartError(f"sandbox worker did not start: {e}") from None
        if "error" in hello:
            process.wait()
            raise WorkerStartError(hello["error"])
        ours.settimeout(None)
        return Worker(process, ours)

    def send(self, message: dict, fds: list[int]) -> None:
        """Hand an execution to the next worker (round robin). A worker found dead is replaced, and the execution
        goes to its replacement."""
        message["cgroup"] = self.cgroup.path if self.cgroup else None
        index = next(self._next) % len(self.workers)
        worker = self.workers[index]
        if worker.process.poll() is None:
            try:
                return worker.send(message, fds)
            except OSError:  # it died between the check and the send
                worker.process.kill()
                worker.process.wait()
        worker.control.close()
        self.restarts += 1
        print(f"kit sandbox: worker {index} had exited ({worker.process.returncode}); restarting it", flush=True)
        self.workers[index] = self._start_one()
        self.workers[index].send(message, fds)

    def close(self) -> None:
        for worker in self.workers:
            worker.control.close()  # the worker exits on end of file
        for worker in self.workers:
            try:
                worker.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                worker.process.kill()
        if self.cgroup is not None:
            self.cgroup.remove()


def pipe() -> tuple[int, int]:
    r, w = os.pipe2(os.O_CLOEXEC)
    return r, w


class CappedReader:
    """Reads a pipe to end of file, keeping the first `keep` bytes and counting the rest. Once `budget[0]` (bytes
    left for stdout and stderr together) runs out, it closes the pipe: the writer gets EPIPE."""

    def __init__(self, fd: int, keep: int, budget: list[int]):
        self.fd, self.keep, self.budget = fd, keep, budget
        self.data = bytearray()
        self.total = 0
        self.stopped = False
        self.done = asyncio.get_running_loop().create_future()
        os.set_blocking(fd, False)
        asyncio.get_running_loop().add_reader(fd, self._on_readable)

    def _on_readable(self) -> None:
        try:
            chunk = os.read(self.fd, 1 << 16)
        except BlockingIOError:
            return
        if chunk:
            self.total += len(chunk)
            room = self.keep - len(self.data)
            if room > 0:
                self.data += chunk[:room]
            self.budget[0] -= len(chunk)
            if self.budget[0] > 0:
                return
            self.stopped = True
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            asyncio.get_running_loop().remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1
        if not self.done.done():
            self.done.set_result(None)

    @property
    def truncated(self) -> bool:
        return self.stopped or self.total > len(self.data)


async def feed(fd: int, data: bytes) -> None:
    """Write `data` into a pipe without blocking the loop; stop quietly if the reader is gone."""
    loop = asyncio.get_running_loop()
    os.set_blocking(fd, False)
    view = memoryview(data)
    try:
        while view:
            try:
                view = view[os.write(fd, view[: 1 << 16]) :]
            except BlockingIOError:
                ready = loop.create_future()
                loop.add_writer(fd, ready.set_result, None)
                try:
                    await ready
                finally:
                    loop.remove_writer(fd)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        os.close(fd)


async def read_lines(fd: int) -> asyncio.StreamReader:
    """The status pipe as a StreamReader (lines: `pid N`, then the JSON report)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(fd, "rb", 0))
    return reader
