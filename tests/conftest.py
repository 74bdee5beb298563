"""Shared fixtures: a throwaway user git repo, cluster configs written per test, and a `kit` runner that runs the
real console script in a subprocess (exit codes and stderr are part of the contract)."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipeline_kit import ports

BIN = Path(sys.executable).parent
SERVICES_ENV = Path(os.environ.get("KIT_TEST_SERVICES", "/tmp/kit-services")) / "services.env"


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def load_services_env() -> dict[str, str]:
    """The variables services.env exports (SLURM_CONF, DOCKER_HOST, KIT_TEST_SSH_*)."""
    if not SERVICES_ENV.exists():
        return {}
    out = subprocess.run(["bash", "-c", f"source {SERVICES_ENV} && env -0"], capture_output=True, text=True, check=True)
    env = dict(line.split("=", 1) for line in out.stdout.split("\0") if "=" in line)
    return {k: v for k, v in env.items() if k.startswith(("SLURM_", "DOCKER_", "KIT_TEST_"))}


SERVICES = load_services_env()
# One OpenMP thread per process (torch in the CPU trainers and servers, inherited by every kit the tests start): the
# tests run on 3 xdist workers over 2 cores, where a trainer's default of one thread per core thrashes (40 tiny SFT
# steps beside other work: 282 s with the default threads, 44 s with one).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# and every vLLM server the tests start on none without VLLM_ENV below (the recipes' stages) runs as VLLM_ENV says
os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


REQUIRE_ALL = os.environ.get("KIT_TEST_REQUIRE_SERVICES") == "1"  # CI: nothing may skip for want of a part


def skip_or_fail(reason: str) -> None:
    """Skip the test for want of `reason`, or fail it under KIT_TEST_REQUIRE_SERVICES=1, where a missing service,
    file, package or Python version is a broken setup, not a reason to run fewer tests."""
    if REQUIRE_ALL:
        pytest.fail(f"{reason} (KIT_TEST_REQUIRE_SERVICES=1: nothing may be skipped)")
    pytest.skip(reason)


def need_module(name: str, why: str):
    """The module `name`, imported; skip_or_fail naming `why` (what needs it, how to install it) when it is missing."""
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError:
        skip_or_fail(f"{name} is not installed: {why}")


def need(service_var: str, what: str) -> None:
    if service_var not in SERVICES:
        skip_or_fail(f"{what} is not up ({SERVICES_ENV} has no {service_var}); run tests/services/up.sh")


@pytest.fixture
def user_repo(tmp_path: Path) -> Path:
    """A committed git repo, like a researcher's project, that `kit` packages."""
    repo = tmp_path / "proj"
    repo.mkdir()
    (repo / "hello.py").write_text("print('hello from the packaged repo')\n")
    (repo / "probe.py").write_text(PROBE_MODULE)
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    return repo


# A client command builder shared by the server/client reference tests; written into the user's repo as probe.py
PROBE_MODULE = '''
def probe_command(refs):
    """A client that fetches the referenced server's page, retrying while it starts."""
    url = f"http://{refs['server'].address}/"
    return ("python3 -c \\"import time, urllib.request\\n"
            "for _ in range(100):\\n"
            "    try:\\n"
            f"        print('client got', urllib.request.urlopen('{url}', timeout=2).status, 'from {url}'); break\\n"
            "    except OSError: time.sleep(0.1)\\n"
            "else: raise SystemExit('no server')\\"")
'''


REPO_ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_MARKER = "<!-- example: {} -->"


def doc_pages() -> list[Path]:
    """README.md and every page of the docs site (docs/**/*.md): where the executed examples live."""
    return [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").rglob("*.md"))]


def example_blocks(marker: str) -> list[str]:
    """The fenced code blocks that follow `<!-- example: MARKER -->` in README.md or a docs page (tests run them as
    written). The marker must appear exactly once across them all, so a moved example is found wherever it went."""
    tag = EXAMPLE_MARKER.format(marker)
    places = [(page, page.read_text()) for page in doc_pages()]
    places = [(page, text) for page, text in places for _ in range(text.count(tag))]
    where = ", ".join(str(page.relative_to(REPO_ROOT)) for page, _ in places) or "nowhere"
    assert len(places) == 1, f"{tag} must appear once in README.md and docs/**/*.md; found in {where}"
    page, text = places[0]
    m = re.search(rf"{re.escape(tag)}\n((?:```\w*\n.*?```\s*)+)", text, re.S)
    assert m, f"{page.relative_to(REPO_ROOT)}: no code block right after {tag}"
    return re.findall(r"```\w*\n(.*?)```", m.group(1), re.S)


def example_block(marker: str) -> str:
    return example_blocks(marker)[0]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(repo), *args], check=True)


