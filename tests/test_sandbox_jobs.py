"""The sandbox as a job component: `kit start_sandbox` in the foreground, `run_cmd --with_sandbox` on none and in
Docker, and a TIR generation whose sandbox is its own component of a heterogeneous job on the local Slurm."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import urllib.request

import pytest
from conftest import BIN, SERVICES, client_python, need, problems, rows, sacct
from sandbox_server import REPO_ROOT

# a run_cmd command: call the job's sandbox at $KIT_SANDBOX_ADDRESS and write the answer to a file
CALLER = (
    "import json, os, sys, urllib.request\n"
    "req = urllib.request.Request(os.environ['KIT_SANDBOX_ADDRESS'] + '/execute', "
    "data=json.dumps({'code': 'import socket; print(6 * 7, socket.if_nameindex())'}).encode())\n"
    "open(sys.argv[1], 'w').write(urllib.request.urlopen(req).read().decode())\n"
)


def test_start_sandbox_prints_its_address_and_stops_on_ctrl_c(user_repo, tmp_path):
    env = {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "home"), "PATH": f"{BIN}:{os.environ['PATH']}"}
    proc = subprocess.Popen(
        [str(BIN / "kit"), "start_sandbox", "--cluster=none", "--sandbox_port=0"],
        cwd=user_repo,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    out = proc.stderr.readline()
    proc.kill()
    assert "--sandbox_port=0 is not a TCP port" in out + proc.stderr.read()
    from conftest import free_port

    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "kit"), "start_sandbox", "--cluster=none", f"--sandbox_port={port}"],
        cwd=user_repo,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        # as a script's background job starts it: SIGINT ignored; Ctrl-C (kill -INT) must still stop it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
    )
    try:
        assert f"serves at http://127.0.0.1:{port}" in proc.stderr.readline()
        assert "ready after" in proc.stderr.readline()
        body = json.dumps({"code": "print(sum(range(10)))"}).encode()
        with urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{port}/execute", data=body)) as r:
            assert json.loads(r.read())["stdout"] == "45\n"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 130
    finally:
        proc.kill()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)


@pytest.mark.parametrize("executor", ["none", pytest.param("slurm", marks=pytest.mark.slurm)])
def test_a_sandbox_that_fails_at_start_says_why(kit, configs, tmp_path, executor):
    """A flag only the job's host can check (a folder that is not there): the server refuses it in one line, and
    `kit start_sandbox` shows that line after the job's end (it used to stop at "ended (FAILED)", with no reason)."""
    if executor == "slurm":
        need("SLURM_CONF", "the local Slurm cluster")
        yaml = f"executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\nenv_vars: ['KIT_SANDBOX_PYTHON={sys.executable}']\n"
    else:
        yaml = "executor: none\njob_dir: JOB_DIR\n"
    missing = tmp_path / "not-there"
    res = kit(
        "start_sandbox",
        "--cluster=c",
        f"--config_dir={configs('c', yaml)}",
        f"--sandbox_args=--readonly_path {missing}",
        timeout=180,
    )
    assert res.returncode == 1, res.stderr
    tail = res.stderr.split("ended (FAILED)", 1)[1]
    assert "kit start_sandbox: why job sandbox failed:" in tail, res.stderr
    assert f"kit sandbox: error: --readonly_path {missing}: no such file or folder" in tail, res.stderr


