"""The server's side of the workers: start them (one per CPU by default), hand them executions with their pipes,
restart one that died; and the asyncio pipe helpers that feed code/stdin in and read capped output out."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import select
import signal
import socket
import subprocess
import sys
from dataclasses import dataclass, field, replace

from pipeline_kit.sandbox import support
from pipeline_kit.sandbox.cgroups import CONTROLLERS, CgroupUnavailable, ServerCgroup
from pipeline_kit.sandbox.isolation import NOBODY, Layers

WORKER_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "worker.py")
DEFAULT_READONLY = ["/usr", "/bin", "/lib", "/lib32", "/lib64", "/libx32", "/sbin", "/etc"]
# An execution's environment is the worker's, which every fork inherits: never the server's own, where a job keeps
# its secrets (a judge's API key, a tracker's token). Numeric libraries start one thread per core unless told
# otherwise: on a node with more cores than --processes, OpenBLAS's start then fails and `import numpy` hangs.
THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS")
KEPT_FROM_SERVER = ("LD_LIBRARY_PATH", "TZ")  # where libraries are, and the local time


def execution_environment(extra: dict[str, str]) -> dict[str, str]:
    """The environment of every execution: a fixed one (PATH with this Python's folder first, one thread per
    numeric library), LD_LIBRARY_PATH and TZ where the server has them, then --env's NAME=VALUE pairs."""
    env = {
        "PATH": os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"]),
        "HOME": "/tmp",
        "LANG": "C.UTF-8",
        **dict.fromkeys(THREAD_VARIABLES, "1"),
    }
    env.update({name: os.environ[name] for name in KEPT_FROM_SERVER if name in os.environ})
    return {**env, **extra}


class WorkerStartError(RuntimeError):
    """A worker could not build its namespaces (user namespaces off, a container's seccomp, ...)."""


class PreloadError(ValueError):
    """A --preload module would not import in a worker (the user's to fix: the module or the flag)."""


def python_paths() -> list[str]:
    """The interpreter and the packages the sandboxed code imports from: this Python's prefixes."""
    return sorted({sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix})


class WorkerProcess:
    """A worker: a child of the workers' zygote, not of the server, so watched and killed through a pidfd."""

    def __init__(self, pid: int):
        self.pid = pid
        try:
            self.pidfd = os.pidfd_open(pid)
        except ProcessLookupError:  # it ended already: its handshake says why
            self.pidfd = None

    def alive(self) -> bool:
        return self.pidfd is not None and not select.select([self.pidfd], [], [], 0)[0]

    def wait(self, timeout: float) -> bool:
        """Whether it ended within `timeout` seconds."""
        return self.pidfd is None or bool(select.select([self.pidfd], [], [], timeout)[0])

    def kill(self) -> None:
        if self.pidfd is not None:
            try:
                signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


@dataclass
class Worker:
    process: WorkerProcess
    control: socket.socket

    def send(self, message: dict, fds: list[int]) -> None:
        socket.send_fds(self.control, [json.dumps(message).encode()], fds)


