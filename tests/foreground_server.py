"""`kit start_server` in the foreground as a user runs it, for the tests that share one server between several
`kit generate --server_address` runs (test_generate_vllm.py, test_vllm_tir_magpie.py)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
import urllib.request
from pathlib import Path

from conftest import BIN, SERVICES


class ForegroundServer:
    """`kit start_server ...` as a user runs it: read stderr until the ready line; `interrupt()` is Ctrl-C."""

    def __init__(self, tmp_path: Path, *argv: str, timeout: float = 240):
        env = {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "kh"), "PYTHONFAULTHANDLER": "1"}
        self.proc = subprocess.Popen(
            [str(BIN / "kit"), "start_server", *argv],
            cwd=tmp_path,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
            # as a script's background job starts it: SIGINT ignored; Ctrl-C (kill -INT) must still stop it
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
        self.lines: list[str] = []
        deadline = time.time() + timeout
        while "ready after" not in (line := self.proc.stderr.readline()):
            self.lines.append(line)
            assert line and time.time() < deadline, "".join(self.lines)
        self.url = re.search(r"serves at (http://\S+/v1)", "".join(self.lines))[1]
        with urllib.request.urlopen(self.url + "/models", timeout=10) as r:
            assert r.status == 200

    def interrupt(self, signum: int = signal.SIGINT) -> int:
        self.proc.send_signal(signum)
        try:
            return self.proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            self.proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER: every thread's stack to stderr
            time.sleep(1)
            self.proc.kill()
            os.set_blocking(self.proc.stderr.fileno(), False)  # an orphaned ssh tunnel may still hold the pipe
            rest = self.proc.stderr.read() or ""
            raise AssertionError("kit did not stop on Ctrl-C:\n" + "".join(self.lines) + rest) from None
