"""`kit setup`: a cluster config written from flags or from answers at a terminal, validated before it is written."""

from __future__ import annotations

import os
import pty
import stat
import subprocess
import time
from contextlib import contextmanager

import pytest
import yaml
from conftest import BIN, SERVICES, need


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
        (["--executor=none", f"--job_dir={tmp_path}", "--cpu_partition=cpu"], "--cpu_partition only applies to"),
        (["--executor=slurm", f"--job_dir={tmp_path}", "--default_timeout=4h"], "default_timeout"),
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
    answers += [(b"Slurm account", b"acct"), (b"Slurm partition", b"gpu"), (b"Slurm CPU partition", b"cpu")]
    answers += [(b"Slurm time limit", b"02:00:00"), (b"Slurm job name prefix", b"")]  # empty: left out
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
        "cpu_partition": "cpu",
        "default_timeout": "02:00:00",
    }


def test_setup_writes_the_slurm_keys_from_flags(kit, tmp_path):
    d = tmp_path / "cc"
    flags = ["--account=acct", "--partition=gpu", "--cpu_partition=cpu", "--default_timeout=04:00:00"]
    res = kit(
        "setup",
        "--cluster=s",
        f"--config_dir={d}",
        "--executor=slurm",
        f"--job_dir={tmp_path}",
        *flags,
        "--job_name_prefix=team_",
    )
    assert res.returncode == 0, res.stderr
    assert yaml.safe_load((d / "s.yaml").read_text()) == {
        "executor": "slurm",
        "job_dir": str(tmp_path),
        "account": "acct",
        "partition": "gpu",
        "cpu_partition": "cpu",
        "default_timeout": "04:00:00",
        "job_name_prefix": "team_",
    }


@contextmanager
def umask(mask: int):
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("mask, want", [(0o022, 0o644), (0o077, 0o600)], ids=["umask022", "umask077"])
def test_setup_config_has_the_umask_mode_unless_it_holds_env_values(kit, tmp_path, mask, want):
    d = tmp_path / "cc"
    base = [f"--config_dir={d}", "--executor=none", f"--job_dir={tmp_path}"]
    with umask(mask):
        shared = kit("setup", "--cluster=shared", *base, "--env_var=PATH")  # the value is read at submission
        secret = kit("setup", "--cluster=secret", *base, "--env_var=TOKEN=abc123")
    assert shared.returncode == 0 and secret.returncode == 0, shared.stderr + secret.stderr
    assert mode(d / "shared.yaml") == want
    assert mode(d / "secret.yaml") == 0o600  # a value in env_vars may be a token: owner only, whatever the umask
    assert "readable only by you" in secret.stdout


def slurm_setup(kit, tmp_path, name, *flags, env=None):
    d = tmp_path / "cc"
    return kit(
        "setup", f"--cluster={name}", f"--config_dir={d}", "--executor=slurm", f"--job_dir={tmp_path}", *flags, env=env
    )


@pytest.mark.slurm
def test_setup_warns_about_partitions_and_accounts_slurm_does_not_list(kit, tmp_path):
    need("SLURM_CONF", "the local Slurm cluster")
    bad = slurm_setup(kit, tmp_path, "bad", "--partition=gpu", "--cpu_partition=cpu", "--account=nosuchacct")
    assert bad.returncode == 0, bad.stderr  # a warning, not an error: the file is written
    warnings = bad.stderr.splitlines()
    assert len(warnings) == 2 and all(w.startswith("kit: warning: ") for w in warnings), bad.stderr
    assert "partition 'gpu' is not a partition of this cluster (sinfo lists: debug, cpu)" in warnings[0]
    assert "account 'nosuchacct' is not one of your Slurm accounts (sacctmgr lists: root)" in warnings[1]
    assert (tmp_path / "cc" / "bad.yaml").exists()

    good = slurm_setup(kit, tmp_path, "good", "--partition=debug", "--cpu_partition=cpu", "--account=root")
    assert good.returncode == 0 and good.stderr == "", good.stderr


