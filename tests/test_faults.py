"""Faults injected on purpose, each at a random point of a run (the seed is in every failure message): a server
killed with SIGKILL (the stub, then real vLLM), a server that answers 429 or 500 for 10 s, the output filesystem
full mid-write, and the slurmd of the node running an array element killed (run alone: it stops a daemon of the
Slurm cluster). Nothing may be lost or mislabelled: the run stops with one line naming the server or the file, the
files on disk stay whole, and a rerun requests exactly the samples that are missing."""

from __future__ import annotations

import json
import os
import random
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
    Result,
    addition_problems,
    cluster_yaml,
    need,
    problems,
    rows,
    samples_on_disk,
    skip_or_fail,
)

from pipeline_kit.launch import slurm_states
from pipeline_kit.launch.job_states import SLURM_FAILURES
from pipeline_kit.launch.records import JobRecord

TO_REQUEST = re.compile(r"already done, (\d+) to request")  # a unit's first line in a client log


def seeded(request) -> tuple[random.Random, str]:
    """A random generator seeded from the test's name and KIT_FAULT_SEED (default: the time), and a note that names
    the seed for the failure messages (rerun the same point with KIT_FAULT_SEED=<seed>)."""
    seed = int(os.environ.get("KIT_FAULT_SEED", time.time_ns() % 10**6))
    return random.Random(f"{request.node.name}:{seed}"), f"[KIT_FAULT_SEED={seed}]"


def kit_env(tmp_path: Path) -> dict[str, str]:
    """The environment the `kit` fixture runs kit in, for a kit started in the background (Popen)."""
    env = {"KIT_SERVER_PYTHON": "python3", **os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "home" / ".kit")}
    env["PATH"] = f"{BIN}{os.pathsep}{env['PATH']}"
    return env


