"""`kit generate` and `kit start_server` end to end through real servers that serve the tiny model the tests build
(recipes/quickstart/tiny_model.sh, tests/services/models_up.sh): vLLM CPU as a process on none and as a het job on the local Slurm,
and the `transformers` server type. The model was trained to answer single-digit additions as \\boxed{N}."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest
from conftest import (
    BIN,
    SERVICES,
    VLLM_ARGS,
    addition_problems,
    check_answers,
    cluster_yaml,
    need,
    rows,
    sacct,
    samples_on_disk,
)
from foreground_server import ForegroundServer

pytestmark = pytest.mark.models
TO_REQUEST = re.compile(r"already done, (\d+) to request")  # a unit's first line in a client log


@pytest.fixture
def models():
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv and tiny model (tests/services/models_up.sh)")
    return SERVICES


def generate(kit, cluster: list[str], tmp_path: Path, n: int, *flags: str, timeout: int = 600):
    """`kit generate` of n addition problems with the generic/math prompt; returns (result, output folder)."""
    inp, out = addition_problems(tmp_path / "in.jsonl", n), tmp_path / "out"
    io = [f"--input_file={inp}", f"--output_dir={out}", "++prompt_config=generic/math"]
    return kit("generate", *cluster, *io, "++inference.tokens_to_generate=12", *flags, timeout=timeout), out


def test_generate_through_vllm_on_none(kit, configs, models, shared_vllm, tmp_path):
    """kit starts vLLM for the run (chat endpoint, 2 chunks x 2 seeds, log-probabilities); then the text endpoint
    against the session's shared vLLM server (one start-up fewer: the start-up was checked by the first run)."""
    d = configs("local", cluster_yaml("none", models["KIT_TEST_VLLM_PYTHON"]))
    cluster = ["--cluster=local", f"--config_dir={d}"]
    server = ["--server_type=vllm", f"--model={models['KIT_TEST_TINY_MODEL']}", VLLM_ARGS]
    res, out = generate(kit, cluster, tmp_path, 24, *server, "--num_chunks=2", "--num_random_seeds=2",
                        "++inference.logprobs=true")  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    for seed in (0, 1):
        check_answers(got := rows(out / f"output-rs{seed}.jsonl"), 24)
        assert all(-20 < r["mean_logprob"] <= 0 for r in got), got  # the tokens' log-probabilities, from vLLM
    logs = kit("logs", *cluster, "generate").stdout
    assert "server.log" in logs and "client.log" in logs

    # text completions: the client renders the model's chat template (vLLM only sees the prompt text)
    shared_cluster, shared_model, shared_server = shared_vllm
    text, _ = generate(kit, shared_cluster, tmp_path, 24, *shared_model, f"--server_address={shared_server.url}",
                       "--expname=text", "++server.endpoint=text", "++inference.logprobs=true")  # fmt: skip
    assert text.returncode == 0, text.stdout + text.stderr
    check_answers(got := rows(out / "output.jsonl"), 24)
    assert all(-20 < r["mean_logprob"] <= 0 for r in got), got