def test_run_cmd_with_sandbox_on_none(kit, configs, tmp_path, user_repo):
    (user_repo / "caller.py").write_text(CALLER)
    subprocess.run(["git", "add", "."], cwd=user_repo, check=True)
    subprocess.run(["git", "commit", "-qm", "caller"], cwd=user_repo, check=True)
    d = configs("local-procs", "executor: none\njob_dir: JOB_DIR\n")
    answer = tmp_path / "answer.json"
    res = kit(
        "run_cmd",
        "--cluster=local-procs",
        f"--config_dir={d}",
        "--with_sandbox",
        f"--command={sys.executable} caller.py {answer}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    got = json.loads(answer.read_text())
    assert got["status"] == "completed" and got["stdout"] == "42 [(1, 'lo')]\n"


def run_caller_in_docker(
    kit, configs, tmp_path, image: str, caller: str, python="python3", mounts=(), env_vars=(), **kw
):
    """run_cmd --with_sandbox in one container (key `box`) with the caller under /data; the sandbox's answer."""
    need("DOCKER_HOST", "the private dockerd")
    data = tmp_path / "data"
    data.mkdir()
    (data / "caller.py").write_text(caller)
    yaml = (
        f"executor: local\njob_dir: JOB_DIR\ncontainers:\n  box: {image}\n"
        f"mounts: {json.dumps([f'{data}:/data', *mounts])}\nenv_vars: {json.dumps(list(env_vars))}\n"
    )
    res = kit(
        "run_cmd",
        "--cluster=dock",
        f"--config_dir={configs('dock', yaml)}",
        "--container=box",
        "--allow_uncommitted",
        "--with_sandbox",
        f"--command={python} /data/caller.py /data/answer.json",
        timeout=600,
        **kw,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    return json.loads((data / "answer.json").read_text())


@pytest.mark.docker
def test_run_cmd_with_sandbox_in_docker(kit, configs, tmp_path):
    """One container per job: the sandbox and the command share it; the config mounts this test's Python env."""
    mounts = [f"{sys.prefix}:{sys.prefix}", f"{sys.base_prefix}:{sys.base_prefix}"]
    env = [f"KIT_SANDBOX_PYTHON={sys.executable}"]
    got = run_caller_in_docker(kit, configs, tmp_path, "kit-test-base:latest", CALLER, sys.executable, mounts, env)
    assert got["status"] == "completed" and got["stdout"] == "42 [(1, 'lo')]\n"


@pytest.mark.docker
def test_sandbox_image_from_dockerfiles(kit, configs, tmp_path, user_repo):
    """dockerfiles/Dockerfile.sandbox built on the test base image (Debian's python3-aiohttp/numpy/sympy), then a job
    --with_sandbox in it, with nothing mounted from this machine's Python."""
    shutil.copytree(REPO_ROOT / "dockerfiles", user_repo / "dockerfiles")
    caller = CALLER.replace("6 * 7", '__import__("sympy").factorint(360)')
    image = "dockerfile:dockerfiles/Dockerfile.sandbox"
    got = run_caller_in_docker(kit, configs, tmp_path, image, caller, env={"BASE_IMAGE": "kit-test-base:latest"})
    assert got["status"] == "completed" and got["stdout"] == "{2: 3, 3: 2, 5: 1} [(1, 'lo')]\n", got


@pytest.mark.slurm
def test_tir_generation_with_the_sandbox_as_its_own_het_component(kit, configs, stub, tmp_path):
    need("SLURM_CONF", "the local Slurm cluster")
    yaml = textwrap.dedent(
        f"""\
        executor: slurm
        job_dir: JOB_DIR
        account: root
        partition: debug
        cpu_partition: cpu
        env_vars: ['KIT_CLIENT_PYTHON={client_python()}', 'KIT_SANDBOX_PYTHON={sys.executable}']
        """
    )
    server = stub("--tir_rounds", "1", "--tir_code", "print(({numbers}) * 3)")
    inp, out = problems(tmp_path, 4), tmp_path / "out"
    res = kit(
        "generate",
        "--cluster=slurm",
        f"--config_dir={configs('slurm', yaml)}",
        "--server_type=openai",
        f"--server_address={server.url}",
        "--model=stub",
        f"--input_file={inp}",
        f"--output_dir={out}",
        "--with_sandbox",
        "++code_execution=true",
        "--wait",
        timeout=300,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    for r in rows(out / "output.jsonl"):
        assert r["generation"].endswith(f"\\boxed{{{3 * r['id']}}}.") and r["code_rounds_executed"] == 1
    slurm_id = re.search(r"slurm job (\d+)", res.stdout)[1]
    # client and sandbox: two components of one heterogeneous job on different nodes, the sandbox in the cpu partition
    parts = {row["JobID"]: row for row in sacct([slurm_id], "Partition,NodeList")}
    assert set(parts) == {f"{slurm_id}+0", f"{slurm_id}+1"}, parts
    assert parts[f"{slurm_id}+1"]["Partition"] == "cpu"
    assert parts[f"{slurm_id}+0"]["NodeList"] != parts[f"{slurm_id}+1"]["NodeList"]


@pytest.mark.parametrize(
    "command, flags, needle",
    [
        ("generate", ["--with_sandbox", "--sandbox_port=70000"], "--sandbox_port=70000 is not a TCP port"),
        ("generate", ["--with_sandbox", "--sandbox_container=nope"], "nope"),
        ("run_cmd", ["--with_sandbox", "--sandbox_port=-1"], "--sandbox_port=-1 is not a TCP port"),
        ("start_sandbox", ["--sandbox_port=70000"], "--sandbox_port=70000 is not a TCP port"),
        ("start_sandbox", ["--port=70000"], "--port=70000 is not a TCP port"),  # the old name, still checked
        ("start_sandbox", ["--port=6000", "--sandbox_port=6000"], "pass only --sandbox_port"),
        ("start_sandbox", ["--create_tunnel"], "--create_tunnel needs an ssh_tunnel section"),
        # the server's flags are checked before the queue: a mistake used to end only in "the sandbox ended (FAILED)"
        ("start_sandbox", ["--sandbox_args=--isolation no-landlock"], "unknown isolation layer 'no-landlock'"),
        ("start_sandbox", ["--sandbox_args=--memory_gb lots"], "argument --memory_gb: invalid float value: 'lots'"),
        ("generate", ["--with_sandbox", "--sandbox_args=--port 7000"], "--port is set by kit; use --sandbox_port"),
        ("run_cmd", ["--with_sandbox", "--sandbox_args=--bogus 1"], "unrecognized arguments: --bogus 1"),
        ("start_sandbox", ["--sandbox_args=--workers 0"], "--workers 0 must be above 0"),
        ("run_cmd", ["--with_sandbox", "--sandbox_args=--env OMP"], "--env OMP: use NAME=VALUE"),
        ("start_sandbox", ["--sandbox_args=--preload sympy,2x"], "'2x' is not a module name"),
        # a TIR sample keeps a session: fewer than the samples in flight and the server ends sessions still in use
        (
            "generate",
            [
                "--with_sandbox",
                "++code_execution=true",
                "++max_concurrent_requests=300",
                "--sandbox_args=--max_sessions 200",
            ],
            "--max_sessions 200 is below the 300 samples in flight (++max_concurrent_requests)",
        ),
    ],
)
def test_sandbox_flag_errors_are_one_line_exit_2(kit, configs, tmp_path, command, flags, needle):
    d = configs("local-procs", "executor: none\njob_dir: JOB_DIR\n")
    inp = problems(tmp_path, 1)
    own = {
        "generate": [
            "--server_type=openai",
            "--server_address=http://127.0.0.1:9/v1",
            "--model=m",
            f"--input_file={inp}",
            f"--output_dir={tmp_path / 'out'}",
        ],
        "run_cmd": ["--command=true"],
        "start_sandbox": [],
    }[command]
    res = kit(command, "--cluster=local-procs", f"--config_dir={d}", *own, *flags)
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_start_sandbox_port_flag_is_sandbox_port_and_the_old_port_still_works(kit, configs):
    d = configs("local-procs", "executor: none\njob_dir: JOB_DIR\n")
    args = ["start_sandbox", "--cluster=local-procs", f"--config_dir={d}", "--dry_run"]
    new = kit(*args, "--sandbox_port=6123")
    assert new.returncode == 0 and new.stderr == "", new.stderr
    old = kit(*args, "--port=6123")
    assert old.returncode == 0, old.stderr
    assert old.stderr == "kit: warning: --port is deprecated; use --sandbox_port (the same flag as --with_sandbox's).\n"
    assert "KIT_PORT=6123" in new.stdout and "KIT_PORT=6123" in old.stdout
    shown = kit("start_sandbox", "--help").stdout
    assert "--sandbox_port" in shown and "--port " not in shown  # the old name is hidden


@pytest.mark.parametrize(
    ("flags", "sessions"),
    [
        (["++code_execution=true"], "--max_sessions 512"),  # the client's default samples in flight
        (
            ["++code_execution=true", "++max_concurrent_requests=1000", "--sandbox_args=--memory_gb 2"],
            "--max_sessions 1000",
        ),
        (["++code_execution=true", "++max_concurrent_requests=64"], None),  # the server's default (256) has room
        (
            ["++code_execution=true", "++max_concurrent_requests=900", "--sandbox_args=--max_sessions 1200"],
            "--max_sessions 1200",
        ),
        ([], None),  # no TIR: the job's own command decides what it asks of the sandbox
    ],
)
def test_a_tir_jobs_sandbox_has_a_session_for_every_sample_in_flight(kit, configs, tmp_path, flags, sessions):
    d = configs("local-procs", "executor: none\njob_dir: JOB_DIR\n")
    res = kit(
        "generate", "--cluster=local-procs", f"--config_dir={d}", "--server_type=openai",
        "--server_address=http://127.0.0.1:9/v1", "--model=m", f"--input_file={problems(tmp_path, 1)}",
        f"--output_dir={tmp_path / 'out'}", "--with_sandbox", "--dry_run", *flags,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    line = next(line for line in res.stdout.splitlines() if "pipeline_kit.sandbox.server" in line)
    assert re.findall(r"--max_sessions \d+", line) == ([sessions] if sessions else []), line
