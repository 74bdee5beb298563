"""A job's outcome is its commands' outcome, under load too: a failing command is never recorded as a success, and
its report carries the command's own cause line (the job script's kit_wait and its log writer)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import skip_or_fail

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


# bash 5.2's `wait -n` (jobs.c, wait_for_any_job) scans its job table with SIGCHLD blocked, unblocks it, then blocks in
# waitpid for any child. A command that ends in between is reaped by bash's SIGCHLD handler, and waitpid then waits
# for yet another child: with only a service left, forever (a Slurm array element kept its server up until the test's
# timeout). Another child's end wakes `wait -n` just before, as a command's log writer does (it ends when the command
# closes its output). This shim, preloaded into the job script's bash, stretches that spot by 50 ms after each blocking
# waitpid, so every run meets the race; the command below closes its output 10 ms before it ends.
RACE_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
static int stretch;
pid_t waitpid(pid_t pid, int *status, int options) {
  pid_t (*real)(pid_t, int *, int) = dlsym(RTLD_NEXT, "waitpid");
  pid_t r = real(pid, status, options);
  if (r > 0 && !(options & WNOHANG)) stretch = 2;
  return r;
}
int sigprocmask(int how, const sigset_t *set, sigset_t *old) {
  int (*real)(int, const sigset_t *, sigset_t *) = dlsym(RTLD_NEXT, "sigprocmask");
  sigset_t mine;
  if (!old) old = &mine;
  int r = real(how, set, old);
  if (!r && stretch && set && how == SIG_BLOCK && sigismember(set, SIGCHLD) && !sigismember(old, SIGCHLD)) {
    stretch--;
    usleep(50000);
  }
  return r;
}
"""

RACE_HARNESS = r"""
unset LD_PRELOAD
{prelude}
export KIT_LOG_DIR="$1" KIT_JOB=j; mkdir -p "$1"
kit_start server 1 'echo $$ > "$KIT_LOG_DIR/server.pid"; exec sleep 600'
kit_start client 0 "sleep 0.2; exec >/dev/null 2>&1; sleep 0.01; exit $2"
kit_wait; echo "rc=$?"
"""


@pytest.mark.parametrize("code", [0, 3])
def test_a_command_that_ends_while_wait_n_is_between_children_ends_the_job(tmp_path, code):
    """The server runs until it is stopped; the job must end with the client's exit code (before the fix, kit_wait
    blocked until the subprocess timeout, 6 of 6 runs)."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        skip_or_fail("no C compiler (cc) for the shim that makes bash's race happen")
    (tmp_path / "shim.c").write_text(RACE_SHIM)
    shim = tmp_path / "shim.so"
    subprocess.run([cc, "-shared", "-fPIC", "-o", shim, tmp_path / "shim.c", "-ldl"], check=True)
    script = tmp_path / "harness.sh"
    script.write_text(RACE_HARNESS.format(prelude=PRELUDE))
    logs = tmp_path / "logs"
    env = {**os.environ, "LD_PRELOAD": str(shim)}
    try:
        # a hang detector, not a timing: the run takes ~1.5 s; before the fix it never ended
        proc = subprocess.run(
            ["bash", str(script), str(logs), str(code)], capture_output=True, text=True, env=env, timeout=120
        )
    finally:
        server = logs / "server.pid"
        if server.exists():
            subprocess.run(["kill", server.read_text().strip()], capture_output=True)
    assert proc.stdout.strip().endswith(f"rc={code}"), proc.stdout + proc.stderr
    if code:
        assert "command 'client' failed with exit code 3" in (logs / "j" / "kit.log").read_text()


# bash's `wait PID` blocking for good on a command that has ended (its status lost; seen twice in full runs: the
# script sat in wait_for_single_pid with the command gone and only the ticker left, and a trainer that had saved its
# final model counted as failed). The fake makes every `wait -n` answer nothing and a single-pid `wait` for the
# command block (interruptibly, as bash's does).
LOST_HARNESS = r"""
{prelude}
wait() {{
  if [ "$1" = -n ]; then builtin wait -n "${{@:2}}" >/dev/null 2>&1; p=; return 127; fi
  if [ "$#" = 1 ] && [ "$1" = "$(cat "$KIT_LOG_DIR/work.pid" 2>/dev/null)" ]; then
    sleep 1000 & local s=$!; builtin wait "$s"; local r=$?; kill "$s" 2>/dev/null; return $r
  fi
  builtin wait "$@"
}}
export KIT_LOG_DIR="$1" KIT_JOB=j; mkdir -p "$1"
kit_start work 0 "$2"
echo "${{kit_pids[0]}}" > "$KIT_LOG_DIR/work.pid"
kit_wait; echo "rc=$?"
"""


@pytest.mark.parametrize("code", [0, 3])
def test_a_command_whose_exit_status_bash_lost_ends_the_job_with_the_status_it_wrote(tmp_path, code):
    """The command's own shell wrote its exit status to a file: kit_wait takes it from there (no hang; the 120-s
    timeout only guards against one), so a command that succeeded is a success and one that failed a failure; the
    status files go when the commands are done."""
    script = tmp_path / "harness.sh"
    script.write_text(LOST_HARNESS.format(prelude=PRELUDE))
    logs = tmp_path / "logs"
    proc = subprocess.run(["bash", str(script), str(logs), f"exit {code}"], capture_output=True, text=True, timeout=120)
    assert proc.stdout.strip().endswith(f"rc={code}"), proc.stdout + proc.stderr
    assert not list(logs.glob(".*exit-status")), list(logs.iterdir())


def test_a_command_whose_exit_status_bash_lost_and_that_wrote_none_fails_the_job_instead_of_hanging(tmp_path):
    """Killed before its shell could write its status (here it kills that shell): after the ticker has cut the
    `wait PID` short ten times with the command gone, the job ends with a failure and a note, never with success."""
    script = tmp_path / "harness.sh"
    script.write_text(LOST_HARNESS.format(prelude=PRELUDE))
    logs = tmp_path / "logs"
    proc = subprocess.run(
        ["bash", str(script), str(logs), "kill -KILL $PPID"], capture_output=True, text=True, timeout=120
    )
    assert proc.stdout.strip().endswith("rc=1"), proc.stdout + proc.stderr
    note = (logs / "j" / "kit.log").read_text()
    assert "the exit status of 'work' was lost (bash's wait) and it wrote none" in note, note


def test_a_server_port_is_picked_below_the_ephemeral_range(tmp_path):
    """Clients' local ports come from the kernel's ephemeral range. A server port picked there (a bind to port 0, as
    before) could be taken by one of them before the server bound it: a Slurm array element's server failed so,
    "address already in use" on 45867 while its neighbour's client held ports 48170-48200. The job script's
    kit_free_port and the submission side's free_port both pick below that range, a port nothing listens on."""
    from pipeline_kit import ports

    low, _ = ports.ephemeral_range()
    script = tmp_path / "pick.sh"
    script.write_text(PRELUDE + "\nkit_free_port\n")
    env = {**os.environ, "KIT_CODE_DIR": str(REPO_ROOT)}
    picked = [int(subprocess.run(["bash", str(script)], env=env, capture_output=True, text=True, check=True).stdout)]
    picked += [ports.free_port() for _ in range(20)]
    assert all(ports.LOWEST <= port < low for port in picked), (picked, low)
    with socket.socket() as s:  # what a server then does with it
        s.bind(("", picked[0]))
