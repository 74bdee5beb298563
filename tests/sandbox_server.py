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


def sandbox_pids() -> set[int]:
    """Processes running as the sandbox's uid (nobody): the workers, sessions and any live execution."""
    pids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:
            continue
        uid_line = next(line for line in status.splitlines() if line.startswith("Uid:"))
        if int(uid_line.split()[1]) == NOBODY:
            pids.add(int(entry))
    return pids


def wait_for_census(expected: set[int], timeout: float = 10.0) -> set[int]:
    """The sandbox processes beyond `expected` that are still there after `timeout` (empty when all ended)."""
    deadline = time.monotonic() + timeout
    while True:
        extra = sandbox_pids() - expected
        if not extra or time.monotonic() > deadline:
            return extra
        time.sleep(0.1)
