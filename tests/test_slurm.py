"""Jobs on the real local Slurm cluster (tests/services/slurm_up.sh): GPUs, het jobs with references,
dependency chains, arrays, --run_after across invocations, every state in `kit status`, the SSH tunnel."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest
from conftest import SERVICES, git, need, sacct

pytestmark = pytest.mark.slurm


@pytest.fixture
def slurm(configs):
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n")
    return ["--cluster=slurm", f"--config_dir={d}"]


def status_lines(kit, slurm, expname) -> dict[str, str]:
    res = kit("status", *slurm, expname)
    assert res.returncode == 0, res.stderr
    return dict(line.split(" ", 1) for line in res.stdout.splitlines())


def wait_states(kit, slurm, expname, done=("SUCCEEDED", "FAILED", "CANCELLED"), timeout=90) -> dict[str, str]:
    deadline = time.time() + timeout
    while True:
        states = status_lines(kit, slurm, expname)
        if all(s in done for s in states.values()) or time.time() > deadline:
            return states
        time.sleep(0.5)


def test_gpu_job_sees_requested_gpus(kit, slurm):
    res = kit(
        "run_cmd",
        *slurm,
        "--expname=gpu",
        "--num_gpus=3",
        "--wait",
        "--command=echo CUDA=$CUDA_VISIBLE_DEVICES; cat hello.py",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    logs = kit("logs", *slurm, "gpu").stdout
    assert "CUDA=0,1,2" in logs
    assert "print('hello from the packaged repo')" in logs  # the job ran in the packed code folder


def test_het_job_client_reaches_server_through_reference(kit, slurm, user_repo, tmp_path):
    script = user_repo / "het.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        from pipeline_kit.cluster import load_cluster_config
        from pipeline_kit.launch import run_pipeline
        from pipeline_kit.pipeline import AUTO_PORT, Command, CommandGroup, HardwareConfig, Job, Pipeline

        from probe import probe_command

        if __name__ == "__main__":
            cluster = load_cluster_config("slurm", sys.argv[1])
            server = Command("echo server on $SLURMD_NODENAME; exec python3 -m http.server $KIT_PORT",
                             name="server", port=AUTO_PORT, service=True, num_gpus=2)
            client = Command(lambda refs: "echo client partition=$SLURM_JOB_PARTITION; " + probe_command(refs),
                             name="client", refs={"server": server})
            # each component keeps its own partition (nemo-run alone would give both the first one's)
            job = Job("het", groups=[CommandGroup([server], HardwareConfig(num_gpus=2), name="srv"),
                                     CommandGroup([client], HardwareConfig(partition="cpu"), name="cli")])
            result = run_pipeline(Pipeline("het", cluster, [job]), wait=True)
            print("STATES", result.states)
            sys.exit(0 if result.ok else 1)
    """)
    )
    git(user_repo, "add", ".")
    git(user_repo, "commit", "-q", "-m", "het")
    env = {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "kh")}
    proc = subprocess.run(
        [sys.executable, "het.py", slurm[1].split("=", 1)[1]],
        cwd=user_repo,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    logs = kit("logs", *slurm, "het").stdout
    assert "client got 200 from http://node" in logs, logs  # group 1 used group 0's host, not localhost
    assert "server on node1" in logs
    assert "client partition=cpu" in logs


def test_afterany_chain_runs_dependents_of_a_failure(kit, slurm, tmp_path):
    ran = tmp_path / "ran"
    res = kit(
        "run_cmd", *slurm, "--expname=chain", "--dependent_jobs=2", f"--command=echo x >> {ran}; exit 3", "--wait"
    )
    assert res.returncode == 1
    states = wait_states(kit, slurm, "chain")
    # afterany (the default) runs every copy after the previous one ends, failed or not
    assert states == {"chain": "FAILED", "chain-dep1": "FAILED", "chain-dep2": "FAILED"}, states
    assert ran.read_text() == "x\n" * 3


def test_afterok_chain_cancels_dependents_of_a_failure(kit, configs, tmp_path):
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm_ok", "executor: slurm\njob_dir: JOB_DIR\naccount: root\ndependency_type: afterok\n")
    args = ["--cluster=slurm_ok", f"--config_dir={d}"]
    ran = tmp_path / "ran"
    command = f"--command=echo $SLURM_JOB_ID >> {ran}; exit 3"
    res = kit("run_cmd", *args, "--expname=okfail", "--dependent_jobs=2", command, "--wait", timeout=120)
    assert res.returncode == 1, res.stdout + res.stderr
    ids = dict(re.findall(r"job (\S+) [^(]+\(slurm job (\d+)\)", res.stdout))
    assert "job okfail-dep1 skipped: okfail failed (slurm job" in res.stdout, res.stdout  # dep2's parent: cancelled
    for dep in ("okfail-dep1", "okfail-dep2"):
        dependency = subprocess.run(["scontrol", "show", "job", ids[dep]], capture_output=True, text=True).stdout
        assert "afterok:" in dependency and "DependencyNeverSatisfied" in dependency, dependency
    # afterok: a failed parent cancels its dependents, and they never run
    assert status_lines(kit, args, "okfail") == {
        "okfail": "FAILED",
        "okfail-dep1": "CANCELLED",
        "okfail-dep2": "CANCELLED",
    }
    assert ran.read_text() == f"{ids['okfail']}\n"  # only the parent ran
    logs = kit("logs", *args, "okfail").stdout
    assert "== job okfail-dep1: 0 log(s)" in logs and "== job okfail-dep2: 0 log(s)" in logs, logs


def test_afterok_array_dependent_of_a_failure_is_cancelled_and_wait_ends(kit, configs, tmp_path):
    """A pending array cancelled as a whole is one sacct row, `ID_[0-3] CANCELLED`: --wait ends on it."""
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm_ok", "executor: slurm\njob_dir: JOB_DIR\naccount: root\ndependency_type: afterok\n")
    args = ["--cluster=slurm_ok", f"--config_dir={d}"]
    ran = tmp_path / "ran"
    assert kit("run_cmd", *args, "--expname=parent", "--command=sleep 2; false").returncode == 0
    start = time.monotonic()
    try:
        res = kit(
            "run_cmd",
            *args,
            "--expname=child",
            "--array_size=4",
            "--run_after=parent",
            "--wait",
            f"--command=echo $KIT_UNIT >> {ran}",
            timeout=90,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("kit run_cmd --wait did not return within 90 s of its afterok parent failing")
    took = time.monotonic() - start
    assert res.returncode == 1, res.stdout + res.stderr
    assert "job child CANCELLED" in res.stdout, res.stdout
    assert status_lines(kit, args, "parent") == {"parent": "FAILED"}
    assert status_lines(kit, args, "child") == {"child": "CANCELLED"}
    assert not ran.exists()  # no unit ran
    assert took < 60, took


def test_dependent_jobs_afterok(kit, slurm, configs):
    d = configs("slurm_ok", "executor: slurm\njob_dir: JOB_DIR\naccount: root\ndependency_type: afterok\n")
    args = ["--cluster=slurm_ok", f"--config_dir={d}"]
    res = kit("run_cmd", *args, "--expname=okchain", "--dependent_jobs=2", "--command=exit 3")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("slurm job") == 3
    states = wait_states(kit, args, "okchain")
    assert states == {"okchain": "FAILED", "okchain-dep1": "CANCELLED", "okchain-dep2": "CANCELLED"}, states
    res = kit("run_cmd", *args, "--expname=okchain2", "--dependent_jobs=2", "--command=echo ok", "--wait")
    assert res.returncode == 0
    assert wait_states(kit, args, "okchain2") == {f"okchain2{s}": "SUCCEEDED" for s in ("", "-dep1", "-dep2")}


def test_array_of_8_units_each_runs_once(kit, slurm, tmp_path):
    out = tmp_path / "units"
    out.mkdir()
    res = kit(
        "run_cmd",
        *slurm,
        "--expname=arr",
        "--array_size=8",
        "--wait",
        f"--command=echo $KIT_UNIT >> {out}/$KIT_UNIT.txt; [ $KIT_UNIT != 5 ]",
    )
    assert res.returncode == 1
    assert sorted(int(p.stem) for p in out.iterdir()) == list(range(8))
    assert all(p.read_text() == f"{p.stem}\n" for p in out.iterdir())  # once each, own index
    states = status_lines(kit, slurm, "arr")
    assert states == {"arr": "FAILED", "arr[5]": "FAILED"}, states


def test_run_after_across_invocations_and_every_state(kit, slurm, tmp_path):
    marker = tmp_path / "first_done"
    res = kit("run_cmd", *slurm, "--expname=first", f"--command=sleep 15; touch {marker}")
    assert res.returncode == 0, res.stderr
    first_id = re.search(r"job first SUBMITTED \(slurm job (\d+)\)", res.stdout).group(1)
    res = kit(
        "run_cmd", *slurm, "--expname=second", "--run_after=first", "--dependent_jobs=1", f"--command=test -e {marker}"
    )
    assert res.returncode == 0, res.stderr
    second_id, dep1_id = re.findall(r"\(slurm job (\d+)\)", res.stdout)
    # second-dep1 waits on second (same pipeline) AND on first (other experiment): nemo-run alone drops the latter
    dependency = subprocess.run(["scontrol", "show", "job", dep1_id], capture_output=True, text=True).stdout
    assert f"afterany:{second_id}" in dependency and f"afterany:{first_id}" in dependency, dependency
    assert status_lines(kit, slurm, "second") == {"second": "PENDING", "second-dep1": "PENDING"}
    deadline = time.time() + 30
    while status_lines(kit, slurm, "first")["first"] != "RUNNING" and time.time() < deadline:
        time.sleep(0.2)
    assert status_lines(kit, slurm, "first") == {"first": "RUNNING"}
    # both saw the file, so they ran after
    assert wait_states(kit, slurm, "second") == {"second": "SUCCEEDED", "second-dep1": "SUCCEEDED"}
    res = kit("run_cmd", *slurm, "--expname=long", "--command=sleep 300")
    assert res.returncode == 0
    assert kit("cancel", *slurm, "long").returncode == 0
    assert wait_states(kit, slurm, "long") == {"long": "CANCELLED"}


def test_ssh_tunnel_runs_job_and_fetches_log(kit, configs, tmp_path):
    need("KIT_TEST_SSH_KEY", "the loopback sshd")
    remote = tmp_path / "remote_jobs"
    d = configs(
        "viassh",
        f"""
        executor: slurm
        job_dir: JOB_DIR
        account: root
        ssh_tunnel:
          host: 127.0.0.1
          user: root
          port: {SERVICES["KIT_TEST_SSH_PORT"]}
          identity: {SERVICES["KIT_TEST_SSH_KEY"]}
          job_dir: {remote}
    """,
    )
    args = ["--cluster=viassh", f"--config_dir={d}"]
    res = kit(
        "run_cmd", *args, "--expname=tunnel", "--wait", "--command=echo via ssh on $SLURMD_NODENAME; cat hello.py"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    logs = kit("logs", *args, "tunnel")
    assert "via ssh on node" in logs.stdout and "hello from the packaged repo" in logs.stdout, logs.stdout
    assert str(remote) in logs.stdout  # the logs were read on the cluster side


def test_job_names_without_prefix_or_account_are_the_plain_names(kit, configs):
    """No job_name_prefix and no account: nemo-run alone would name the job `-.plain` and write --account=''."""
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("bare", "executor: slurm\njob_dir: JOB_DIR\npartition: debug\n")
    res = kit("run_cmd", "--cluster=bare", f"--config_dir={d}", "--expname=plain", "--wait", "--command=echo hi")
    assert res.returncode == 0, res.stdout + res.stderr
    slurm_id = re.search(r"slurm job (\d+)", res.stdout)[1]
    # slurmdbd may still hold the job as `allocation` for a moment
    names = [
        (r["JobName"], r["Account"])
        for r in sacct([slurm_id], "JobName,Account", until=lambda rows: rows[0]["JobName"] != "allocation")
    ]
    assert names == [("plain", "root")]  # the user's default account
