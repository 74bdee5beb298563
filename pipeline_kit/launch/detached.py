"""How none's jobs run, without nemo-run: each job's script starts in its own session, reparented away from the
submitting process, which waits for it (`kit` in the foreground) or not (`run_pipeline(wait=False)`); its outcome
is the .rc file it writes ($KIT_RC_FILE), its state while it runs is read from its .pid file, and `cancel` signals
that pid."""

from __future__ import annotations

import os
import shlex
import subprocess
from pathlib import Path

from pipeline_kit.atomic import write_atomic

# the outer bash starts the script in the background and exits at once: the script's parent becomes init (or the
# nearest subreaper), so it outlives the submitting process and never lingers as its zombie
_LAUNCH = 'bash "$0" </dev/null >>"$1" 2>&1 &'


def start(script: str, job: str, log_dir: str, env_vars: dict[str, str]) -> None:
    """Write the job's script to <log_dir>/<job>.script and start it; its own output goes to <log_dir>/<job>.out.
    (Not .sh: a log folder inside the user's repository holds no code file that would block the next run.)"""
    path = script_path(log_dir, job)
    write_atomic(path, script)
    subprocess.run(
        ["bash", "-c", _LAUNCH, str(path), str(Path(log_dir) / f"{job}.out")],
        env={**os.environ, **env_vars},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        start_new_session=True,
        check=True,
    )


def script_path(log_dir: str, job: str) -> Path:
    return Path(log_dir) / f"{job}.script"


def describe(job: str, log_dir: str, env_vars: dict[str, str]) -> str:
    """What `start` runs, for a dry run."""
    env = "".join(f"{k}={shlex.quote(v)} " for k, v in env_vars.items())
    path = script_path(log_dir, job)
    return f"in its own session: {env}bash {path} </dev/null >>{Path(log_dir) / f'{job}.out'} 2>&1\n"


def script_alive(log_dir: str, job: str) -> bool | None:
    """Whether the job's script runs now (its .pid names a live bash); None before it wrote its pid."""
    try:
        pid = int((Path(log_dir) / f"{job}.pid").read_text())
    except (OSError, ValueError):
        return None
    try:
        return b"bash" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