def run_committed(
    repo: Path, tmp_path: Path, name: str, body: str, *args: str, env: dict | None = None, timeout: int = 300
) -> subprocess.CompletedProcess:
    """Commit a pipeline script into the user's repo and run it there, like a researcher would (kit packs only
    committed code)."""
    (repo / name).write_text(textwrap.dedent(body))
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", name)
    full = {**os.environ, "KIT_HOME": str(tmp_path / "kh"), **(env or {})}
    return subprocess.run(
        [sys.executable, name, *args], cwd=repo, env=full, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def configs(tmp_path: Path):
    """write(name, yaml_text) -> the config dir; job_dir defaults to a per-test folder."""
    d = tmp_path / "configs"
    d.mkdir()
    job_dir = tmp_path / "jobs"

    def write(name: str, text: str) -> Path:
        (d / f"{name}.yaml").write_text(textwrap.dedent(text).replace("JOB_DIR", str(job_dir)))
        return d

    write.dir = d
    write.job_dir = job_dir
    return write


def plan_lines(stderr: str, recipe: str) -> dict[str, str]:
    """{stage: action} from the plan `kit run_recipe RECIPE` prints ("RECIPE: stage NAME: ACTION (why)")."""
    prefix = f"{recipe}: stage "
    pairs = (line.removeprefix(prefix).split(": ", 1) for line in stderr.splitlines() if line.startswith(prefix))
    return {stage: action.split(" ")[0] for stage, action in pairs}


@pytest.fixture
def none_cluster(configs) -> list[str]:
    """The flags of a cluster config with executor none (jobs run as local processes) and a per-test job_dir."""
    d = configs("local-procs", "executor: none\njob_dir: JOB_DIR\n")
    return ["--cluster=local-procs", f"--config_dir={d}"]


@pytest.fixture
def kit(tmp_path: Path, user_repo: Path):
    """kit(*args, cwd=user_repo, env=None, timeout=300) -> Result; a variable given as None is unset."""
    home = tmp_path / "home"
    home.mkdir()

    def run(*args: str, cwd: Path | None = None, env: dict | None = None, timeout: int = 300) -> Result:
        # a server's Python: python3 on PATH (this venv, as with an activated venv) unless a test says otherwise,
        # so that dry runs of --server_type=vllm pass the check that the server's Python has vLLM
        full_env = {"KIT_SERVER_PYTHON": "python3", **os.environ, **SERVICES, "KIT_HOME": str(home / ".kit")}
        full_env = {name: value for name, value in {**full_env, **(env or {})}.items() if value is not None}
        full_env["PATH"] = f"{BIN}{os.pathsep}{full_env['PATH']}"
        proc = subprocess.run(
            [str(BIN / "kit"), *args],
            cwd=cwd or user_repo,
            env=full_env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        return Result(proc.returncode, proc.stdout, proc.stderr)

    return run


def stub_server_type(folder: Path, request_log: Path) -> dict[str, str]:
    """A server type kit starts (a user's plug-in, importable as `stub_type:STUB`): the stub server on the job's
    port, logging requests to `request_log`. It takes no server args of its own (kit still keys them). Returns the
    env that makes it importable."""
    stub = Path(__file__).parent / "stub_openai_server.py"
    (folder / "stub_type.py").write_text(
        textwrap.dedent(f"""
        from pipeline_kit.servers.base import ServerType

        class StubServer(ServerType):
            def launch(self, spec, port, python):
                return "{sys.executable} {stub} " + str(port) + " {request_log}"

        STUB = StubServer("stub")
        """)
    )
    return {"PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


SLURM_ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING"}


def sacct(job_ids: list[str], fields: str, until=None, timeout: float = 30) -> list[dict[str, str]]:
    """sacct's rows (-X: a job, an array element or a het component each) of `job_ids`, as {field: value} with JobID,
    State and End besides `fields`. Read again until every id has a row, every row has ended and `until(rows)` (if
    given) holds: slurmdbd records a job a moment after slurmctld ends it (seconds on a loaded machine), and a test
    that read it once could fail."""
    names = ["JobID", "State", "End", *(f for f in fields.split(",") if f not in ("JobID", "State", "End"))]
    argv = ["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", ",".join(names)]
    deadline = time.monotonic() + timeout
    while True:
        out = subprocess.run(argv, capture_output=True, text=True, check=True, env={**os.environ, **SERVICES}).stdout
        rows = [dict(zip(names, line.split("|"), strict=True)) for line in out.splitlines() if line.strip()]
        seen = {re.split(r"[_+]", row["JobID"])[0] for row in rows}
        ended = all(row["State"].split()[0] not in SLURM_ACTIVE and row["End"] != "Unknown" for row in rows)
        if (seen >= set(job_ids) and ended and (until is None or until(rows))) or time.monotonic() > deadline:
            return rows
        time.sleep(0.5)


# ---- a stub OpenAI-compatible server that logs every request (tests/stub_openai_server.py), and JSONL helpers


def free_port() -> int:
    """Below the ephemeral range, as kit's own servers choose (`pipeline_kit.ports`): a port from that range can be
    taken by any test's outgoing connection between the choice and the server's bind."""
    return ports.free_port()


class Stub:
    def __init__(self, tmp_path: Path, *flags: str):
        self.port = free_port()
        self.log = tmp_path / f"requests-{self.port}.jsonl"
        self.proc = subprocess.Popen(
            [sys.executable, Path(__file__).parent / "stub_openai_server.py", str(self.port), str(self.log), *flags],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert "stub server" in self.proc.stdout.readline()
        self.url = f"http://127.0.0.1:{self.port}/v1"

    def requests(self) -> list[dict]:
        return [json.loads(line) for line in self.log.read_text().splitlines()] if self.log.exists() else []

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def stub(tmp_path):
    servers = []

    def start(*flags: str) -> Stub:
        servers.append(Stub(tmp_path, *flags))
        return servers[-1]

    yield start
    for s in servers:
        s.stop()


def client_python() -> str:
    """The Python that runs the generation client in the tests' jobs: the pre-imported client's shim
    (tests/client_forkserver.py, set up by pytest_sessionstart), or this Python under KIT_TEST_REAL_CLIENT=1. Cluster
    configs of jobs in containers name sys.executable instead (the shim and its server live on this host)."""
    return os.environ.get("KIT_CLIENT_PYTHON", sys.executable)


def generate(*overrides: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """The generation script as a job runs it, `python -m pipeline_kit.inference.generate ++key=value...`, with the
    job's Python (client_python())."""
    argv = [client_python(), "-m", "pipeline_kit.inference.generate", *overrides]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def generate_config(tmp_path: Path, *more: str):
    """A GenerateConfig as the generation script parses it, over a one-problem input in tmp_path."""
    from pipeline_kit.inference.config import parse_generate_config

    inp = tmp_path / "in.jsonl"
    if not inp.exists():
        inp.write_text('{"problem": "1+1"}\n')
    return parse_generate_config(
        [f"++input_file={inp}", "++output_file=o.jsonl", "++server.base_url=http://x/v1", *more]
    )


def problems(tmp_path: Path, n: int, name: str = "in.jsonl") -> Path:
    path = tmp_path / name
    path.write_text(
        "".join(json.dumps({"id": i, "problem": f"What is 0+{i}?", "expected_answer": str(i)}) + "\n" for i in range(n))
    )
    return path


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def samples_on_disk(out: Path, seeds, num_chunks: int, rows_per_chunk: int) -> int:
    """Samples a rerun of a chunks x seeds plan need not request: those of done units (or merged files), and the
    finished lines of in-progress files (a line torn by a kill does not count). Safe to poll while a job runs."""
    count = 0
    for seed in seeds:
        if Path(f"{out}/output-rs{seed}.jsonl.done").exists():
            count += num_chunks * rows_per_chunk
            continue
        for k in range(num_chunks):
            unit = out / f"output-rs{seed}_chunk_{k}.jsonl"
            if Path(f"{unit}.done").exists():
                count += rows_per_chunk
                continue
            try:
                lines = Path(f"{unit}.in-progress").read_text().splitlines()
            except FileNotFoundError:  # not started, or finished between the looks
                lines = []
            positions = set()
            for line in lines:
                try:
                    positions.add(json.loads(line)["_kit_position"])
                except (json.JSONDecodeError, KeyError):
                    pass  # the line torn by the kill
            count += len(positions)
    return count


# ---- the tiny model's additions (test_generate_vllm, test_reward, test_slurm_containers)

# VLLM_ENABLE_V1_MULTIPROCESSING=0: vLLM's CPU platform then keeps its default one-process executor for a single
# worker, instead of forcing the multiprocess one, whose extra worker process imports torch and vLLM again: 27 s of
# CPU to the first answer instead of 41 (tiny model, 2 cores; docs/testing.md). The API server's engine-core process
# stays, so a server still stops, fails and is killed as in a user's run.
VLLM_ENV = [
    "VLLM_ENABLE_V1_MULTIPROCESSING=0",
    "VLLM_CPU_KVCACHE_SPACE=1",
    "VLLM_CPU_OMP_THREADS_BIND=nobind",
    "VLLM_NO_USAGE_STATS=1",
    "HF_HUB_OFFLINE=1",
    "TRANSFORMERS_OFFLINE=1",
]
VLLM_ARGS = "--server_args=--max-model-len 512 --dtype float32 --enforce-eager"


def addition_problems(path: Path, n: int) -> Path:
    """n problems 'What is a+b?' with their `sum`, as input of `kit generate` (ids 0..n-1)."""
    pairs = [(i % 10, (3 * i + 1) % 10) for i in range(n)]
    path.write_text(
        "".join(
            json.dumps({"id": i, "problem": f"What is {a}+{b}?", "sum": a + b}) + "\n" for i, (a, b) in enumerate(pairs)
        )
    )
    return path


def check_answers(records: list[dict], n: int) -> None:
    """The tiny model answered most of addition_problems(n) right, as \\boxed{N}."""
    assert [r["id"] for r in records] == list(range(n))
    boxed = [re.search(r"\\boxed\{(\d+)\}", r["generation"]) for r in records]
    assert sum(m is not None for m in boxed) >= 0.9 * n, [r["generation"] for r in records]
    correct = sum(m is not None and int(m[1]) == r["sum"] for m, r in zip(boxed, records, strict=True))
    assert correct >= 0.7 * n, [r["generation"] for r in records]
    assert all(r["num_generated_tokens"] > 0 for r in records)


def cluster_yaml(executor: str, server_python: str, extra: str = "") -> str:
    """A cluster config (YAML) whose server runs in `server_python` with vLLM's CPU settings, the client here
    (client_python(); a config of containers sets KIT_CLIENT_PYTHON again after these lines)."""
    env = [*VLLM_ENV, f"KIT_SERVER_PYTHON={server_python}", f"KIT_CLIENT_PYTHON={client_python()}"]
    lines = "".join(f"  - {e}\n" for e in env)
    return f"executor: {executor}\njob_dir: JOB_DIR\n{extra}env_vars:\n{lines}"


# ---- training data and clusters of the training tests (test_training, test_recipes)

TRAIN_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}


def additions(path: Path, n: int, seed: int, with_generation: bool = True) -> Path:
    """n records 'What is a+b?' (as generation outputs: graded, correct) over all 100 single-digit pairs."""
    rng = random.Random(seed)
    with path.open("w") as f:
        for i in range(n):
            a, b = rng.randrange(10), rng.randrange(10)
            record = {"id": f"p{i}", "problem": f"What is {a}+{b}?", "expected_answer": str(a + b)}
            if with_generation:
                record |= {"generation": f"\\boxed{{{a + b}}}", "symbolic_correct": True}
            f.write(json.dumps(record) + "\n")
    return path


def preference_pairs(path: Path, n: int, seed: int, held_out_from: Path | None = None) -> Path:
    """n DPO pairs 'What is a+b?' (kit's pair format, as kit run_recipe magpie_math writes it without the prompt):
    the right boxed sum chosen over a wrong one. `held_out_from`: a pairs file whose problems are left out."""
    rng = random.Random(seed)
    seen = {row["problem"] for row in rows(held_out_from)} if held_out_from else set()
    with path.open("w") as f:
        for i in range(n):
            a, b = next((a, b) for a, b in iter(lambda: (rng.randrange(10), rng.randrange(10)), None)
                        if f"What is {a}+{b}?" not in seen)  # fmt: skip
            wrong = a + b + rng.randint(1, 9)
            f.write(json.dumps({"id": f"p{i}", "problem": f"What is {a}+{b}?", "chosen": f"\\boxed{{{a + b}}}",
                                "rejected": f"\\boxed{{{wrong}}}"}) + "\n")  # fmt: skip
    return path


def kill_after_first_checkpoint(args: list[str], out: Path, cwd: Path, env: dict, timeout: float = 240) -> list[int]:
    """Start `kit ARGS` (a TRL training into `out`), and once a checkpoint is complete kill -9 its trainer (the job
    runs in its own session) and kit: no chance to save. Returns the steps of the complete checkpoints left."""
    proc = subprocess.Popen([str(BIN / "kit"), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)  # fmt: skip
    deadline = time.time() + timeout
    while not list(out.glob("checkpoint-*/kit-complete")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.2)
    assert proc.poll() is None, proc.stdout.read()[-3000:]  # still training, with a checkpoint saved
    trainers = [int(p.parent.name) for p in Path("/proc").glob("[0-9]*/cmdline") if _trains_into(p, str(out))]
    for pid in [*trainers, proc.pid]:
        os.kill(pid, signal.SIGKILL)
    proc.wait()
    done = sorted(int(p.parent.name.split("-")[1]) for p in out.glob("checkpoint-*/kit-complete"))
    assert done and not (out / "final").exists(), (done, proc.stdout.read()[-3000:])
    return done


def _trains_into(cmdline: Path, out: str) -> bool:
    try:
        text = cmdline.read_bytes().decode(errors="replace")
    except OSError:
        return False
    return "pipeline_kit.training.trl_train" in text and out in text


def slurm_train_config(configs) -> Path:
    """The local Slurm as a cluster config whose jobs train with this venv's Python and serve with the model venv."""
    env = {"KIT_TRAIN_PYTHON": BIN / "python", "KIT_SERVER_PYTHON": SERVICES["KIT_TEST_HF_PYTHON"], **TRAIN_ENV}
    return configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\nenv_vars:\n"
                   + "".join(f"  - {k}={v}\n" for k, v in env.items()))  # fmt: skip


# ---- shared expensive fixtures (issue 31 part 8: the suite's time) ------------------------------------------------
# One CPU vLLM server of the tiny model on executor none, started once per session with `kit start_server` and
# used by every test that needs a served model but does not test the start-up itself (test_vllm_tir_magpie.py,
# the text-endpoint half of test_generate_vllm.py's vLLM-on-none test, test_genselect.py's real-model test). Its
# tests run one at a time on the `models` xdist worker (SERVICE_GROUPS below), so each reads the server's request
# counts as differences; a test must not stop or reconfigure it. Idle it uses no CPU but ~2.7 GB of memory, so its users run one after another (moved to where the first one
# is) and it stops after the last of them.

_SHARED_VLLM: dict = {}  # "server": the running ForegroundServer; "last": the node id of its last user


@pytest.fixture(scope="session")
def shared_vllm(tmp_path_factory):
    """(cluster flags of executor none, server flags, the running ForegroundServer) of the session's vLLM server."""
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv and tiny model (tests/services/models_up.sh)")
    cluster, model, _SHARED_VLLM["server"] = vllm_in_foreground(tmp_path_factory.mktemp("shared-vllm"), "TINY_MODEL")
    yield cluster, model, _SHARED_VLLM["server"]
    stop_shared_vllm()


def vllm_in_foreground(root: Path, model_var: str):
    """(cluster flags of executor none, server flags, the ForegroundServer) of `kit start_server` serving the model
    that services.env's KIT_TEST_<model_var> names with CPU vLLM, its configs and jobs under `root`."""
    from foreground_server import ForegroundServer  # imports this module: only once it is loaded

    (root / "configs").mkdir()
    yaml = cluster_yaml("none", SERVICES["KIT_TEST_VLLM_PYTHON"]).replace("JOB_DIR", str(root / "jobs"))
    (root / "configs" / "local.yaml").write_text(yaml)
    cluster = ["--cluster=local", f"--config_dir={root / 'configs'}"]
    model = ["--server_type=vllm", f"--model={SERVICES[f'KIT_TEST_{model_var}']}"]
    # several tests depend on one start-up: allow it twice the usual time (it took 187-214 s at load 18)
    return cluster, model, ForegroundServer(root, *cluster, *model, VLLM_ARGS, timeout=480)


def stop_shared_vllm() -> None:
    server = _SHARED_VLLM.pop("server", None)
    if server is not None:
        assert server.interrupt() == 130


def uses_shared_vllm(item) -> bool:
    return "shared_vllm" in getattr(item, "fixturenames", ())


# pytest-xdist (`-n 3 --dist loadgroup`, the README's test command): the tests of one shared service run on one worker,
# one after another, so that they neither fight over it (the 3 Slurm nodes, dockerd's builds, the 2 cores a CPU vLLM
# server or trainer takes) nor see each other's jobs; the other tests spread over every worker.
SERVICE_GROUPS = (("slurm", ("slurm", "ssh", "alone")), ("docker", ("docker",)), ("models", ("models",)))
GROUP_ORDER = ("models", "slurm", "docker")  # the order they start in, longest first


def service_group(item) -> str | None:
    """The xdist group of a test: the first service of SERVICE_GROUPS whose marker it has; a test of the shared vLLM
    server goes with the model tests (it must run where the server is)."""
    marks = {mark.name for mark in item.iter_markers()}
    for group, names in SERVICE_GROUPS:
        if marks & set(names):
            return group
    return "models" if uses_shared_vllm(item) else None


_CLIENT_FORKSERVER = []


def pytest_sessionstart(session):
    """kit's .pyc files, written once before the workers start: under a harness that sets PYTHONDONTWRITEBYTECODE
    (CI's shell here does) every `kit` process of the tests would compile its modules again (+0.15 s of CPU each;
    tests/test_user_errors.py took 23 % less CPU with them). Then, where tests run (each xdist worker), the
    pre-imported generation client (tests/client_forkserver.py) as $KIT_CLIENT_PYTHON, which every job and `kit` the
    tests start inherits; KIT_TEST_REAL_CLIENT=1 leaves the variable alone (every client a real `python -m`)."""
    config = session.config
    if not hasattr(config, "workerinput"):  # the xdist controller, or a run without xdist
        import compileall

        compileall.compile_dir(REPO_ROOT / "pipeline_kit", quiet=1)
    runs_tests = hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)
    if runs_tests and os.environ.get("KIT_TEST_REAL_CLIENT") != "1" and "KIT_CLIENT_PYTHON" not in os.environ:
        import tempfile

        from client_forkserver import ClientForkServer

        server = ClientForkServer(tempfile.mkdtemp(prefix="kit-client-"))
        _CLIENT_FORKSERVER.append(server)
        os.environ["KIT_CLIENT_PYTHON"] = server.python


def pytest_sessionfinish(session):
    for server in _CLIENT_FORKSERVER:
        server.stop()


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the groups
def pytest_collection_modifyitems(config, items):
    """Each test of a service goes to its service's xdist group; the tests of the shared vLLM server run one after
    another, from where the first of them is."""
    for item in items:
        group = service_group(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # the groups first, the longest first (models ~23 min, Slurm ~20, Docker ~2 on CI's 2 cores; the other tests ~29
    # min of one worker's time in all), so that each starts at once on a worker of its own and the other tests fill
    # in around them: xdist hands out work in this order
    rank = {group: i for i, group in enumerate(GROUP_ORDER)}
    items.sort(key=lambda item: rank.get(service_group(item), len(rank)))
    users = [item for item in items if uses_shared_vllm(item)]
    if users:
        first = items.index(users[0])
        others = [item for item in items if not uses_shared_vllm(item)]
        items[:] = others[:first] + users + others[first:]


def pytest_collection_finish(session):
    grouped = [item for item in session.items if service_group(item) is not None]
    if getattr(session.config.option, "loadgroup", False) and grouped and "@" not in grouped[0].nodeid:
        # xdist marks a grouped test by a suffix of its nodeid; a pytest it does not support drops it silently
        raise pytest.UsageError(
            f"pytest-xdist did not group {grouped[0].nodeid} (pytest {pytest.__version__}): install the versions "
            "pyproject.toml's `test` extra pins (pip install -e '.[test]')."
        )
    users = [item.nodeid for item in session.items if uses_shared_vllm(item)]
    _SHARED_VLLM["last"] = users[-1] if users else None


def pytest_runtest_teardown(item, nextitem):
    if item.nodeid == _SHARED_VLLM.get("last"):
        stop_shared_vllm()  # no later test needs it


# ---- end of the shared expensive fixtures ----------------------------------------------------------------------------


@pytest.fixture
def mirror():
    """A local HTTP server that plays every upstream host of `kit prepare_data` (tests/benchmark_upstream.py)."""
    from benchmark_upstream import Mirror

    m = Mirror()
    yield m
    m.server.shutdown()
    m.server.server_close()
