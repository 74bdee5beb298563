"""The generation client for the tests, with LiteLLM imported once: `python -m pipeline_kit.inference.generate`
spends ~3 s of CPU on `import litellm` before its first request, and a full run starts it ~250 times in jobs (a
quarter of the suite's CPU, perf/suite_cpu.py). One server per pytest worker imports LiteLLM and forks a client per
run; $KIT_CLIENT_PYTHON names a shim that hands the run to it, so a job's command line stays what users run.

- The shim (`write_shim`), as `SHIM -m pipeline_kit.inference.generate ARGS`, connects to the server's socket and
  sends its argv, working directory, environment, and its stdin, stdout and stderr (SCM_RIGHTS). Anything else it is
  asked (`-c ...` by the job's Python check, another module) is exec'd by the real Python.
- The server forks a handler per run, and the handler forks the client: a session of its own, the shim's fds,
  working directory, environment, umask and resource limits, and sys.path as `python -m` builds it (the working directory, $PYTHONPATH, then
  the venv's). Where that path finds another pipeline_kit than the server imported (a job runs its packaged copy of
  the code), the client imports it afresh from there.
- Signals the shim receives (TERM, INT, HUP, USR1, USR2; those it started with ignored stay ignored in the client
  too) go on to the client's process group; when the shim dies
  (a job's KILL after its grace, scancel), the handler kills that group. The shim exits with the client's exit code,
  or dies of the client's signal.
"""

from __future__ import annotations

import json
import os
import resource
import runpy
import select
import signal
import socket
import struct
import sys

MODULE = "pipeline_kit.inference.generate"
FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2)
HEADER = struct.Struct("!I")  # the request's length, sent with the fds

SHIM = """#!{python} -S
# KIT_CLIENT_PYTHON for the tests (tests/client_forkserver.py): the generation client runs in a pre-imported fork
import json, os, resource, signal, socket, struct, sys

argv = sys.argv[1:]
if argv[:2] != ["-m", {module!r}]:
    os.execv({python!r}, [{python!r}, *argv])
conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    conn.connect({socket_path!r})
except OSError:  # no server (it was stopped): the real Python, slower
    os.execv({python!r}, [{python!r}, *argv])
ignored = [n for n in {forwarded!r} if signal.getsignal(n) == signal.SIG_IGN]  # bash starts `cmd &` with INT ignored
umask = os.umask(0)
os.umask(umask)
limits = {{n: resource.getrlimit(getattr(resource, n)) for n in dir(resource) if n.startswith("RLIMIT_")}}
body = json.dumps({{"argv": argv, "cwd": os.getcwd(), "env": dict(os.environ), "umask": umask, "limits": limits,
                   "ignored": ignored}})
body = body.encode()
socket.send_fds(conn, [struct.pack("!I", len(body))], [0, 1, 2])
conn.sendall(body)
for number in set({forwarded!r}) - set(ignored):
    signal.signal(number, lambda number, frame: conn.sendall(b"%d\\n" % number))
reply = b""
while not reply.endswith(b"\\n"):
    chunk = conn.recv(256)
    if not chunk:
        sys.exit("client_forkserver: the client's handler ended without its exit status")
    reply += chunk
status = json.loads(reply)
if status < 0:  # killed by a signal: so is the shim, as the caller would see the real client
    signal.signal(-status, signal.SIG_DFL)
    os.kill(os.getpid(), -status)
sys.exit(status if status >= 0 else 128 - status)
"""


def write_shim(path: str, socket_path: str) -> None:
    with open(path, "w") as f:
        f.write(
            SHIM.format(
                python=sys.executable,
                module=MODULE,
                socket_path=socket_path,
                forwarded=tuple(int(s) for s in FORWARDED),
            )
        )
    os.chmod(path, 0o755)


def receive(conn: socket.socket) -> tuple[dict, list[int]]:
    head, fds, _, _ = socket.recv_fds(conn, HEADER.size, 3)
    (size,) = HEADER.unpack(head)
    body = b""
    while len(body) < size:
        chunk = conn.recv(size - len(body))
        if not chunk:
            raise EOFError("the shim went away mid-request")
        body += chunk
    return json.loads(body), fds


def import_afresh_if_elsewhere(package: str) -> None:
    """Keep the server's import of `package` where this sys.path finds the same files (a test's own run), else drop
    it, so that the client imports the copy this sys.path finds (a job's packaged code)."""
    import importlib.util

    kept = {name: sys.modules.pop(name) for name in list(sys.modules) if name.split(".")[0] == package}
    spec = importlib.util.find_spec(package)
    if spec is not None and kept and spec.origin == kept[package].__file__:
        sys.modules.update(kept)


