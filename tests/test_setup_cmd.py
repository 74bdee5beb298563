"""`kit setup`: a cluster config written from flags or from answers at a terminal, validated before it is written."""

from __future__ import annotations

import os
import pty
import subprocess
import time

import yaml
from conftest import BIN


def test_setup_from_flags_writes_a_config_that_runs(kit, tmp_path):
    d = tmp_path / "cc"
    job_dir = tmp_path / "jobs"
    res = kit(
        "setup",
        "--cluster=laptop",
        f"--config_dir={d}",
        "--executor=none",
        f"--job_dir={job_dir}",
        "--env_var=KIT_SETUP_VAR=from-setup",
    )
    assert res.returncode == 0, res.stderr
    assert yaml.safe_load((d / "laptop.yaml").read_text()) == {
        "executor": "none",
        "job_dir": str(job_dir),
        "env_vars": ["KIT_SETUP_VAR=from-setup"],
    }
    res = kit("run_cmd", "--cluster=laptop", f"--config_dir={d}", "--command=echo var=$KIT_SETUP_VAR")
    assert res.returncode == 0, res.stderr
    assert "var=from-setup" in res.stdout

    again = kit("setup", "--cluster=laptop", f"--config_dir={d}", "--executor=none", f"--job_dir={job_dir}")
    assert again.returncode == 2 and "--force" in again.stderr  # never overwrites silently


def test_setup_rejects_bad_values_and_writes_nothing(kit, tmp_path):
    d = tmp_path / "cc"
    cases = [
        (["--executor=slurmm", f"--job_dir={tmp_path}"], "Did you mean 'slurm'"),
        (["--executor=none", "--job_dir=relative/jobs"], "job_dir"),
        (["--executor=none", f"--job_dir={tmp_path}", "--container=noequals"], "--container"),
        (["--executor=none", f"--job_dir={tmp_path}", "--mount=/no/such/src:/dst"], "/no/such/src"),
    ]
    for args, needle in cases:
        res = kit("setup", "--cluster=bad", f"--config_dir={d}", *args)
        assert res.returncode == 2, (args, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1 and needle in res.stderr, res.stderr
        assert not (d / "bad.yaml").exists()


def test_setup_asks_at_a_terminal(tmp_path):
    d = tmp_path / "cc"
    job_dir = tmp_path / "jobs"
    primary, replica = pty.openpty()
    env = {**os.environ, "KIT_HOME": str(tmp_path / "kh")}
    proc = subprocess.Popen(
        [str(BIN / "kit"), "setup", f"--config_dir={d}"],
        stdin=replica,
        stdout=replica,
        stderr=replica,
        env=env,
        cwd=tmp_path,
    )
    os.close(replica)
    transcript = b""
    answers = [(b"Config name", b"cluster9"), (b"Executor", b"slurm"), (b"Job dir", str(job_dir).encode())]
    answers += [(b"Slurm account", b"acct"), (b"Slurm partition", b"gpu")]
    deadline = time.time() + 60
    while answers and time.time() < deadline:
        transcript += os.read(primary, 4096)
        prompt, answer = answers[0]
        if prompt in transcript:
            os.write(primary, answer + b"\n")
            answers.pop(0)
            transcript = b""
    assert proc.wait(timeout=60) == 0
    assert not answers, f"kit setup did not ask for {answers[0][0]!r}"
    assert yaml.safe_load((d / "cluster9.yaml").read_text()) == {
        "executor": "slurm",
        "job_dir": str(job_dir),
        "account": "acct",
        "partition": "gpu",
    }
