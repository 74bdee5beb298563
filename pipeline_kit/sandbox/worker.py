"""A sandbox worker: a fork server that lives in its own namespaces and forks one isolated execution per request.

    python -I worker.py CONFIG_JSON  (the workers' zygote, started by the server with one end of a SOCK_SEQPACKET
                                      pair; it forks a worker for each socket the server sends it; stdlib only)

Each request is JSON plus file descriptors. The worker takes one of its reusable cgroups for it (`cgroups.Slots`)
and forks; the fork (the execution's supervisor) enters new user/PID/mount namespaces, reports its pid on the status
pipe, forks PID 1 of the execution (which joins the cgroup first), enforces the wall timeout, and reports
`{"exit_code", "cpu_limit", "timed_out", "cpu_seconds", "oom_killed"}`. The worker gets the cgroup back once it has
reaped the supervisor. The worker never sees the code or its output."""

from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import os
import select
import signal
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

from pipeline_kit.sandbox import isolation, runner, worker_root  # noqa: E402
from pipeline_kit.sandbox.cgroups import Slot, Slots  # noqa: E402

MAX_FDS = 8
_ended: list[int] = []  # supervisors reaped, whose cgroups the main loop takes back


def _reaped() -> list[int]:
    """The children that have ended, reaped."""
    pids = []
    try:
        while (pid := os.waitpid(-1, os.WNOHANG)[0]) > 0:
            pids.append(pid)
    except ChildProcessError:
        pass
    return pids


def _reap(_signum=None, _frame=None) -> None:
    _ended.extend(_reaped())


def _reap_quietly(_signum=None, _frame=None) -> None:
    _reaped()


def _refuse(fds: list[int], why: str) -> None:
    os.write(fds[-1], (json.dumps({"error": f"sandbox worker: {why}"}) + "\n").encode())
    for fd in fds:
        os.close(fd)


class PreloadError(Exception):
    """A --preload module that would not import, or that started threads (the namespaces need one thread)."""


def preload(names: list[str], strict: bool) -> list[str]:
    """Import `names` here, before the namespaces, so that every execution (a fork) finds them imported: `import
    sympy` costs an execution ~250 ms otherwise. Then freeze the garbage collector's objects so far, so that no
    collection in an execution walks (and so copies) them. Not `strict` (the default list): a module this
    interpreter cannot find is left out. Returns the names imported."""
    done = []
    for name in names:
        if not strict and importlib.util.find_spec(name) is None:
            continue
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - any failure of the module's import is the user's to see
            raise PreloadError(f"--preload {name}: {type(e).__name__}: {e}") from None
        done.append(name)
    with open("/proc/self/status") as f:
        threads = int(next(line for line in f if line.startswith("Threads:")).split()[1])
    if threads > 1:
        raise PreloadError(
            f"--preload {','.join(done)} started {threads - 1} thread(s) in the worker, which must have only one to "
            "enter its namespaces; leave the library's thread variable at 1 (no --env OPENBLAS_NUM_THREADS=N), or "
            "leave the library out of --preload"
        )
    if done:
        gc.freeze()
    return done


def serve(
    control: socket.socket,
    layers: isolation.Layers,
    readonly_paths: list[str],
    cgroups: list[str] | None = None,
) -> None:
    isolation.die_with_parent()
    worker_root.enter_worker_namespaces(layers, readonly_paths)
    slots = Slots(cgroups or [])  # opens its cgroup folders, which are not under its root after the next step
    worker_root.leave_host_root(layers)
    ipc_refused = layers.user_ns and isolation.refuse_ipc()  # root of its user namespace may install a filter
    signal.signal(signal.SIGCHLD, _reap)
    control.send(json.dumps({"ready": os.getpid(), "layers": layers.describe()}).encode())
    while True:
        data, fds, _, _ = socket.recv_fds(control, 1 << 16, MAX_FDS)
        if not data:
            return
        while _ended:  # the signal handler appends; pop is safe beside it
            slots.give_back(_ended.pop())
        try:
            request = json.loads(data)
            slot = slots.take(request["limits"]["memory"], request["limits"]["processes"])
        except (OSError, ValueError, KeyError) as e:
            _refuse(fds, f"no cgroup for the execution: {e}")
            continue
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # this process waits for its own child
            control.close()
            code = 70
            try:
                execution_parent(request, fds, layers, slot, ipc_refused)
                code = 0
            except BaseException as e:  # noqa: BLE001 - reported on the status pipe, which then closes
                os.write(fds[-1], (json.dumps({"error": f"sandbox worker: {e}"}) + "\n").encode())
            finally:
                os._exit(code)
        slots.lend(pid, slot)
        for fd in fds:
            os.close(fd)


