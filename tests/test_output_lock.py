"""One run per output folder (pipeline_kit/output_lock.py), through the real CLI: a second `kit generate` into the
folder of a running one is refused at submission in one line (exit 2) naming it, and goes through once the first
ended; a lock whose process is gone is taken over with a note; a dry run takes no lock but names a live one. On the
real Slurm the queued job holds the lock until `kit cancel`. The lock module's own rules (sharing within a run,
stale Slurm ids, a lock another host holds) are checked on it directly."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from conftest import need, problems

from pipeline_kit import output_lock
from pipeline_kit.errors import UserError

STUB = Path(__file__).parent / "stub_openai_server.py"
SLURM = "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n"


def gated_server_type(folder: Path, gate: Path, request_log: Path) -> dict[str, str]:
    """A server type kit starts (a user's plug-in, `gated:GATED`): the stub server, started only once `gate`
    exists, so a run stays in flight until the test opens the gate (no timing). Returns the env that makes it
    importable."""
    (folder / "gated.py").write_text(
        textwrap.dedent(f"""
        from pipeline_kit.servers.base import ServerType

        class Gated(ServerType):
            def launch(self, spec, port, python):
                return ("while [ ! -e {gate} ]; do sleep 0.2; done; exec {sys.executable} {STUB} "
                        + str(port) + " {request_log}")

        GATED = Gated("gated")
        """)
    )
    return {"PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def wait_for(predicate, what: str, limit_s: float = 120) -> None:
    """Poll until `predicate()` (a bound for a hung run, not a timing assertion)."""
    deadline = time.monotonic() + limit_s
    while not predicate():
        assert time.monotonic() < deadline, f"still waiting for {what}"
        time.sleep(0.2)


def test_a_second_run_into_a_busy_folder_is_refused_naming_the_first(kit, none_cluster, tmp_path):
    gate = tmp_path / "gate"
    env = gated_server_type(tmp_path, gate, tmp_path / "requests.jsonl")
    inp, out = problems(tmp_path, 4), tmp_path / "out"
    args = [*none_cluster, "--server_type=gated:GATED", "--model=stub", f"--input_file={inp}", f"--output_dir={out}"]
    lock = output_lock.lock_path(str(out))

    first: dict = {}
    runner = threading.Thread(target=lambda: first.update(res=kit("generate", *args, "--expname=first", env=env)))
    runner.start()
    try:
        wait_for(lock.exists, "the first run's lock")
        holder = json.loads(lock.read_text())
        assert holder["expname"] == "first" and holder["host"] == socket.gethostname()

        second = kit("generate", *args, "--expname=second", env=env)
        assert second.returncode == 2, second.stdout + second.stderr
        line = second.stderr.strip()
        assert "\n" not in line and "Traceback" not in line, line
        assert f"{out} is being written by run 'first'" in line and f"pid {holder['pid']}" in line
        assert "`kit cancel --cluster=local-procs first`" in line and "`kit status --cluster=local-procs first`" in line

        dry = kit("generate", *args, "--expname=second", "--dry_run", env=env)  # takes nothing, says it
        assert dry.returncode == 0, dry.stderr
        assert f"kit: note: {out} is being written by run 'first'" in dry.stderr
        assert json.loads(lock.read_text())["token"] == holder["token"]
    finally:
        gate.touch()
        runner.join(timeout=300)
    assert first["res"].returncode == 0, first["res"].stdout + first["res"].stderr
    assert not lock.exists()  # released when the run ended

    third = kit("generate", *args, "--expname=third", "--rerun_done", env=env)
    assert third.returncode == 0, third.stdout + third.stderr
    assert "taking over" not in third.stderr and not lock.exists()


def test_a_stale_lock_is_taken_over_with_a_note(kit, none_cluster, stub, tmp_path):
    server = stub()
    inp, out = problems(tmp_path, 2), tmp_path / "out"
    gone = subprocess.Popen(["true"])
    gone.wait()  # a pid no process has now
    lock = output_lock.lock_path(str(out))
    holder = {"expname": "crashed", "run_id": "r", "owner": "someone", "host": socket.gethostname(), "pid": gone.pid}
    lock.write_text(json.dumps({**holder, "since": "2026-01-01 00:00:00 UTC", "slurm_ids": [], "token": "t"}))
    args = [*none_cluster, "--server_type=openai", f"--server_address={server.url}", "--model=stub"]
    res = kit("generate", *args, f"--input_file={inp}", f"--output_dir={out}", "--expname=next")
    assert res.returncode == 0, res.stdout + res.stderr
    notes = [line for line in res.stderr.splitlines() if "taking over the lock" in line]
    assert len(notes) == 1 and "run 'crashed'" in notes[0] and f"its process {gone.pid} is gone" in notes[0], notes
    assert len(server.requests()) == 2 and not lock.exists()


def test_locks_are_shared_within_a_run_and_refused_across_runs(tmp_path, monkeypatch):
    out = str(tmp_path / "stage")
    first = output_lock.acquire([out], "recipe")
    inner = output_lock.acquire([out, str(tmp_path / "other")], "recipe", "run-1")  # a stage of the same run
    assert json.loads(output_lock.lock_path(out).read_text())["run_id"] == "run-1"
    inner.release()
    assert output_lock.lock_path(out).exists()  # the outer holder still has it
    first.release()
    assert not output_lock.lock_path(out).exists() and not output_lock.lock_path(str(tmp_path / "other")).exists()

    # another process's live lock refuses, and a refusal leaves none of this run's other locks behind
    path = output_lock.lock_path(out)
    path.write_text(json.dumps({"expname": "busy", "host": socket.gethostname(), "pid": os.getppid(), "token": "x"}))
    with pytest.raises(UserError, match=r"is being written by run 'busy'"):
        output_lock.acquire([str(tmp_path / "a"), out], "mine")
    assert not output_lock.lock_path(str(tmp_path / "a")).exists()

    # a run that waits for the holder (--run_after) takes it over: their jobs never write at once
    notes: list[str] = []
    output_lock.acquire([out], "next", note=notes.append, after=("busy",)).release()
    assert len(notes) == 1 and "this run waits for it (--run_after)" in notes[0]

    # another host's process cannot be seen from here: held
    path.write_text(json.dumps({"expname": "far", "host": "elsewhere", "pid": 1, "token": "y"}))
    with pytest.raises(UserError, match=r"run 'far' \(\? on elsewhere, pid 1"):
        output_lock.acquire([out], "mine")

    # a Slurm run holds it while squeue lists a job as queued or running; then it is stale
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "squeue").write_text("#!/bin/sh\necho 'slurm_load_jobs error: Invalid job id specified' >&2; exit 1\n")
    (fake / "squeue").chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake}{os.pathsep}{os.environ['PATH']}")
    path.write_text(json.dumps({"expname": "old", "host": "elsewhere", "pid": 1, "slurm_ids": ["7"], "token": "z"}))
    notes.clear()
    taken = output_lock.acquire([out], "mine", note=notes.append)
    assert len(notes) == 1 and "Slurm job 7 is no longer queued or running" in notes[0]
    taken.release()


def test_the_last_slurm_job_of_a_run_to_end_removes_its_lock(tmp_path):
    """The command a Slurm run's batch scripts run as they end (output_lock.release_in_job), for a run of 2 jobs:
    each leaves a marker named by its job id, and the lock goes when both have, whichever order they end in (or
    both at once); a job that ends twice (requeued) counts once, a lock another run has taken over since stays."""
    out = str(tmp_path / "out")
    locks = output_lock.acquire([out], "run")
    locks.keep()
    command = output_lock.release_in_job([str(p) for p in locks.paths], 2)
    path = output_lock.lock_path(out)

    def end_job(job_id: str) -> bool:
        subprocess.run(["bash", "-c", command], env={**os.environ, "SLURM_JOB_ID": job_id}, check=True)
        return path.exists()

    assert end_job("11") and end_job("11")  # the other job has not ended; a requeued one counts once
    held = json.loads(path.read_text())
    path.write_text(json.dumps({**held, "token": "another run's"}))
    assert end_job("12")  # taken over since: not this run's to remove
    path.write_text(json.dumps(held))
    assert not end_job("12")  # the run's last job: the lock and the markers go
    assert not list(tmp_path.glob(".out.kit-lock.json*"))
    locks.release()


@pytest.mark.slurm
def test_a_finished_slurm_run_left_no_lock(kit, configs, stub, tmp_path):
    """A generation of 2 units as a 2-element array on the real Slurm, not waited for (`--wait` would free the lock
    itself): once both elements ended, the last of them removed the run's lock, so the next run goes through
    without taking over a stale one."""
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("gen", SLURM)
    server = stub()
    inp, out = problems(tmp_path, 4), tmp_path / "out"
    gen = ["--cluster=gen", f"--config_dir={d}", "--server_type=openai", f"--server_address={server.url}",
           "--model=stub", f"--input_file={inp}", f"--output_dir={out}", "--num_chunks=2", "--num_jobs=2"]  # fmt: skip
    first = kit("generate", *gen, "--expname=ends", timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    job_id = re.search(r"\(slurm job (\d+)\)", first.stdout).group(1)
    deadline = time.time() + 240
    while subprocess.run(["squeue", "-h", "-j", job_id], capture_output=True, text=True).stdout.strip():
        assert time.time() < deadline, "the array did not end"
        time.sleep(1)
    assert (out / "output.jsonl").exists() and not output_lock.lock_path(str(out)).exists()
    again = kit("generate", *gen, "--expname=again", "--rerun_done", "--wait", timeout=300)
    assert again.returncode == 0 and "taking over" not in again.stderr, again.stdout + again.stderr


@pytest.mark.slurm
def test_a_queued_slurm_job_holds_the_lock_until_kit_cancel(kit, configs, stub, tmp_path):
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("gen", SLURM)
    cluster = ["--cluster=gen", f"--config_dir={d}"]
    server = stub("--delay", "600")  # the job stays in flight until it is cancelled
    inp, out = problems(tmp_path, 1), tmp_path / "out"
    gen = [*cluster, "--server_type=openai", f"--server_address={server.url}", "--model=stub"]
    gen += [f"--input_file={inp}", f"--output_dir={out}"]
    try:
        first = kit("generate", *gen, "--expname=held", timeout=240)
        assert first.returncode == 0, first.stdout + first.stderr
        job_id = re.search(r"job held \w+ \(slurm job (\d+)\)", first.stdout).group(1)
        assert json.loads(output_lock.lock_path(str(out)).read_text())["slurm_ids"] == [job_id]

        second = kit("generate", *gen, "--expname=later", timeout=240)
        assert second.returncode == 2, second.stdout + second.stderr
        assert "run 'held'" in second.stderr and f"Slurm job {job_id}" in second.stderr
        assert "kit cancel --cluster=gen held" in second.stderr and "Traceback" not in second.stderr

        assert kit("cancel", *cluster, "held").returncode == 0
        third = kit("generate", *gen, "--expname=later", timeout=240)
        assert third.returncode == 0, third.stdout + third.stderr
        assert "taking over" not in third.stderr  # kit cancel released it
    finally:
        kit("cancel", *cluster, "held")
        kit("cancel", *cluster, "later")


def test_a_lock_file_in_the_repository_is_no_code_to_refuse():
    from pipeline_kit.launch.worktree import is_code

    assert not is_code(str(output_lock.lock_path("results/first")).lstrip("/"))
    assert is_code("results/new_module.py")


HELLO_RECIPE = textwrap.dedent(
    '''
    """Say something into hello/said.txt."""

    from dataclasses import dataclass
    from typing import Annotated

    import typer

    from pipeline_kit.jobs import RunCmdSpec
    from pipeline_kit.recipes.stages import Stage


    @dataclass
    class Params:
        output_dir: Annotated[str, typer.Option("--output_dir")] = ""
        greeting: Annotated[str, typer.Option("--greeting")] = "hello"


    def stages(cluster, p: Params) -> list[Stage]:
        folder = f"{p.output_dir}/hello"
        spec = RunCmdSpec(f"mkdir -p {folder} && echo {p.greeting} > {folder}/said.txt", outputs=(folder,))
        return [Stage("hello", spec, folder, [f"{folder}/said.txt"])]
    '''
)


def test_a_recipe_locks_its_stage_folders_before_moving_one_aside(kit, none_cluster, tmp_path):
    (tmp_path / "hello_recipe.py").write_text(HELLO_RECIPE)
    recipe, out = str(tmp_path / "hello_recipe.py"), tmp_path / "out"
    res = kit("run_recipe", recipe, *none_cluster, f"--output_dir={out}", "--greeting=hi")
    assert res.returncode == 0, res.stdout + res.stderr  # its stage (run_cmd) shares the recipe's lock
    assert not output_lock.lock_path(str(out / "hello")).exists()

    # another run writes hello/ now: a changed greeting would move it aside; it is refused before that
    lock = output_lock.lock_path(str(out / "hello"))
    lock.write_text(json.dumps({"expname": "writer", "host": socket.gethostname(), "pid": os.getpid(), "token": "w"}))
    res = kit("run_recipe", recipe, *none_cluster, f"--output_dir={out}", "--greeting=bye")
    assert res.returncode == 2 and "is being written by run 'writer'" in res.stderr, res.stdout + res.stderr
    assert (out / "hello" / "said.txt").read_text() == "hi\n" and not list(out.glob("hello.replaced-*"))
    lock.unlink()
    res = kit("run_recipe", recipe, *none_cluster, f"--output_dir={out}", "--greeting=bye")
    assert res.returncode == 0 and (out / "hello" / "said.txt").read_text() == "bye\n", res.stdout + res.stderr