def run_client(request: dict, fds: list[int], base_path: list[str]) -> None:
    """In the forked client: become `python -m pipeline_kit.inference.generate ARGS` and never return."""
    code = 1
    try:
        os.setsid()
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for fd in fds:
            if fd > 2:
                os.close(fd)
        for number in (*FORWARDED, signal.SIGCHLD):  # as Python starts, with what the shim's caller ignored
            signal.signal(number, signal.SIG_IGN if number in request["ignored"] else signal.SIG_DFL)
        if signal.SIGINT not in request["ignored"]:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        os.umask(request["umask"])
        for name, limit in request["limits"].items():
            resource.setrlimit(getattr(resource, name), tuple(limit))
        os.chdir(request["cwd"])
        env = request["env"]
        os.environ.clear()
        os.environ.update(env)
        # what the client's own import of LiteLLM sets (pipeline_kit.inference.client), here before the fork
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
        extra = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        sys.path[:] = [request["cwd"], *extra, *base_path]
        import_afresh_if_elsewhere("pipeline_kit")
        sys.argv = ["-m", *request["argv"][2:]]
        try:
            runpy.run_module(MODULE, run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if not isinstance(e.code, (int, type(None))):
                print(e.code, file=sys.stderr)
        except KeyboardInterrupt:
            code = -signal.SIGINT
        except BaseException:
            import traceback

            traceback.print_exc()
        finally:
            import threading

            threading._shutdown()  # what the interpreter does at exit: wait for non-daemon threads
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            if code < 0:  # as Python does after an uncaught KeyboardInterrupt: die of the signal
                signal.signal(-code, signal.SIG_DFL)
                os.kill(os.getpid(), -code)
            os._exit(code & 0xFF)


def handle(conn: socket.socket, base_path: list[str]) -> None:
    """In the forked handler: start the client, pass the shim's signals on, answer its exit status; never return."""
    try:
        request, fds = receive(conn)
        pid = os.fork()
        if pid == 0:
            conn.close()
            run_client(request, fds, base_path)
        for fd in fds:
            os.close(fd)
        ended = os.pidfd_open(pid)
        pending = b""
        while True:
            readable, _, _ = select.select([conn, ended], [], [])
            if ended in readable:
                _, status = os.waitpid(pid, 0)
                conn.sendall(b"%d\n" % os.waitstatus_to_exitcode(status))
                break
            chunk = conn.recv(256)
            if not chunk:  # the shim died (SIGKILL): so does the client, as with the real one
                os.killpg(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                break
            pending += chunk
            *numbers, pending = pending.split(b"\n")
            for number in numbers:
                try:
                    os.killpg(pid, int(number))
                except ProcessLookupError:
                    pass
    finally:
        os._exit(0)


def serve(listen_fd: int) -> None:
    """The server: imports LiteLLM as the client does, then forks a handler per connection on `listen_fd`."""
    import ctypes

    ctypes.CDLL(None).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG: end with the pytest worker that started it
    base_path = sys.path[1:]  # without this file's folder
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import pipeline_kit.inference.generate  # noqa: F401  (the modules it imports from elsewhere stay imported)
    from pipeline_kit.inference.client import import_litellm

    del sys.modules[MODULE]  # the client runs it as __main__, as `-m` does, once
    import_litellm()  # with gc frozen after it, as in a real run
    listener = socket.socket(fileno=listen_fd)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # handlers are reaped by the kernel
    while True:
        conn, _ = listener.accept()
        if os.fork() == 0:
            listener.close()
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            handle(conn, base_path)
        conn.close()


class ClientForkServer:
    """The pytest worker's side: the socket bound here (a shim that connects before the server has imported LiteLLM
    waits in its backlog), the server started on it, the shim written beside it; `python` is the shim's path."""

    def __init__(self, folder: str):
        import subprocess

        self.folder = folder
        socket_path = os.path.join(folder, "client.sock")
        self.python = os.path.join(folder, "python")
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(socket_path)
        listener.listen(64)
        write_shim(self.python, socket_path)
        self.proc = subprocess.Popen(
            [sys.executable, __file__, str(listener.fileno())],
            pass_fds=[listener.fileno()],
            stdin=subprocess.DEVNULL,
        )
        listener.close()

    def stop(self) -> None:
        """Stop the server and remove its folder: a shim started later runs the real Python."""
        import shutil

        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.folder, ignore_errors=True)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