def execution_parent(
    request: dict, fds: list[int], layers: isolation.Layers, slot: Slot | None = None, ipc_refused: bool = False
) -> None:
    """The execution's supervisor, outside its PID namespace: forks PID 1, waits, kills at the deadline, reports."""
    isolation.die_with_parent()  # a worker that dies takes its executions and sessions with it
    status = fds[-1]
    child_fds = fds[:-1]
    os.write(status, b"pid %d\n" % os.getpid())
    limits = request["limits"]
    oom_kills = slot.oom_kills() if slot is not None else 0
    isolation.enter_execution_namespaces(layers, ipc_refused)
    pid = os.fork()
    if pid == 0:
        os.close(status)
        exit_code = 71
        try:
            exit_code = execution_child(request, child_fds, layers, limits, slot)
        except BaseException as e:  # noqa: BLE001 - set-up failures go to the execution's stderr
            os.write(2, f"sandbox: set-up failed: {e}\n".encode(errors="replace"))
        finally:
            os._exit(exit_code)
    for fd in child_fds:
        os.close(fd)
    timeout = request.get("timeout")
    timed_out = not _wait(pid, timeout)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, wait_status, usage = os.wait4(pid, 0)
    exit_code = os.waitstatus_to_exitcode(wait_status)
    cpu = usage.ru_utime + usage.ru_stime
    # RLIMIT_CPU with soft = hard ends in SIGKILL (the hard limit wins), not SIGXCPU: tell it from other kills
    cpu_limit = exit_code in (-signal.SIGKILL, -signal.SIGXCPU) and cpu >= 0.95 * request["cpu_seconds"]
    report = {
        "exit_code": exit_code,
        "cpu_limit": cpu_limit,
        "timed_out": timed_out,
        "cpu_seconds": round(cpu, 4),
        "oom_killed": slot is not None and slot.oom_kills() > oom_kills,
    }
    os.write(status, (json.dumps(report) + "\n").encode())
    # end of file now: at exit it would come only after the namespaces are torn down (the mount namespace's
    # last process waits for an RCU grace period there), which nobody reading the report needs to wait for
    os.close(status)


def _wait(pid: int, timeout: float | None) -> bool:
    """Whether `pid` ended before `timeout` seconds (None: wait for ever)."""
    pidfd = os.pidfd_open(pid)
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if poller.poll(None if left is None else left * 1000):
                return True
            if left is not None and left <= 0:
                return False
    finally:
        os.close(pidfd)


def execution_child(
    request: dict, fds: list[int], layers: isolation.Layers, limits: dict, slot: Slot | None = None
) -> int:
    """PID 1 of the execution: its root, its limits, no privileges, then the code."""
    isolation.die_with_parent()
    if request["kind"] == "run":
        code_fd, *std = fds
        for target, fd in enumerate(std):
            os.dup2(fd, target)
            os.close(fd)
        keep = code_fd
    else:
        channel_fd = fds[0]
        null = isolation.open_null()
        for target in range(3):
            os.dup2(null, target)
        os.close(null)
        keep = channel_fd
    if slot is not None:
        slot.join()  # before it starts anything, which then starts in the cgroup too; its fds close next
    os.closerange(3, keep)
    os.closerange(keep + 1, 1 << 20)  # close_range(2): whatever else the worker held
    isolation.enter_execution_root(layers, limits["tmp_size"])
    if layers.rlimits:
        isolation.set_limits(
            limits["memory"], request["cpu_seconds"], limits["processes"], limits["file_size"], limits["open_files"]
        )
    if layers.user_ns or os.getuid() == 0:
        isolation.drop_privileges()
    if layers.landlock_scope:
        isolation.enter_landlock_scope()
    os.setsid()
    if request["kind"] == "run":
        with os.fdopen(code_fd, "rb") as f:
            code = f.read().decode(errors="replace")
        return runner.run_once(code, request["language"])
    runner.session_loop(socket.socket(fileno=channel_fd), request["cpu_seconds"])
    return 0


def zygote(control: socket.socket, config: dict) -> None:
    """The workers' parent. It imports --preload once (as the server's user, on the host's root: the workers'
    namespaces may no longer reach the Python install), then forks a worker for each control socket the server
    sends it and answers its pid. The workers share the preloaded modules' memory (each held 48 MB of its own
    when it imported them itself). It ends when the server closes `control`, and with the server. A worker is
    bound to the server by its own control socket, not to the zygote: a zygote that dies leaves its workers
    serving, and the server starts a new one when it next needs a worker."""
    isolation.die_with_parent()
    try:
        preloaded = preload(config["preload"], config["preload_strict"])
    except PreloadError as e:
        control.send(json.dumps({"error": str(e), "preload": True}).encode())
        sys.exit(1)
    signal.signal(signal.SIGCHLD, _reap_quietly)  # its workers; the server watches them through pidfds
    control.send(json.dumps({"ready": os.getpid(), "preloaded": preloaded}).encode())
    layers = isolation.Layers(**config["layers"])
    while True:
        data, fds, _, _ = socket.recv_fds(control, 1 << 16, 1)
        if not data:
            return
        pid = os.fork()
        if pid == 0:
            # not the zygote's reaper: it would take the exit status of the helper that writes the worker's uid map
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            control.close()
            _worker(socket.socket(fileno=fds[0]), layers, config)
        os.close(fds[0])
        control.send(json.dumps({"worker": pid}).encode())


def _worker(control: socket.socket, layers: isolation.Layers, config: dict) -> None:
    """A forked worker's life: it never returns into the zygote's loop."""
    code = 1
    try:
        serve(control, layers, config["readonly_paths"], config["cgroups"])
        code = 0
    except (isolation.IsolationError, OSError) as e:
        control.send(json.dumps({"error": str(e)}).encode())
    except BaseException as e:  # noqa: BLE001 - a bug: its traceback on the server's stderr, as without the fork
        sys.excepthook(type(e), e, e.__traceback__)
    finally:
        os._exit(code)


def main() -> None:
    config = json.loads(sys.argv[1])
    zygote(socket.socket(fileno=config["control_fd"]), config)


if __name__ == "__main__":
    main()