@dataclass
class WorkerPool:
    """`layers` is what was asked for until `start()`, then what is in force; `unavailable` says, for each asked-for
    layer this host or container does not allow, why (the server logs it, /health reports it)."""

    size: int
    layers: Layers
    readonly_paths: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)  # --env: added to every execution's environment
    # modules the workers' zygote imports before it forks them (worker.preload); strict: each must import (else a
    # missing one is left out)
    preload: list[str] = field(default_factory=list)
    preload_strict: bool = False
    preloaded: list[str] = field(default_factory=list)  # what the workers did import
    workers: list[Worker] = field(default_factory=list)
    restarts: int = 0
    cgroups: list[ServerCgroup] = field(default_factory=list)  # the workers' cgroups for executions go under these
    unavailable: dict[str, str] = field(default_factory=dict)
    _next: itertools.count = field(default_factory=itertools.count)
    _zygote: subprocess.Popen | None = None  # the workers' parent (worker.zygote), and its control socket
    _zygote_control: socket.socket | None = None

    def start(self) -> None:
        """Probe which layers can be had, make the server's cgroups, start the workers. Without an essential layer
        that was asked for (no network, the host's filesystem) it refuses, rather than run code with them."""
        wanted = self.layers
        self.layers, self.unavailable = support.probe(wanted)
        missing = support.essential_missing(wanted, self.unavailable)
        if missing:
            raise WorkerStartError("; ".join(f"{name}: {self.unavailable[name]}" for name in missing))
        self._make_cgroups()
        started: list[tuple[WorkerProcess, socket.socket]] = []
        try:
            self._start_zygote()
            for _ in range(self.size):  # forked at once, then each says it is ready
                started.append(self._spawn())
            for process, control in started:
                self.workers.append(self._handshake(process, control))
        except (WorkerStartError, PreloadError):
            for process, control in started[len(self.workers) :]:
                control.close()  # forked, not (or not yet) ready: end of file ends them
                process.close()
            self.close()  # the cgroups made so far, the zygote and the workers that were ready
            raise

    def _make_cgroups(self) -> None:
        owner = NOBODY if self.layers.nobody_uid else os.getuid()  # the uid the workers run as, outside
        off = {}
        for layer, controller in CONTROLLERS.items():
            if getattr(self.layers, layer):
                try:
                    self.cgroups.append(ServerCgroup.create(owner, owner, controller))
                except CgroupUnavailable as e:
                    off[layer] = self.unavailable[layer] = str(e)
        self.layers = replace(self.layers, **{name: False for name in off})

    def cgroup_paths(self) -> list[str]:
        return [c.path for c in self.cgroups]

    def active_layers(self) -> list[str]:
        """The layers in force."""
        return self.layers.describe()

    def inactive_layers(self) -> dict[str, str]:
        """Each layer not in force, and why: this host does not allow it, or --isolation switched it off."""
        flag = "switched off with --isolation"
        return {
            name: self.unavailable.get(name, "off with user_ns" if name == "nobody_uid" else flag)
            for name in self.layers.__dataclass_fields__
            if not getattr(self.layers, name)
        }

    def _start_one(self) -> Worker:
        return self._handshake(*self._spawn())

    def _start_zygote(self) -> None:
        """The workers' parent (worker.zygote), which imports --preload once for all of them."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        config = {
            "control_fd": theirs.fileno(),
            "layers": {name: getattr(self.layers, name) for name in self.layers.__dataclass_fields__},
            "readonly_paths": DEFAULT_READONLY + python_paths() + self.readonly_paths,
            "cgroups": self.cgroup_paths(),
            "preload": self.preload,
            "preload_strict": self.preload_strict,
        }
        self._zygote = subprocess.Popen(
            [sys.executable, "-I", WORKER_SCRIPT, json.dumps(config)],
            pass_fds=[theirs.fileno()],
            stdin=subprocess.DEVNULL,
            env=execution_environment(self.env),
        )
        theirs.close()
        self._zygote_control = ours
        hello = self._receive(ours, "the sandbox's worker zygote")
        if "error" in hello:
            self._zygote.wait()
            raise (PreloadError if hello.get("preload") else WorkerStartError)(hello["error"])
        self.preloaded = hello["preloaded"]

    def _spawn(self) -> tuple[WorkerProcess, socket.socket]:
        """A worker forked by the zygote (a new zygote if it has died), and the server's end of its control socket."""
        if self._zygote is None or self._zygote.poll() is not None:
            if self._zygote_control is not None:
                self._zygote_control.close()
            self._start_zygote()
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            socket.send_fds(self._zygote_control, [b"worker"], [theirs.fileno()])
            reply = self._receive(self._zygote_control, "the sandbox's worker zygote")
        finally:
            theirs.close()
        if "worker" not in reply:
            raise WorkerStartError(f"the sandbox's worker zygote did not fork a worker: {reply.get('error')}")
        return WorkerProcess(reply["worker"]), ours

    @staticmethod
    def _receive(control: socket.socket, who: str) -> dict:
        control.settimeout(60)
        try:
            return json.loads(control.recv(1 << 16) or json.dumps({"error": f"{who} exited"}))
        except (TimeoutError, ValueError) as e:
            raise WorkerStartError(f"{who} did not answer: {e}") from None
        finally:
            control.settimeout(None)

    def _handshake(self, process: WorkerProcess, ours: socket.socket) -> Worker:
        hello = self._receive(ours, "a sandbox worker")
        if "error" in hello:
            process.kill()
            process.close()
            ours.close()
            raise WorkerStartError(hello["error"])
        return Worker(process, ours)

    def send(self, message: dict, fds: list[int]) -> None:
        """Hand an execution to the next worker (round robin). A worker found dead is replaced, and the execution
        goes to its replacement."""
        index = next(self._next) % len(self.workers)
        worker = self.workers[index]
        if worker.process.alive():
            try:
                return worker.send(message, fds)
            except OSError:  # it died between the check and the send
                worker.process.kill()
                worker.process.wait(5)
        worker.control.close()
        worker.process.close()
        self.restarts += 1
        print(f"kit sandbox: worker {index} (pid {worker.process.pid}) had exited; restarting it", flush=True)
        self.workers[index] = self._start_one()
        self.workers[index].send(message, fds)

    def close(self) -> None:
        for worker in self.workers:
            worker.control.close()  # the worker exits on end of file
        for worker in self.workers:
            if not worker.process.wait(5):
                worker.process.kill()
            worker.process.close()
        if self._zygote_control is not None:
            self._zygote_control.close()  # the zygote exits on end of file
        if self._zygote is not None:
            try:
                self._zygote.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._zygote.kill()
                self._zygote.wait()
        for cgroup in self.cgroups:
            cgroup.remove()


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
