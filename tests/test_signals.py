"""Signals to a foreground kit command: SIGTERM and SIGHUP act like Ctrl-C (the job is cancelled, its processes
end, its port is freed), and `start_sandbox` prints its address only once the sandbox answers."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import BIN, SERVICES, free_port


def _env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "home"), "PATH": f"{BIN}:{os.environ['PATH']}"}


def processes_with(text: str) -> list[int]:
    """The pids whose command line holds `text` (this test and kit itself excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline and "--command=" not in cmdline:
                found.append(int(entry.name))
    return found


def gone_within(check, seconds: float) -> bool:
    deadline = time.time() + seconds
    while time.time() < deadline:
        if check():
            return True
        time.sleep(0.2)
    return check()


def port_free(port: int) -> bool:
    return subprocess.run(["bash", "-c", f"ss -Hltn 'sport = :{port}' | grep -q ."]).returncode == 1


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=["TERM", "HUP"])
def test_start_sandbox_stops_on_term_and_hup(user_repo, tmp_path, signum):
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "kit"), "start_sandbox", "--cluster=none", f"--sandbox_port={port}"],
        cwd=user_repo,
        env=_env(tmp_path),
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stderr.readline()
        assert f"serves at http://127.0.0.1:{port}" in line, line
        # the address line comes once the sandbox answers: a script may use it at once
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
            assert r.status == 200
        assert processes_with(f"--port {port}")
        proc.send_signal(signum)
        assert proc.wait(timeout=30) in (130, 143)
    finally:
        proc.kill()
    assert gone_within(lambda: port_free(port), 10), "the port is still taken"
    assert gone_within(lambda: not processes_with(f"--port {port}"), 10), processes_with(f"--port {port}")


def test_run_cmd_on_none_stops_its_command_on_sigterm(user_repo, tmp_path, configs):
    d = configs("procs", "executor: none\njob_dir: JOB_DIR\n")
    marker = f"sleep 300.{os.getpid()}{time.time_ns() % 10**6}"  # bash execs a lone command: match its own line
    proc = subprocess.Popen(
        [str(BIN / "kit"), "run_cmd", "--cluster=procs", f"--config_dir={d}", f"--command={marker}"],
        cwd=user_repo,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert gone_within(lambda: bool(processes_with(marker)), 30), "the command never started"
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=30)
    finally:
        proc.kill()
    assert rc != 0
    assert gone_within(lambda: not processes_with(marker), 10), "the command is still running"
    status = subprocess.run(
        [str(BIN / "kit"), "status", "--cluster=procs", f"--config_dir={d}", "run_cmd"],
        cwd=user_repo, env=_env(tmp_path), capture_output=True, text=True,
    )  # fmt: skip
    assert status.stdout.strip() == "run_cmd CANCELLED", status.stdout + status.stderr