@pytest.mark.slurm
@pytest.mark.ssh
def test_setup_asks_slurm_over_the_ssh_tunnel_it_configures(kit, tmp_path):
    need("KIT_TEST_SSH_KEY", "the loopback sshd")
    broken = tmp_path / "empty-slurm.conf"  # sinfo here fails at once: only the login node's sinfo can answer
    broken.write_text("")
    env = {"SLURM_CONF": str(broken)}
    here = slurm_setup(kit, tmp_path, "here", "--partition=gpu", env=env)
    assert here.returncode == 0 and here.stderr == "", here.stderr  # Slurm cannot be asked: nothing is said
    tunnel = ["--ssh_host=127.0.0.1", "--ssh_user=root", f"--ssh_port={SERVICES['KIT_TEST_SSH_PORT']}"]
    tunnel += [f"--ssh_identity={SERVICES['KIT_TEST_SSH_KEY']}", f"--ssh_job_dir={tmp_path / 'remote'}"]
    remote = slurm_setup(kit, tmp_path, "remote", "--partition=gpu", *tunnel, env=env)
    assert remote.returncode == 0, remote.stderr
    assert "partition 'gpu' is not a partition of this cluster (sinfo lists: debug, cpu)" in remote.stderr


def test_setup_writes_to_the_users_config_folder_found_from_anywhere(kit, tmp_path, user_repo):
    """Run from the project's repository, setup writes to $KIT_HOME/cluster_configs (~/.kit/cluster_configs), not
    into the repository where an untracked config would sit beside the code; lookup finds it from anywhere."""
    res = kit("setup", "--cluster=laptop", "--executor=none", f"--job_dir={tmp_path / 'jobs'}")
    assert res.returncode == 0, res.stderr
    written = tmp_path / "home" / ".kit" / "cluster_configs" / "laptop.yaml"  # the kit fixture's KIT_HOME
    assert written.is_file() and not (user_repo / "cluster_configs").exists()
    assert res.stdout == f"wrote {written}; use it with --cluster=laptop\n"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    for cwd in (user_repo, elsewhere):
        ran = kit("run_cmd", "--cluster=laptop", "--command=echo ran", cwd=cwd)
        assert ran.returncode == 0 and "ran" in ran.stdout, ran.stderr
        assert "left out" not in ran.stderr, ran.stderr  # nothing new in the repository

    # $KIT_CONFIG_DIR, when set, is the user's config folder: setup writes there and lookup looks there
    mine = tmp_path / "mine"
    env = {"KIT_CONFIG_DIR": str(mine)}
    res = kit("setup", "--cluster=box", "--executor=none", f"--job_dir={tmp_path / 'jobs'}", env=env)
    assert res.returncode == 0 and res.stdout == f"wrote {mine / 'box.yaml'}; use it with --cluster=box\n"
    assert kit("run_cmd", "--cluster=box", "--command=true", "--dry_run", cwd=elsewhere, env=env).returncode == 0
    assert kit("run_cmd", "--cluster=box", "--command=true", "--dry_run", cwd=elsewhere).returncode == 2


def test_a_config_written_into_the_repository_does_not_block_it(kit, tmp_path, user_repo):
    """--config_dir=cluster_configs puts it in the repository, untracked: kit reads it where it runs, never in a job,
    so it is left out of the packed code with a note, and runs go on."""
    res = kit("setup", "--cluster=laptop", "--config_dir=cluster_configs", "--executor=none", f"--job_dir={tmp_path}")
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"wrote {user_repo / 'cluster_configs' / 'laptop.yaml'}; use it with --cluster=laptop " + (
        f"--config_dir={user_repo / 'cluster_configs'}\n"
    )
    ran = kit("run_cmd", "--cluster=laptop", "--command=echo ran")
    assert ran.returncode == 0 and "ran" in ran.stdout, ran.stderr
    assert "kit: left out of the packed code (untracked, not code): cluster_configs/laptop.yaml\n" in ran.stderr
