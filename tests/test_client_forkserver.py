"""The tests' pre-imported generation client (tests/client_forkserver.py) behaves as `python -m` does where the
tests rely on it: exit codes and errors, signals and kills, and the pipeline_kit a job's path holds."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import _CLIENT_FORKSERVER, problems

MODULE = ["-m", "pipeline_kit.inference.generate"]


@pytest.fixture
def shim() -> str:
    if not _CLIENT_FORKSERVER:
        pytest.skip("this run starts every client with the real Python (KIT_TEST_REAL_CLIENT=1 or KIT_CLIENT_PYTHON)")
    return _CLIENT_FORKSERVER[0].python


def forked_clients() -> set[int]:
    """The clients this worker's server runs now: the children of its handlers (the server's children)."""
    parents = {}
    for entry in os.listdir("/proc"):
        try:
            parents[int(entry)] = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (ValueError, OSError, IndexError):
            continue
    handlers = {pid for pid, parent in parents.items() if parent == _CLIENT_FORKSERVER[0].proc.pid}
    return {pid for pid, parent in parents.items() if parent in handlers}


def run(python: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([python, *args], capture_output=True, text=True, timeout=60, **kwargs)


def test_errors_and_exit_codes_are_the_real_clients(shim, tmp_path):
    bad = ["++input_file=/no/such.jsonl", f"++output_file={tmp_path / 'o.jsonl'}"]
    real, forked = run(sys.executable, *MODULE, *bad), run(shim, *MODULE, *bad)
    assert (forked.returncode, forked.stdout, forked.stderr) == (real.returncode, real.stdout, real.stderr)
    assert real.returncode == 2 and "++server.base_url" in real.stderr
    # what is not the client runs in the real Python (a job's check of its Python)
    check = run(shim, "-c", "import sys, litellm; print(sys.executable)")
    assert check.returncode == 0 and check.stdout.strip() == sys.executable


@pytest.mark.parametrize("how", ["term", "kill"])
def test_a_signal_or_a_kill_of_the_shim_ends_the_client(shim, stub, tmp_path, how):
    server = stub("--delay", "0.2")
    out = tmp_path / "output.jsonl"
    args = [f"++input_file={problems(tmp_path, 200)}", f"++output_file={out}", f"++server.base_url={server.url}"]
    args += ["++server.model=m", "++max_concurrent_requests=2"]
    proc = subprocess.Popen([shim, *MODULE, *args], stderr=subprocess.DEVNULL)
    progress = Path(f"{out}.in-progress")
    deadline = time.time() + 60
    while time.time() < deadline and (not progress.exists() or progress.read_text().count("\n") < 2):
        time.sleep(0.05)
    clients = forked_clients()
    assert clients, "no forked client runs"
    proc.send_signal(signal.SIGTERM if how == "term" else signal.SIGKILL)
    assert proc.wait(timeout=30) == (-signal.SIGTERM if how == "term" else -signal.SIGKILL)
    deadline = time.time() + 30
    while time.time() < deadline and clients & forked_clients():
        time.sleep(0.05)
    assert not clients & forked_clients(), "the client outlived its shim"
    asked = len(server.requests())
    time.sleep(1.5)  # at 2 in flight and 0.2 s each, a client still running would ask ~15 more
    assert len(server.requests()) == asked < 200


def test_the_client_imports_pipeline_kit_from_the_jobs_path(shim, tmp_path):
    """A job runs its packaged copy of the code (PYTHONPATH): the forked client imports that copy, not the one the
    server has imported."""
    code = tmp_path / "code"
    shutil.copytree(
        Path(__file__).parents[1] / "pipeline_kit", code / "pipeline_kit", ignore=shutil.ignore_patterns("__pycache__")
    )
    with open(code / "pipeline_kit" / "errors.py", "a") as f:
        f.write('\nimport sys as _sys\n\n_sys.stderr.write("the packaged copy\\n")\n')
    bad = ["++input_file=/no/such.jsonl", f"++output_file={tmp_path / 'o.jsonl'}"]
    env = {**os.environ, "PYTHONPATH": str(code)}
    packaged, real = (run(python, *MODULE, *bad, env=env, cwd=tmp_path) for python in (shim, sys.executable))
    assert packaged.returncode == 2 and packaged.stderr.startswith("the packaged copy\n"), packaged.stderr
    assert packaged.stderr == real.stderr
    assert "the packaged copy" not in run(shim, *MODULE, *bad, cwd=tmp_path).stderr
