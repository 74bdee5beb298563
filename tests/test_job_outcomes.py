"""A job's outcome is its commands' outcome, under load too: a failing command is never recorded as a success, and
its report carries the command's own cause line (the job script's kit_wait and its log writer)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_kit.pipeline.render import PRELUDE

REPO_ROOT = Path(__file__).resolve().parents[1]

# The job script's functions around two commands. `wait -n` is made to answer "no such job" without a pid on its
# first call (as bash 5.2 does now and then under load, for a child that has already ended): kit_wait must take
# the ended command's status another way instead of ending with success.
HARNESS = r"""
{prelude}
kit_lost=0
wait() {{
  if [ "$1" = -n ] && [ "$kit_lost" = 0 ]; then kit_lost=1; sleep 0.5; echo "wait: no such job" >&2; return 127; fi
  builtin wait "$@"
}}
export KIT_LOG_DIR="$1" KIT_JOB=j; mkdir -p "$1"
kit_start work 0 "echo 'RuntimeError: boom'; exit $2"
kit_start other 0 "sleep 0.2"
kit_wait; echo "rc=$?"
"""


@pytest.mark.parametrize("code", [3, 0])
def test_a_child_that_wait_n_loses_keeps_its_exit_code(tmp_path, code):
    script = tmp_path / "harness.sh"
    script.write_text(HARNESS.format(prelude=PRELUDE))
    proc = subprocess.run(["bash", str(script), str(tmp_path / "logs"), str(code)], capture_output=True, text=True)
    assert proc.stdout.strip().endswith(f"rc={code}"), proc.stdout + proc.stderr
    if code:
        note = (tmp_path / "logs" / "j" / "kit.log").read_text()
        assert "command 'work' failed with exit code 3" in note and "work.log: RuntimeError: boom" in note, note
    else:
        assert not (tmp_path / "logs" / "j" / "kit.log").exists(), proc.stderr


def test_the_cause_line_is_in_the_report_when_the_command_ends_before_its_log_is_written(tmp_path):
    """The log's writer is slowed (a tee that waits before writing): kit_wait reads the cause only once it is done."""
    slow_tee = tmp_path / "bin" / "tee"
    slow_tee.parent.mkdir()
    slow_tee.write_text('#!/bin/bash\nsleep 1\nexec /usr/bin/tee "$@"\n')
    slow_tee.chmod(0o755)
    script = tmp_path / "harness.sh"
    script.write_text(
        PRELUDE
        + '\nexport KIT_LOG_DIR="$1" KIT_JOB=j; mkdir -p "$1"\nkit_start work 0 "echo \'KeyError: late\'; exit 4"\nkit_wait; echo "rc=$?"\n'
    )
    env = {**os.environ, "PATH": f"{slow_tee.parent}:{os.environ['PATH']}"}
    proc = subprocess.run(["bash", str(script), str(tmp_path / "logs")], capture_output=True, text=True, env=env)
    assert proc.stdout.strip().endswith("rc=4"), proc.stdout + proc.stderr
    assert "work.log: KeyError: late" in (tmp_path / "logs" / "j" / "kit.log").read_text()


def test_twenty_failing_and_succeeding_commands_under_four_cpu_hogs_end_as_they_did():
    """The suite's version of perf/stress_job_outcomes.py (200 runs there): every failing command FAILED with its
    cause line, every succeeding one SUCCEEDED, with 4 busy loops on the cores."""
    proc = subprocess.run(
        [sys.executable, str(REPO_ROOT / "perf" / "stress_job_outcomes.py"), "--runs=20", "--hogs=4"],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": f"{REPO_ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    assert "20 right, 0 wrong" in proc.stdout, proc.stdout