def test_a_vllm_kit_starts_keeps_an_idle_connection_longer_than_uvicorns_5_s(shared_vllm):
    """uvicorn, vLLM's HTTP server, closes a connection idle for 5 s, and a job's pool, whose clock starts when the
    job's code got to the answer (seconds late under load), then sent requests on closed connections: retried
    (perf/README.md). kit starts vLLM with VLLM_HTTP_TIMEOUT_KEEP_ALIVE=30: a connection idle for 6 s still serves."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(shared_vllm[2].url)
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        for pause in (0, 6):
            time.sleep(pause)
            conn.request("GET", "/v1/models")  # on the same connection: http.client reconnects only when closed
            with conn.getresponse() as resp:
                assert resp.status == 200 and resp.read()
    finally:
        conn.close()


@pytest.mark.slurm
def test_auto_packing_on_slurm_measures_packs_and_resumes_exactly(kit, configs, models, tmp_path):
    """#26's acceptance on the local Slurm with the CPU vLLM server. A measuring run (one het job: the server on a
    GPU node, the client in the cpu partition) records its figures; `kit plan` reads them back ("measured 1 time")
    and packs 20 chunks x 2 seeds into fewer jobs than units (--num_jobs=auto, the default; at most --max_jobs=2);
    the run is cancelled mid-way, and a rerun requests exactly the missing samples: the merged outputs hold every
    problem once, in order."""
    need("SLURM_CONF", "the local Slurm cluster")
    yaml = cluster_yaml(
        "slurm", models["KIT_TEST_VLLM_PYTHON"], "account: root\npartition: debug\ncpu_partition: cpu\n"
    )
    cluster = ["--cluster=slurm", f"--config_dir={configs('slurm', yaml)}"]
    server = ["--server_type=vllm", f"--model={models['KIT_TEST_TINY_MODEL']}", "--server_gpus=1", VLLM_ARGS]
    slow = "++max_concurrent_requests=1"  # the same in every run (the figures are per request pool), slow to cancel
    (tmp_path / "m").mkdir()
    res, _ = generate(kit, [*cluster, "--expname=measuring", "--wait"], tmp_path / "m", 16, *server, slow)
    assert res.returncode == 0, res.stdout + res.stderr
    slurm_id = re.search(r"slurm job (\d+)", res.stdout)[1]
    parts = {row["JobID"]: row for row in sacct([slurm_id], "Partition")}
    assert set(parts) == {f"{slurm_id}+0", f"{slurm_id}+1"}, parts  # one het job
    assert (parts[f"{slurm_id}+1"]["Partition"], parts[f"{slurm_id}+1"]["State"]) == ("cpu", "COMPLETED"), parts
    measured = kit("status", *cluster, "measuring", "--verbose").stdout
    assert re.search(r"start-up \d+\.\d s, queue wait \d+\.\d s", measured), measured
    assert re.search(r"greedy: 16 samples, \d+ tokens", measured), measured

    n, chunks = 100, 20  # 5 samples a unit: 40 units as before, half the samples to generate (200 -> 100 problems)
    inp, out = addition_problems(tmp_path / "in.jsonl", n), tmp_path / "out"
    flags = [*server, f"--input_file={inp}", f"--output_dir={out}", "++prompt_config=generic/math",
             "++inference.tokens_to_generate=12", slow, f"--num_chunks={chunks}", "--num_random_seeds=2",
             "--max_jobs=2"]  # fmt: skip
    plan = kit("plan", "generate", *cluster, *flags, "--nodes_free=2")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    assert "figures: measured 1 time" in plan.stdout, plan.stdout
    jobs = int(re.search(r"plan: 40 units in (\d+) jobs?", plan.stdout)[1])
    assert jobs <= 2, plan.stdout
    simulated_as_planned(kit, cluster, flags[:-1], configs.job_dir)  # without --max_jobs

    started = kit("generate", *cluster, *flags, "--expname=packed")
    assert started.returncode == 0, started.stdout + started.stderr
    deadline = time.time() + 300
    while time.time() < deadline and len(list(out.glob("*.done"))) < 3:  # a few units done, the rest not yet
        time.sleep(0.2)
    cancelled = kit("cancel", *cluster, "packed")
    assert cancelled.returncode == 0, cancelled.stdout + cancelled.stderr
    while time.time() < deadline and re.search(r"RUNNING|PENDING", kit("status", *cluster, "packed").stdout):
        time.sleep(1)  # until Slurm has stopped it
    kept = samples_on_disk(out, (0, 1), chunks, n // chunks)
    assert 0 < kept < 2 * n, kept  # cancelled mid-run

    again = kit("generate", *cluster, *flags, "--expname=packed-again", "--wait", timeout=600)
    assert again.returncode == 0, again.stdout + again.stderr
    logs = configs.job_dir / "logs"  # read whole (kit logs shows each log's tail)
    asked = sum(int(k) for f in logs.glob("packed-again/**/*client.log") for k in TO_REQUEST.findall(f.read_text()))
    assert asked == 2 * n - kept, asked  # only the missing samples, none twice
    started_servers = list(logs.glob("packed/**/*server.log"))
    assert 1 <= len(started_servers) <= jobs < 40, started_servers  # a start-up per job, not per unit
    for seed in (0, 1):
        got = rows(out / f"output-rs{seed}.jsonl")
        check_answers(got, n)  # every problem once, in input order, answered
        assert [r["sum"] for r in got] == [r["sum"] for r in rows(inp)]
    assert not list(out.glob("*_chunk_*")) and not list(out.glob("*.in-progress"))


def simulated_as_planned(kit, cluster: list[str], flags: list[str], job_dir: Path) -> None:
    """Issue 36 on the local Slurm: `kit plan` of the measured server on the partition's idle nodes (sinfo) packs
    as `kit plan simulate` does for the same figures (start-up, seconds per sample, the recorded queue wait) and
    free nodes."""
    from pipeline_kit.measurements import stored_figures

    [measured] = stored_figures(job_dir)
    assert measured.partition == "debug" and measured.queue_wait_s is not None, measured  # the server's component
    for _ in range(60):  # other users of the shared cluster may hold every node for a while
        plan = kit("plan", "generate", *cluster, *flags)
        assert plan.returncode == 0, plan.stdout + plan.stderr
        free = re.search(r"on (\d+) free nodes? \(idle now in partition debug, from sinfo", plan.stdout)
        if free:
            break
        time.sleep(2)
    assert free, plan.stdout
    assert "queue wait" in plan.stdout and "(the median of 1 submission to partition debug" in plan.stdout, plan.stdout
    jobs, per_job = re.search(r"^plan: 40 units in (\d+) jobs?(?: of (\d+))?", plan.stdout, re.M).groups()
    scale = 1e6  # seconds per sample as tokens per problem / tokens per second
    table = kit("plan", "simulate", "--units=40", f"--startup_min={measured.startup_s / 60!r}",
                f"--tokens_per_problem={int(scale)}", f"--tokens_per_s={scale / measured.seconds_per_sample!r}",
                "--problems_per_unit=5", "--gpus=1", f"--nodes_free={free[1]}",
                f"--queue_wait_min={measured.queue_wait_s / 60!r}", "--time_limit_h=0")  # fmt: skip
    assert table.returncode == 0, table.stderr
    row = re.search(rf"^\| {free[1]} \| \*\*auto\*\* \| (\d+) \| (\d+) \|", table.stdout, re.M)
    assert (int(jobs), int(per_job or 40)) == (int(row[1]), int(row[2])), plan.stdout + table.stdout


def test_transformers_server_type_and_start_server(kit, configs, models, tmp_path):
    """`kit start_server` in the foreground prints the address, the server answers, Ctrl-C stops it; meanwhile
    `kit generate` reuses that server through --server_address."""
    cluster = [
        "--cluster=local",
        f"--config_dir={configs('local', cluster_yaml('none', models['KIT_TEST_HF_PYTHON']))}",
    ]
    model = f"--model={models['KIT_TEST_TINY_MODEL']}"
    server = ForegroundServer(tmp_path, *cluster, "--server_type=transformers", model)
    try:
        address = [f"--server_address={server.url}", "++max_concurrent_requests=4"]
        res, out = generate(kit, cluster, tmp_path, 8, "--server_type=transformers", model, *address)
        assert res.returncode == 0, res.stdout + res.stderr
        check_answers(rows(out / "output.jsonl"), 8)
    finally:
        assert server.interrupt() == 130
    port = server.url.rsplit(":", 1)[1].split("/")[0]
    assert subprocess.run(["bash", "-c", f"ss -Hltn 'sport = :{port}' | grep -q ."]).returncode == 1, "still serving"


def test_kit_of_a_venv_not_on_path_serves_with_its_own_python(configs, models, user_repo, tmp_path):
    """`/path/to/venv/bin/kit generate --server_type=transformers` from a shell where the venv is not activated:
    python3 on PATH lacks transformers and no KIT_SERVER_PYTHON is set, so the server must run on kit's own Python."""
    d = configs("here", "executor: none\njob_dir: JOB_DIR\nenv_vars: ['HF_HUB_OFFLINE=1']\n")
    inp, out = addition_problems(tmp_path / "in.jsonl", 6), tmp_path / "out"
    unset = ("KIT_SERVER_PYTHON", "KIT_CLIENT_PYTHON", "VIRTUAL_ENV")
    env = {name: value for name, value in {**os.environ, **SERVICES}.items() if name not in unset}
    env.update(PATH="/usr/local/bin:/usr/bin:/bin", KIT_HOME=str(tmp_path / "kh"))
    argv = [str(BIN / "kit"), "generate", "--cluster=here", f"--config_dir={d}", "--server_type=transformers",
            f"--model={models['KIT_TEST_TINY_MODEL']}", f"--input_file={inp}", f"--output_dir={out}",
            "++prompt_config=generic/math", "++inference.tokens_to_generate=12"]  # fmt: skip
    res = subprocess.run(argv, cwd=user_repo, env=env, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    check_answers(rows(out / "output.jsonl"), 6)


def test_transformers_server_samples_by_seed_with_requests_in_flight(kit, configs, models, tmp_path):
    """The tiny model's generation_config.json has do_sample false, which `transformers serve` alone keeps at any
    temperature. At temperature 1.0 two seeds give different samples, and a seed gives its samples again with 8
    requests in flight; at temperature 0, or with top_k=1, every seed gives the greedy answers.
    Then `kill` of the foreground `kit start_server` acts like Ctrl-C: the server process ends, its port is free
    (checked on this test's server, which saves the start-up of one of its own)."""
    cluster = [
        "--cluster=local",
        f"--config_dir={configs('local', cluster_yaml('none', models['KIT_TEST_HF_PYTHON']))}",
    ]
    model = ["--server_type=transformers", f"--model={models['KIT_TEST_TINY_MODEL']}"]
    server = ForegroundServer(tmp_path, *cluster, *model)

    def generations(name: str, *flags: str) -> dict[int, list[str]]:
        """{seed: the generations of output-rs<seed>.jsonl} of 16 problems, 8 requests at a time."""
        (tmp_path / name).mkdir()
        address = [f"--server_address={server.url}", "++max_concurrent_requests=8", f"--expname={name}"]
        res, out = generate(kit, cluster, tmp_path / name, 16, *model, *address, *flags)
        assert res.returncode == 0, res.stdout + res.stderr
        return {int(f.stem[9:]): [r["generation"] for r in rows(f)] for f in out.glob("output-rs*.jsonl")}

    try:
        sampled = generations("sampled", "--num_random_seeds=2", "++inference.temperature=1.0")
        again = generations("again", "--random_seeds=0", "++inference.temperature=1.0")
        greedy = generations("greedy", "--num_random_seeds=2")
        top_1 = generations("top_1", "--num_random_seeds=2", "++inference.temperature=1.0", "++inference.top_k=1")
    finally:
        port = server.url.rsplit(":", 1)[1].split("/")[0]
        assert server.interrupt(signal.SIGTERM) in (130, 143)
    assert sampled[0] != sampled[1], sampled
    assert again[0] == sampled[0], (again, sampled)
    assert greedy[0] == greedy[1] == top_1[0] == top_1[1], (greedy, top_1)
    deadline = time.time() + 15
    while subprocess.run(["bash", "-c", f"ss -Hltn 'sport = :{port}' | grep -q ."]).returncode == 0:
        assert time.time() < deadline, "the server still listens after SIGTERM"
        time.sleep(0.3)
    left = subprocess.run(
        ["pgrep", "-f", f"pipeline_kit.servers.transformers_seeded_serve .* --port {port}"],
        capture_output=True,
        text=True,
    )
    assert not left.stdout.strip(), left.stdout


def test_vllm_that_fails_at_start_is_reported_with_its_root_cause(kit, configs, models, tmp_path):
    """A KV cache larger than the machine: vLLM's cause is line ~60 of ~200, its last line only "see root cause
    above". kit's report names the service, its exit code and that cause line."""
    d = configs(
        "local", cluster_yaml("none", models["KIT_TEST_VLLM_PYTHON"]).replace("KVCACHE_SPACE=1", "KVCACHE_SPACE=400")
    )
    server = ["--server_type=vllm", f"--model={models['KIT_TEST_TINY_MODEL']}", VLLM_ARGS]
    res, _ = generate(kit, ["--cluster=local", f"--config_dir={d}", "--expname=oom"], tmp_path, 2, *server)
    assert res.returncode == 1, res.stdout + res.stderr
    why = res.stdout.split("--- why job oom failed:\n", 1)[1].splitlines()
    assert why[0] == "kit: service 'server' exited with code 1 before the other commands ended", why
    assert re.search(
        r"kit:   server\.log: .*ValueError: Available memory on node 0 .* less than requested memory", why[1]
    )
    logs = kit("logs", "--cluster=local", f"--config_dir={d}", "oom").stdout
    assert why[1] in logs


@pytest.mark.slurm
def test_several_jobs_run_as_an_array_with_a_server_per_element(kit, configs, models, tmp_path):
    """Two chunks on Slurm: one array job; each element starts its own server (transformers, on a port it picks
    where it runs) and its client beside it; the last chunk merges."""
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm", cluster_yaml("slurm", models["KIT_TEST_HF_PYTHON"], "account: root\npartition: debug\n"))
    cluster = ["--cluster=slurm", f"--config_dir={d}", "--expname=arr", "--wait"]
    server = ["--server_type=transformers", f"--model={models['KIT_TEST_TINY_MODEL']}"]
    res, out = generate(
        kit, cluster, tmp_path, 8, *server, "--num_chunks=2", "--num_jobs=2", "++max_concurrent_requests=4"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    check_answers(rows(out / "output.jsonl"), 8)
    logs = kit("logs", *cluster[:2], "arr").stdout
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
    model = f"--model={models['KIT_TEST_TINY_MODEL']}"
    server = ForegroundServer(
        tmp_path, "--cluster=viassh", f"--config_dir={d}", "--server_type=transformers", model, "--create_tunnel"
    )
    try:
        assert re.search(r"serves at http://127\.0\.0\.1:\d+/v1 on node\d", "".join(server.lines)), server.lines
        job_id = re.search(r"slurm job (\d+)", "".join(server.lines))[1]
    finally:
        assert server.interrupt() == 130
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
    base = subprocess.check_output([str(hf_python), "-c", "import sys; print(sys.base_prefix)"], text=True).strip()
    d = configs(
        "dock",
        f"executor: local\njob_dir: JOB_DIR\ncontainers:\n  base: kit-test-base:latest\n"
        f"mounts: ['{venv}:{venv}', '{base}:{base}', '{model}:{model}']\n"
        f"env_vars: ['KIT_SERVER_PYTHON={hf_python}', 'HF_HUB_OFFLINE=1']\n",
    )
    argv = ["--cluster=dock", f"--config_dir={d}", "--server_type=transformers", "--server_container=base"]
    server = ForegroundServer(tmp_path, *argv, f"--model={model}")
    assert server.interrupt() == 130
    ps = subprocess.run(["docker", "ps", "-q"], capture_output=True, text=True, env={**os.environ, **SERVICES}).stdout
    assert not ps.strip(), "the server's container is still running"