def start_kit(tmp_path: Path, cwd: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "kit"), *args], cwd=cwd, env=kit_env(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def finished(proc: subprocess.Popen, timeout: float) -> Result:
    out, err = proc.communicate(timeout=timeout)
    return Result(proc.returncode, out, err)


def wait_for_samples(proc: subprocess.Popen, count, at_least: int, note: str, timeout: float = 300) -> int:
    """Poll until `count()` (samples on disk) reaches `at_least` while `proc` runs; returns the count seen."""
    deadline = time.time() + timeout
    while (seen := count()) < at_least:
        assert proc.poll() is None, f"{note} the run ended before {at_least} samples: {proc.communicate()}"
        assert time.time() < deadline, f"{note} {seen} of {at_least} samples after {timeout} s"
        time.sleep(0.05)
    return seen


def asked_in(configs, expname: str) -> int:
    """The samples the clients of experiment `expname` requested (their units' first lines, summed)."""
    logs = configs.job_dir / "logs"
    return sum(int(k) for f in logs.glob(f"{expname}/**/*client.log") for k in TO_REQUEST.findall(f.read_text()))


def check_every_sample_once(path: Path, n: int, note: str) -> None:
    got = [r["id"] for r in rows(path)]
    assert got == list(range(n)), f"{note} {path}: {got}"


# ------------------------------------------------------------------ 1. a server killed with SIGKILL


def test_killed_server_stops_the_client_naming_it_and_the_rerun_asks_only_the_missing(
    request, kit, none_cluster, stub, user_repo, configs, tmp_path
):
    """The server (here the stub at a --server_address: nothing in the job watches its process) is killed with
    SIGKILL after a random number of samples. The client notices that no request reaches it any more and stops
    (well within 30 s) with one line naming the server; a rerun against a new server requests exactly the samples
    that were not written."""
    rng, note = seeded(request)
    n, chunks = 40, 2
    inp, out = problems(tmp_path, n), tmp_path / "out"
    server = stub("--delay", "0.05")
    flags = ["--server_type=openai", "--model=m", f"--input_file={inp}", f"--output_dir={out}",
             f"--num_chunks={chunks}", "--num_random_seeds=1", "++max_concurrent_requests=2"]  # fmt: skip
    run = start_kit(tmp_path, user_repo, "generate", *none_cluster, *flags, f"--server_address={server.url}")
    kill_after = rng.randrange(1, n - 10)
    wait_for_samples(run, lambda: samples_on_disk(out, (0,), chunks, n // chunks), kill_after, note)
    server.proc.send_signal(signal.SIGKILL)
    killed_at = time.time()
    res = finished(run, timeout=180)
    stopped_after = time.time() - killed_at
    report = res.stdout + res.stderr
    assert res.returncode == 1, f"{note} killed after {kill_after} samples\n{report}"
    gone = [line for line in report.splitlines() if f"the server at {server.url} is gone" in line]
    assert gone, f"{note}\n{report}"
    waited = int(re.search(r"no request reached it for (\d+) s", gone[0])[1])
    assert 10 <= waited < 30, f"{note} {gone[0]}"  # ++server.gone_after (10 s), then the next try of a request
    assert stopped_after < 120, f"{note} the client still ran {stopped_after:.0f} s after the kill"  # hang guard
    assert "Traceback" not in report, report

    kept = samples_on_disk(out, (0,), chunks, n // chunks)
    assert kept < n, f"{note} {kept}"
    again = stub()
    res = kit("generate", *none_cluster, *flags, f"--server_address={again.url}", "--expname=again")
    assert res.returncode == 0, f"{note}\n{res.stdout}{res.stderr}"
    assert len(again.requests()) == n - kept, f"{note} kept {kept}, asked {len(again.requests())}"
    assert asked_in(configs, "again") == n - kept, note
    check_every_sample_once(out / "output-rs0.jsonl", n, note)


# ------------------------------------------------------------------ 4. a server that answers 429 or 500 for 10 s


def test_server_failing_for_10_s_is_retried_every_sample_kept_and_retries_counted(
    request, kit, none_cluster, stub, configs, tmp_path
):
    """From a random request on, the server answers 429 or 500 (at random) to every request for 10 s, then recovers.
    Every sample is written once, the job succeeds, and the figures (`kit status --verbose`) count exactly one
    retry per refused request."""
    rng, note = seeded(request)
    n = 30
    status, fail_from = rng.choice((429, 500)), rng.randrange(0, n - 5)
    note += f" HTTP {status} from request {fail_from + 1}"
    inp, out = problems(tmp_path, n), tmp_path / "out"
    server = stub("--fail_status", str(status), "--fail_for", "10", "--fail_from", str(fail_from), "--delay", "0.02")
    flags = ["--server_type=openai", "--model=m", f"--input_file={inp}", f"--output_dir={out}",
             f"--server_address={server.url}", "--num_chunks=2", "++max_concurrent_requests=4", "--expname=flaky"]  # fmt: skip
    res = kit("generate", *none_cluster, *flags)
    assert res.returncode == 0, f"{note}\n{res.stdout}{res.stderr}"
    check_every_sample_once(out / "output.jsonl", n, note)
    log = server.requests()
    refused = sum(1 for r in log if r["refused"])
    assert refused >= 1 and len(log) == n + refused, f"{note} {refused} refused of {len(log)}"
    assert max(r["arrived"] for r in log) - min(r["arrived"] for r in log if r["refused"]) >= 10, note  # it waited

    verbose = kit("status", *none_cluster, "flaky", "--verbose").stdout
    retries = [int(k) for k in re.findall(r"^    chunk_\d: .*, (\d+) retries$", verbose, re.M)]
    assert len(retries) == 2 and sum(retries) == refused, f"{note}\n{verbose}"
    # each unit's line in the job's log says why its requests were retried
    logs = "".join(p.read_text() for p in configs.job_dir.glob("logs/flaky/*/*/*.log"))
    said = [int(k) for k in re.findall(rf"0 failed; (\d+) requests retried \(\d+ x [^)]*{status}", logs)]
    assert sum(said) == refused, f"{note}\n{logs}"


# ------------------------------------------------------------------ 3. the output filesystem full mid-write


@pytest.fixture
def small_disk(tmp_path):
    """A 1 MiB tmpfs mounted at tmp_path/out (unmounted at the end): the output folder of a run that fills it."""
    folder = tmp_path / "out"
    folder.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(folder)], capture_output=True,
                             text=True)  # fmt: skip
    if mounted.returncode != 0:
        skip_or_fail(f"cannot mount a tmpfs (needs root): {mounted.stderr.strip()}")
    yield folder
    subprocess.run(["umount", "-l", str(folder)], check=True)


@pytest.mark.parametrize("point", ["random", "merge"])
def test_full_disk_mid_write_names_the_file_leaves_no_torn_file_and_the_rerun_completes(
    request, point, kit, none_cluster, stub, configs, small_disk, tmp_path
):
    """The output folder is a 1 MiB tmpfs, filled by a file of random size so that it runs out at a random point:
    while the samples are appended, or while a chunk's final file or the merge is written. The run stops with one
    line naming the file; every file on disk is whole (the in-progress files end on a whole line, no final file is
    cut short, no temporary file is left); once space is freed a rerun requests only the missing samples and writes
    every sample once. `merge`: the space runs out while the chunks' merge is written (every chunk is done then),
    so the rerun has no sample to request but must still merge."""
    rng, note = seeded(request)
    n, chunks, out = 100, 2, small_disk
    # the run needs ~600 KiB at its peak (in-progress, chunk files, the merge); 358 KiB runs out in the merge
    free_kib = rng.randrange(8, 380) if point == "random" else 358
    note += f" {free_kib} KiB free"
    filler = out / "filler"
    filler.write_bytes(b"\0" * ((1024 - free_kib) * 1024 - 8192))  # tmpfs counts whole 4 KiB pages
    inp = problems(tmp_path, n)
    server = stub("--answer_chars", "2000")
    flags = ["--server_type=openai", "--model=m", f"--input_file={inp}", f"--output_dir={out}",
             f"--server_address={server.url}", f"--num_chunks={chunks}", "--num_random_seeds=1",
             "++max_concurrent_requests=4"]  # fmt: skip
    res = kit("generate", *none_cluster, *flags, "--expname=full")
    report = res.stdout + res.stderr
    assert res.returncode == 1, f"{note}\n{report}"
    lines = {line.split("kit generate: error: ", 1)[1] for line in report.splitlines() if "no space left" in line}
    assert len(lines) == 1, f"{note}\n{report}"
    named = re.fullmatch(r"no space left on device writing (\S+); free space and rerun .*", lines.pop())
    assert named and Path(named[1]).parent == out, f"{note} {named}"
    assert "Traceback" not in report, f"{note}\n{report}"

    per_chunk = n // chunks
    for path in out.iterdir():
        assert not path.name.startswith(".output"), f"{note} a temporary file is left: {path}"
        if path.name.endswith(".in-progress"):
            text = path.read_text()
            assert not text or text.endswith("\n"), f"{note} {path} ends on a torn line"
            [json.loads(line) for line in text.splitlines()]
        elif path.suffix == ".jsonl":  # a final file is whole or absent
            expected = n if "_chunk_" not in path.name else per_chunk
            assert len(rows(path)) == expected, f"{note} {path} is cut short"
    kept = samples_on_disk(out, (0,), chunks, per_chunk)
    before = len(server.requests())

    filler.unlink()
    res = kit("generate", *none_cluster, *flags, "--expname=freed")
    assert res.returncode == 0, f"{note}\n{res.stdout}{res.stderr}"
    check_every_sample_once(out / "output-rs0.jsonl", n, note)
    assert len(server.requests()) - before == n - kept == asked_in(configs, "freed"), f"{note} kept {kept}"


# ------------------------------------------------------------------ 1'. real vLLM killed with SIGKILL


def processes(tmp_path: Path, command: str) -> list[int]:
    """The pids whose command line holds `command` and that run for a job of this test (their environment names a
    folder under tmp_path): other tests' and other users' servers are never touched. A forked child of one of them
    (vLLM's engine process) is left out: killing the first kills the server."""
    found: dict[int, int] = {}  # pid -> parent pid
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            environ = (entry / "environ").read_bytes().decode(errors="replace")
        except OSError:
            continue
        if command in cmdline and str(tmp_path) in environ and "bash -c" not in cmdline:
            try:
                found[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    return [pid for pid, parent in found.items() if parent not in found]


@pytest.mark.models
def test_vllm_killed_mid_generation_stops_the_job_naming_it_and_the_rerun_asks_only_the_missing(
    request, kit, configs, user_repo, tmp_path
):
    """The CPU vLLM server of a generation job on none is killed with SIGKILL after a random number of samples: the
    job stops at once, its report names the server (`service 'server' exited with code 137`) and shows the last
    lines of its log; a rerun (vLLM started again with the same --server_args, so that the .done keys match)
    requests exactly the samples that were not written, by the job's own count."""
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv and tiny model (tests/services/models_up.sh)")
    rng, note = seeded(request)
    n, chunks = 40, 2
    d = configs("local", cluster_yaml("none", SERVICES["KIT_TEST_VLLM_PYTHON"]))
    cluster = ["--cluster=local", f"--config_dir={d}"]
    inp, out = addition_problems(tmp_path / "in.jsonl", n), tmp_path / "out"
    model = ["--server_type=vllm", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}"]
    flags = [*model, f"--input_file={inp}", f"--output_dir={out}", "++prompt_config=generic/math",
             "++inference.tokens_to_generate=12", f"--num_chunks={chunks}", "--num_random_seeds=1",
             "++max_concurrent_requests=2"]  # fmt: skip
    run = start_kit(tmp_path, user_repo, "generate", *cluster, *flags, VLLM_ARGS, "--expname=killed")
    kill_after = rng.randrange(1, n // 2)  # at least 20 left: they take seconds, the kill a moment
    note += f" killed after {kill_after} samples"

    def on_disk() -> int:
        return samples_on_disk(out, (0,), chunks, n // chunks)

    wait_for_samples(run, on_disk, 1, note, timeout=500)
    servers = processes(tmp_path, "vllm.entrypoints.openai.api_server")  # found before: the /proc scan takes time
    assert len(servers) == 1, f"{note} {servers}"
    wait_for_samples(run, on_disk, kill_after, note, timeout=300)
    os.kill(servers[0], signal.SIGKILL)
    killed_at = time.time()
    res = finished(run, timeout=180)
    stopped_after = time.time() - killed_at
    report = res.stdout + res.stderr
    assert res.returncode == 1, f"{note}\n{report}"
    assert "kit: service 'server' exited with code 137 before the other commands ended" in report, f"{note}\n{report}"
    tail = report.split("server.log (last lines)\n", 1)
    assert len(tail) == 2 and tail[1].strip(), f"{note} no last lines of the server's log\n{report}"
    assert stopped_after < 60, f"{note} the job still ran {stopped_after:.0f} s after the kill"
    assert not processes(tmp_path, "pipeline_kit.inference.generate"), f"{note} the client still runs"

    kept = samples_on_disk(out, (0,), chunks, n // chunks)
    assert kill_after <= kept < n, f"{note} {kept}"
    # the rerun starts vLLM again with the same --server_args: they are part of the .done key of a chunk the first
    # run finished before the kill (a server at --server_address would be another key), and it asks only the rest
    res = kit("generate", *cluster, *flags, VLLM_ARGS, "--expname=rerun", timeout=600)
    assert res.returncode == 0, f"{note}\n{res.stdout}{res.stderr}"
    assert asked_in(configs, "rerun") == n - kept, f"{note} kept {kept}"
    check_every_sample_once(out / "output-rs0.jsonl", n, note)


# ------------------------------------------------------------------ 2. the slurmd of an element's node killed


def test_kit_status_shows_why_slurm_ended_a_job(monkeypatch):
    """sacct's NODE_FAIL (and TIMEOUT, OUT_OF_MEMORY, ...) is FAILED with Slurm's reason: on the failed array unit's
    line and as the job's reason; a script's own failure (FAILED) has no such reason."""
    out = "7_0|COMPLETED\n7_1|NODE_FAIL\n7_2|FAILED\n8|TIMEOUT\n9+0|OUT_OF_MEMORY\n9+1|CANCELLED by 0\n10|FAILED\n"
    monkeypatch.setattr(slurm_states, "remote_run", lambda cluster, cmd, check=True: type("P", (), {"stdout": out}))
    rows = slurm_states.slurm_rows(None, ["7", "8", "9", "10"])
    assert rows["7_1"] == "FAILED" and rows["7_1"].word == "NODE_FAIL"  # FAILED wherever kit compares states

    array = slurm_states.slurm_status(None, JobRecord("gen", "t", ["g"], 3, slurm_ids=["7"]), rows)
    assert array.state == "FAILED"
    assert array.failed_units == {1: f"FAILED (NODE_FAIL: {SLURM_FAILURES['NODE_FAIL']})", 2: "FAILED"}
    assert array.reason == f"unit 1: {array.failed_units[1]}"
    timeout = slurm_states.slurm_status(None, JobRecord("train", "t", ["g"], slurm_ids=["8"]), rows)
    assert (timeout.state, timeout.reason) == ("FAILED", "FAILED (TIMEOUT: it reached its time limit)")
    het = slurm_states.slurm_status(None, JobRecord("het", "t", ["a", "b"], slurm_ids=["9"]), rows)
    assert het.reason.startswith("FAILED (OUT_OF_MEMORY: ")
    assert slurm_states.slurm_status(None, JobRecord("own", "t", ["g"], slurm_ids=["10"]), rows).reason == ""


def test_sbatch_kwargs_true_is_a_flag_without_a_value():
    """The slurmd test's `--sbatch_kwargs='{"no_requeue": true}'` must reach sbatch as `--no-requeue` (sbatch
    refuses `--no-requeue=True`); false leaves a flag out."""
    from pipeline_kit.cli.job_flags import JobFlags

    flags = JobFlags(sbatch_kwargs='{"no_requeue": true, "qos": "high", "exclusive": false, "nice": 5}')
    assert flags.sbatch_dict() == {"no_requeue": True, "qos": "high", "nice": "5"}


def slurm_run_dir() -> Path:
    """The local cluster's run folder (tests/services/slurm_up.sh: <DIR>/run holds slurmd-<node>.pid)."""
    return Path(SERVICES["SLURM_CONF"]).parent.parent / "run"


def scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], check=True, capture_output=True, text=True)


def restart_slurmd(node: str) -> None:
    """Start the node's slurmd again as tests/services/slurm_up.sh starts it, and bring the node back."""
    subprocess.run(["slurmd", "-f", SERVICES["SLURM_CONF"], "-N", node], check=True)
    deadline = time.time() + 120
    while True:
        subprocess.run(["scontrol", "update", f"NodeName={node}", "State=RESUME"], capture_output=True)
        state = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%T"], capture_output=True, text=True).stdout
        if re.search(r"idle|mixed|allocated", state) and "*" not in state:
            return
        assert time.time() < deadline, f"{node} did not come back after slurmd restarted: {state}"
        time.sleep(1)


@pytest.mark.slurm
@pytest.mark.alone
def test_slurmd_killed_under_an_array_element_fails_it_with_node_fail_and_the_rerun_finishes_the_rest(
    request, kit, configs, stub, user_repo, tmp_path
):
    """RUN ALONE (`-m alone`): it kills, then restarts, the slurmd of one node of the local cluster, so no other
    user of that cluster may run jobs meanwhile (it refuses to start while others' jobs are queued). A generation
    of 3 units as a 3-element array (clients only, against the stub here); the slurmd of the node that runs a
    random element is killed with SIGKILL after a random number of that element's samples, and the node is set
    DOWN (what slurmctld does after SlurmdTimeout, 300 s on the test cluster). The element ends NODE_FAIL
    (`--no-requeue`: by default Slurm requeues it, and the requeued run resumes the same way), which `kit status`
    shows with its reason; once the node is back, a rerun requests exactly the samples that are missing."""
    need("SLURM_CONF", "the local Slurm cluster")
    deadline = time.time() + 180  # the suite's earlier Slurm jobs (cancelled ones included) may still be ending
    while others := subprocess.run(["squeue", "-h", "-o", "%i %j"], capture_output=True, text=True).stdout.strip():
        if time.time() > deadline:
            break
        time.sleep(2)
    if others:
        skip_or_fail(f"the local Slurm cluster runs other jobs ({others.splitlines()[0]} ...); run this test alone")
    rng, note = seeded(request)
    n, units = 60, 3
    yaml = cluster_yaml("slurm", str(BIN / "python"), "account: root\npartition: debug\n")
    cluster = ["--cluster=slurm", f"--config_dir={configs('slurm', yaml)}"]
    inp, out = problems(tmp_path, n), tmp_path / "out"
    # 0.5 s a sample, one at a time, and at least 10 samples left after the kill: the element is still running when
    # its node goes DOWN (with 0.2 s and 5 left it could finish first: seed 818773 ended SUCCEEDED)
    server = stub("--delay", "0.5")
    flags = ["--server_type=openai", "--model=m", f"--input_file={inp}", f"--output_dir={out}",
             f"--server_address={server.url}", f"--num_chunks={units}", "--num_random_seeds=1",
             f"--num_jobs={units}", "++max_concurrent_requests=1"]  # fmt: skip
    started = kit("generate", *cluster, *flags, "--expname=nodefail", '--sbatch_kwargs={"no_requeue": true}')
    assert started.returncode == 0, started.stdout + started.stderr
    slurm_id = re.search(r"slurm job (\d+)", started.stdout)[1]
    element, kill_after = rng.randrange(units), rng.randrange(1, n // units - 10)
    note += f" element {element} after {kill_after} samples"

    in_progress = out / f"output-rs0_chunk_{element}.jsonl.in-progress"
    deadline = time.time() + 300
    while not in_progress.exists() or len(in_progress.read_text().splitlines()) < kill_after:
        assert time.time() < deadline, f"{note} the element did not get going"
        time.sleep(0.1)
    node = subprocess.run(["squeue", "-h", "-j", f"{slurm_id}_{element}", "-o", "%N"], capture_output=True,
                          text=True).stdout.strip()  # fmt: skip
    assert re.fullmatch(r"node\d+", node), f"{note} {node!r}"
    pid = int((slurm_run_dir() / f"slurmd-{node}.pid").read_text())
    try:
        os.kill(pid, signal.SIGKILL)
        scontrol("update", f"NodeName={node}", "State=DOWN", "Reason=kit fault test: slurmd killed")
        deadline = time.time() + 300
        while re.search(r"RUNNING|PENDING", status := kit("status", *cluster, "nodefail").stdout):
            assert time.time() < deadline, f"{note} {status}"
            time.sleep(2)
    finally:
        restart_slurmd(node)  # its slurmd stops the element's orphaned processes when it registers again
    deadline = time.time() + 60
    while (orphans := processes(tmp_path, "pipeline_kit.inference.generate")) and time.time() < deadline:
        time.sleep(1)
    for pid in orphans:  # a node that really failed takes its processes with it; a lone slurmd crash may not
        os.kill(pid, signal.SIGKILL)

    shown = kit("status", *cluster, "nodefail")
    assert f"nodefail[{element}] FAILED (NODE_FAIL: its node failed" in shown.stdout, f"{note}\n{shown.stdout}"
    # (every element that ran on that node fails with it)
    assert re.search(rf"slurm: .*\bunit {element}: FAILED \(NODE_FAIL", shown.stderr), f"{note}\n{shown.stderr}"
    kept = samples_on_disk(out, (0,), units, n // units)
    assert kept < n, f"{note} {kept}"
    before = len(server.requests())
    again = kit("generate", *cluster, *flags, "--expname=after-nodefail", "--wait", timeout=600)
    assert again.returncode == 0, f"{note}\n{again.stdout}{again.stderr}"
    assert len(server.requests()) - before == n - kept == asked_in(configs, "after-nodefail"), f"{note} kept {kept}"
    check_every_sample_once(out / "output-rs0.jsonl", n, note)


def test_default_retries_wait_45_to_68_s_and_a_refused_connection_is_no_answer(monkeypatch):
    """With the defaults a request is retried for 45.5 s at least (8 waits from 0.5 s, doubled, capped at 10 s, plus
    up to half at random), more than a server that fails for 10-30 s needs; a refused connection, however deeply
    LiteLLM wraps it, counts as no answer, a timeout does not."""
    from pipeline_kit.inference import retry
    from pipeline_kit.inference.config import GenerateConfig

    cfg = GenerateConfig()
    for r, total in ((0.0, 45.5), (1.0, 68.25)):
        monkeypatch.setattr(retry.random, "random", lambda r=r: r)
        assert sum(retry.backoff(a, cfg.retry_delay) for a in range(cfg.max_retries)) == total

    def chained(inner: BaseException) -> BaseException:
        try:
            try:
                raise inner
            except BaseException as e:
                raise RuntimeError("litellm.InternalServerError: OpenAIException - Connection error.") from e
        except RuntimeError as outer:
            return outer

    assert retry.no_answer(chained(ConnectionRefusedError(111, "Connect call failed")))
    assert retry.no_answer(chained(ConnectionResetError(104, "reset by peer")))
    assert not retry.no_answer(chained(TimeoutError("timed out")))
    assert not retry.no_answer(RuntimeError("HTTP 500"))
