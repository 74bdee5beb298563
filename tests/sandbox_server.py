"""Test helper: the real sandbox server (`python -m pipeline_kit.sandbox.server`) on a free port, a synchronous
way to call it, and a census of the processes the sandbox runs as (to prove nothing outlives an execution)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent
NOBODY = 65534


class SandboxClient:
    """Calls a sandbox server at `url` (this host's, or one on a Slurm node)."""

    def __init__(self, url: str):
        self.url = url

    def call(self, method: str, path: str, body=None, headers=None, timeout: float = 120) -> tuple[int, dict]:
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers or {})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as e:
            text = e.read()
            try:
                return e.code, json.loads(text)
            except ValueError:
                return e.code, {"raw": text.decode(errors="replace")}

    def run(self, code: str, session: str | None = None, **fields) -> dict:
        headers = {"X-Session-ID": session} if session else {}
        status, body = self.call("POST", "/execute", {"code": code, **fields}, headers)
        assert status == 200, body
        return body

    def healthy(self) -> bool:
        return self.call("GET", "/health")[1]["status"] == "ok"


class SandboxServer(SandboxClient):
    """The server on this host, on a free port. `startup_log`: what it printed before it served (the isolation
    layers it had to drop, if any)."""

    def __init__(self, *args: str, port: int | None = None, python: str = sys.executable, env: dict | None = None):
        self.port = port or free_port()
        super().__init__(f"http://127.0.0.1:{self.port}")
        self.proc = subprocess.Popen(
            [python, "-m", "pipeline_kit.sandbox.server", "--port", str(self.port), *args],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.startup_log = []
        for line in self.proc.stdout:
            if "serving on" in line:
                break
            self.startup_log.append(line)
        else:
            raise AssertionError("the sandbox server did not start:\n" + "".join(self.startup_log))

    def healthy(self) -> bool:
        return self.proc.poll() is None and super().healthy()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def _processes() -> dict[int, tuple[int, int, str, str]]:
    """Every process: pid -> (uid, parent pid, command line, cgroups)."""
    out = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            cgroups = Path(f"/proc/{entry}/cgroup").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        out[int(entry)] = (int(fields["Uid"].split()[0]), int(fields["PPid"].split()[0]), cmdline, cgroups)
    return out


def children(pid: int) -> set[int]:
    """The processes whose parent is `pid`."""
    return {child for child, (_, parent, _, _) in _processes().items() if parent == pid}


def sandbox_pids(mine: int | None = None) -> set[int]:
    """Processes running as the sandbox's uid (nobody): the workers, sessions and any live execution. Those that
    provably belong to another sandbox server on this host (other tests', on other xdist workers) are left out:
    the descendants of a server process other than `mine` (the pid of this test's server), and what runs in that
    server's cgroups (`kit-sandbox-<pid>-pidns<inode>`, which an execution's processes keep after they leave its
    tree)."""
    procs = _processes()
    servers = {pid for pid, (_, _, cmd, _) in procs.items() if "pipeline_kit.sandbox.server" in cmd and pid != mine}

    def others(pid: int) -> bool:
        if any(f"/kit-sandbox-{s}-pidns" in procs[pid][3] for s in servers):
            return True
        for _ in range(64):  # up the tree
            pid = procs[pid][1] if pid in procs else 0
            if pid in servers:
                return True
            if pid <= 1:
                return False
        return False

    return {pid for pid, (uid, _, _, _) in procs.items() if uid == NOBODY and not others(pid)}


def wait_for_census(expected: set[int], mine: int | None = None, timeout: float = 10.0) -> set[int]:
    """The sandbox processes beyond `expected` that are still there after `timeout` (empty when all ended); `mine`:
    see sandbox_pids."""
    deadline = time.monotonic() + timeout
    while True:
        extra = sandbox_pids(mine) - expected
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.1)
