"""`kit generate` and `kit start_server` end to end through real servers that serve the tiny model the tests build
(tests/models/, tests/services/models_up.sh): vLLM CPU as a process on none and as a het job on the local Slurm,
and the `transformers` server type. The model was trained to answer single-digit additions as \\boxed{N}."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import BIN, SERVICES, need, rows

pytestmark = pytest.mark.models

VLLM_ENV = [
    "VLLM_CPU_KVCACHE_SPACE=1",
    "VLLM_CPU_OMP_THREADS_BIND=nobind",
    "VLLM_NO_USAGE_STATS=1",
    "HF_HUB_OFFLINE=1",
    "TRANSFORMERS_OFFLINE=1",
]
VLLM_ARGS = "--server_args=--max-model-len 512 --dtype float32 --enforce-eager"


@pytest.fixture
def models():
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv and tiny model (tests/services/models_up.sh)")
    return SERVICES


def additions(path: Path, n: int) -> Path:
    pairs = [(i % 10, (3 * i + 1) % 10) for i in range(n)]
    path.write_text(
        "".join(
            json.dumps({"id": i, "problem": f"What is {a}+{b}?", "sum": a + b}) + "\n" for i, (a, b) in enumerate(pairs)
        )
    )
    return path


def check_answers(records: list[dict], n: int) -> None:
    assert [r["id"] for r in records] == list(range(n))
    boxed = [re.search(r"\\boxed\{(\d+)\}", r["generation"]) for r in records]
    assert sum(m is not None for m in boxed) >= 0.9 * n, [r["generation"] for r in records]
    correct = sum(m is not None and int(m[1]) == r["sum"] for m, r in zip(boxed, records, strict=True))
    assert correct >= 0.7 * n, [r["generation"] for r in records]
    assert all(r["num_generated_tokens"] > 0 for r in records)


def cluster_yaml(executor: str, server_python: str, extra: str = "") -> str:
    env = [*VLLM_ENV, f"KIT_SERVER_PYTHON={server_python}", f"KIT_CLIENT_PYTHON={sys.executable}"]
    lines = "".join(f"  - {e}\n" for e in env)
    return f"executor: {executor}\njob_dir: JOB_DIR\n{extra}env_vars:\n{lines}"


def test_generate_through_vllm_on_none(kit, configs, models, tmp_path):
    d = configs("local", cluster_yaml("none", models["KIT_TEST_VLLM_PYTHON"]))
    inp, out = additions(tmp_path / "in.jsonl", 24), tmp_path / "out"
    common = [
        "--cluster=local",
        f"--config_dir={d}",
        "--server_type=vllm",
        f"--model={models['KIT_TEST_TINY_MODEL']}",
        VLLM_ARGS,
        f"--input_file={inp}",
        f"--output_dir={out}",
        "++prompt_config=generic/math",
        "++inference.tokens_to_generate=12",
    ]
    res = kit("generate", *common, "--num_chunks=2", "--num_random_seeds=2", "++inference.temperature=0.3", timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    for seed in (0, 1):
        check_answers(rows(out / f"output-rs{seed}.jsonl"), 24)
    logs = kit("logs", "--cluster=local", f"--config_dir={d}", "generate").stdout
    assert "server.log" in logs and "client.log" in logs

    # text completions: the client renders the model's chat template (vLLM only sees the prompt text)
    text = kit("generate", *common, "--expname=text", "++server.endpoint=text", timeout=600)
    assert text.returncode == 0, text.stdout + text.stderr
    check_answers(rows(out / "output.jsonl"), 24)


@pytest.mark.slurm
def test_generate_het_job_through_vllm_on_slurm(kit, configs, models, tmp_path):
    need("SLURM_CONF", "the local Slurm cluster")
    yaml = cluster_yaml(
        "slurm", models["KIT_TEST_VLLM_PYTHON"], "account: root\npartition: debug\ncpu_partition: cpu\n"
    )
    d = configs("slurm", yaml)
    inp, out = additions(tmp_path / "in.jsonl", 16), tmp_path / "out"
    res = kit(
        "generate",
        "--cluster=slurm",
        f"--config_dir={d}",
        "--expname=hetgen",
        "--server_type=vllm",
        f"--model={models['KIT_TEST_TINY_MODEL']}",
        "--server_gpus=1",
        VLLM_ARGS,
        f"--input_file={inp}",
        f"--output_dir={out}",
        "--wait",
        "++prompt_config=generic/math",
        "++inference.tokens_to_generate=12",
        timeout=600,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    check_answers(rows(out / "output.jsonl"), 16)
    slurm_id = re.search(r"slurm job (\d+)", res.stdout)[1]
    sacct = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", slurm_id, "-o", "JobID,Partition,State"], capture_output=True, text=True
    ).stdout.split()
    # one heterogeneous job: the server component on a GPU node, the client component in the cpu partition
    assert {line.split("|")[0] for line in sacct} == {f"{slurm_id}+0", f"{slurm_id}+1"}, sacct
    assert f"{slurm_id}+1|cpu|COMPLETED" in sacct, sacct


def test_transformers_server_type_and_start_server(kit, configs, models, tmp_path):
    """`kit start_server` in the foreground prints the address, the server answers, Ctrl-C stops it; then
    `kit generate` reuses that server through --server_address."""
    d = configs("local", cluster_yaml("none", models["KIT_TEST_HF_PYTHON"]))
    model = models["KIT_TEST_TINY_MODEL"]
    env = {**__import__("os").environ, **SERVICES, "KIT_HOME": str(tmp_path / "kh")}
    proc = subprocess.Popen(
        [
            str(BIN / "kit"),
            "start_server",
            "--cluster=local",
            f"--config_dir={d}",
            "--server_type=transformers",
            f"--model={model}",
        ],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = proc.stderr.readline()
        url = re.search(r"serves at (http://\S+/v1)", first)[1]
        deadline = time.time() + 180
        while "ready after" not in (line := proc.stderr.readline()):
            assert line and time.time() < deadline, f"no ready line; got {line!r}"
        with urllib.request.urlopen(url + "/models", timeout=10) as r:
            assert r.status == 200
        inp, out = additions(tmp_path / "in.jsonl", 8), tmp_path / "out"
        res = kit(
            "generate",
            "--cluster=local",
            f"--config_dir={d}",
            "--server_type=transformers",
            f"--server_address={url}",
            f"--model={model}",
            f"--input_file={inp}",
            f"--output_dir={out}",
            "++prompt_config=generic/math",
            "++inference.tokens_to_generate=12",
            "++max_concurrent_requests=4",
            timeout=300,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        check_answers(rows(out / "output.jsonl"), 8)
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    time.sleep(1)
    assert subprocess.run(["bash", "-c", f"ss -Hltn 'sport = :{port}' | grep -q ."]).returncode == 1, (
        "server left running"
    )


@pytest.mark.slurm
def test_several_jobs_run_as_an_array_with_a_server_per_element(kit, configs, models, tmp_path):
    """Two chunks on Slurm: one array job; each element starts its own server (transformers, on a port it picks
    where it runs) and its client beside it; the last chunk merges."""
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm", cluster_yaml("slurm", models["KIT_TEST_HF_PYTHON"], "account: root\npartition: debug\n"))
    inp, out = additions(tmp_path / "in.jsonl", 8), tmp_path / "out"
    res = kit(
        "generate",
        "--cluster=slurm",
        f"--config_dir={d}",
        "--expname=arr",
        "--server_type=transformers",
        f"--model={models['KIT_TEST_TINY_MODEL']}",
        f"--input_file={inp}",
        f"--output_dir={out}",
        "--num_chunks=2",
        "--wait",
        "++prompt_config=generic/math",
        "++inference.tokens_to_generate=12",
        "++max_concurrent_requests=4",
        timeout=600,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    check_answers(rows(out / "output.jsonl"), 8)
    logs = kit("logs", "--cluster=slurm", f"--config_dir={d}", "arr").stdout
    ports = set(re.findall(r"server http://127\.0\.0\.1:(\d+)/v1 ready", logs))
    assert len(ports) == 2, logs  # two elements, two servers, each on its own port


@pytest.mark.slurm
def test_start_server_on_slurm_through_the_ssh_tunnel(kit, configs, models, tmp_path):
    """Submitted over the SSH tunnel; the port is forwarded here, the server answers through it; Ctrl-C cancels."""
    need("KIT_TEST_SSH_KEY", "the loopback sshd")
    tunnel = (
        f"ssh_tunnel:\n  host: 127.0.0.1\n  user: root\n  port: {SERVICES['KIT_TEST_SSH_PORT']}\n"
        f"  identity: {SERVICES['KIT_TEST_SSH_KEY']}\n  job_dir: {tmp_path / 'remote_jobs'}\n"
    )
    d = configs("viassh", cluster_yaml("slurm", models["KIT_TEST_HF_PYTHON"], f"account: root\n{tunnel}"))
    env = {**__import__("os").environ, **SERVICES, "KIT_HOME": str(tmp_path / "kh")}
    argv = ["start_server", "--cluster=viassh", f"--config_dir={d}", "--server_type=transformers", "--create_tunnel"]
    proc = subprocess.Popen(
        [str(BIN / "kit"), *argv, f"--model={models['KIT_TEST_TINY_MODEL']}"],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.time() + 240
        lines = []
        while "ready after" not in (line := proc.stderr.readline()):
            lines.append(line)
            assert line and time.time() < deadline, "".join(lines)
        url = re.search(r"serves at (http://127\.0\.0\.1:\d+/v1) on node\d", "".join(lines))[1]
        with urllib.request.urlopen(url + "/models", timeout=10) as r:
            assert r.status == 200
        job_id = re.search(r"slurm job (\d+)", "".join(lines))[1]
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 130
    deadline = time.time() + 60
    while subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True).stdout.strip():
        assert time.time() < deadline, "the server job was not cancelled"
        time.sleep(1)


@pytest.mark.docker
def test_start_server_in_docker(kit, configs, models, tmp_path):
    """The server in a container (host network); the image lacks transformers, so the config mounts the venv."""
    need("DOCKER_HOST", "the private dockerd")
    hf_python = Path(models["KIT_TEST_HF_PYTHON"])
    venv, model = hf_python.parent.parent, models["KIT_TEST_TINY_MODEL"]
    base_python = Path(
        subprocess.check_output([str(hf_python), "-c", "import sys; print(sys.base_prefix)"], text=True).strip()
    )
    d = configs(
        "dock",
        f"executor: local\njob_dir: JOB_DIR\ncontainers:\n  base: kit-test-base:latest\n"
        f"mounts: ['{venv}:{venv}', '{base_python}:{base_python}', '{model}:{model}']\n"
        f"env_vars: ['KIT_SERVER_PYTHON={hf_python}', 'HF_HUB_OFFLINE=1']\n",
    )
    env = {**__import__("os").environ, **SERVICES, "KIT_HOME": str(tmp_path / "kh")}
    argv = [
        "start_server",
        "--cluster=dock",
        f"--config_dir={d}",
        "--server_type=transformers",
        "--server_container=base",
    ]
    proc = subprocess.Popen(
        [str(BIN / "kit"), *argv, f"--model={model}"], cwd=tmp_path, env=env, stderr=subprocess.PIPE, text=True
    )
    try:
        url = re.search(r"serves at (http://\S+/v1)", proc.stderr.readline())[1]
        deadline = time.time() + 180
        while "ready after" not in (line := proc.stderr.readline()):
            assert line and time.time() < deadline, f"no ready line; got {line!r}"
        with urllib.request.urlopen(url + "/models", timeout=10) as r:
            assert r.status == 200
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=90) == 130
    ps = subprocess.run(["docker", "ps", "-q"], capture_output=True, text=True, env=env).stdout
    assert not ps.strip(), "the server's container is still running"
