"""Measurements that generation jobs write as they run (inference/job_figures.py): a `kit generate` whose server kit
started records its start-up, queue wait and each unit's samples and tokens, and `kit status --verbose` shows them;
a job killed mid-run keeps the figures of the units it finished; a second client of the same job (kit eval's
benchmarks in turn) writes its own file without a start-up."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

from conftest import generate_config, problems, stub_server_type

from pipeline_kit.inference.job_figures import FiguresRecorder
from pipeline_kit.launch import figures as launch_figures
from pipeline_kit.launch.records import ExperimentRecord, JobRecord
from pipeline_kit.measurements import (
    JobFigures,
    ServerKey,
    UnitFigures,
    experiment_figures,
    figures_file,
    read_figures,
    stored_figures,
    write_figures,
)

STUB = Path(__file__).parent / "stub_openai_server.py"
STUB_TOKENS = 3  # completion tokens the stub reports per request


def test_a_generation_job_records_its_figures_and_kit_status_shows_them(kit, none_cluster, configs, tmp_path):
    inp, out = problems(tmp_path, 10), tmp_path / "out"
    env = stub_server_type(tmp_path, tmp_path / "requests.jsonl")
    args = [*none_cluster, "--server_type=stub_type:STUB", "--model=stub", f"--input_file={inp}", f"--output_dir={out}"]
    res = kit("generate", *args, "--num_chunks=2", "--num_random_seeds=2", "--expname=measured", env=env)
    assert res.returncode == 0, res.stdout + res.stderr

    [figures] = stored_figures(configs.job_dir)  # one job on none: its 4 units through one server
    assert figures.server == ServerKey("stub", "stub_type:STUB", 0, 1)
    assert (figures.expname, figures.job, figures.element, figures.prompt) == (
        "measured",
        "measured",
        "0",
        "generic/default",
    )
    assert sorted(u.label for u in figures.units) == ["rs0_chunk_0", "rs0_chunk_1", "rs1_chunk_0", "rs1_chunk_1"]
    assert all(u.samples == 5 and u.tokens == 5 * STUB_TOKENS and u.seconds > 0 for u in figures.units)
    assert figures.startup_s is not None and 0 < figures.startup_s < 60  # kit started the server
    assert figures.queue_wait_s is not None and 0 <= figures.queue_wait_s < 60
    assert 0 < figures.generation_s and figures.seconds_per_sample == figures.generation_s / 20

    res = kit("status", "--verbose", "measured", *none_cluster)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0] == "measured SUCCEEDED"
    assert lines[1].startswith(f"  measured[0]: start-up {figures.startup_s:.1f} s, queue wait ")
    assert "stub on stub_type:STUB, 0 GPU(s) x 1 node(s), prompt generic/default" in lines[1]
    units = sorted(line.strip() for line in lines[2:])
    assert len(units) == 4 and units[0].startswith("rs0_chunk_0: 5 samples, 15 tokens, "), units
    assert all(line.endswith(" tokens/s, 0 retries") and " samples/s, " in line for line in units)
    assert kit("status", "measured", *none_cluster).stdout == "measured SUCCEEDED\n"  # without --verbose: as before


def test_status_of_a_rerun_that_had_nothing_to_do_shows_the_last_run_that_generated(
    kit, none_cluster, configs, tmp_path
):
    """A rerun whose units were all done records that it had nothing to do; `kit status --verbose` says so and shows
    the figures of the last run that generated, not an empty job."""
    inp, out = problems(tmp_path, 4), tmp_path / "out"
    env = stub_server_type(tmp_path, tmp_path / "requests.jsonl")
    args = [*none_cluster, "--server_type=stub_type:STUB", "--model=stub", f"--input_file={inp}", f"--output_dir={out}"]
    args += ["--num_random_seeds=2", "--expname=again"]
    assert kit("generate", *args, env=env).returncode == 0
    first = kit("status", "--verbose", "again", *none_cluster).stdout.splitlines()
    assert first[0] == "again SUCCEEDED" and sorted(line.split(":")[0].strip() for line in first[2:]) == ["rs0", "rs1"]
    [first_run] = [p.stem for p in (configs.job_dir / "kit" / "again").glob("*.json")]
    requests = (tmp_path / "requests.jsonl").read_text()

    # on none a rerun with every unit done submits nothing, unless something waits on it: a dependent job here
    rerun = kit("generate", *args, "--dependent_jobs=1", env=env)
    assert rerun.returncode == 0 and "nothing to generate" in rerun.stderr, rerun.stderr
    assert (tmp_path / "requests.jsonl").read_text() == requests  # it asked the server nothing
    runs = sorted(p.stem for p in (configs.job_dir / "kit" / "again").glob("*.json"))
    assert len(runs) == 2 and runs[0] == first_run
    assert len(stored_figures(configs.job_dir)) == 1  # its job found every unit done: no client ran, no figures

    shown = kit("status", "--verbose", "again", *none_cluster)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert lines[0] == "again SUCCEEDED"
    assert lines[1] == (
        f"  again: this run had nothing to do (it requested no samples); below, run {first_run}, the last that "
        "generated:"
    )
    assert lines[2:] == first[1:]  # the first run's figures, as its own status showed them
    assert kit("status", "again", *none_cluster).stdout == "again SUCCEEDED\n"


def job_env(tmp_path: Path, started: float, submitted: float) -> dict[str, str]:
    """What a kit job script exports to its commands (pipeline/render.py)."""
    return {
        **os.environ,
        "KIT_LOG_DIR": str(tmp_path / "logs"),
        "KIT_EXPNAME": "exp",
        "KIT_JOB": "gen",
        "KIT_UNIT": "3",
        "KIT_JOB_START": f"{started:.3f}",
        "KIT_SUBMITTED_AT": f"{submitted:.3f}",
    }


def generation(server, inp: Path, out: Path, *more: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "pipeline_kit.inference.generate",
        f"++input_file={inp}",
        f"++output_dir={out}",
        f"++server.base_url={server.url}",
        "++server.model=stub",
        "++server.server_type=vllm",
        "++server.gpus=8",
        "++num_chunks=4",
        *more,
    ]


def test_a_job_killed_mid_run_keeps_the_figures_of_the_units_it_finished(stub, tmp_path):
    server = stub("--delay", "0.2")
    inp = problems(tmp_path, 8)  # 4 units of 2 rows, one request at a time: 0.4 s per unit
    started = time.time() - 5  # the server (its log says kit started it) took 5 s and more to answer
    env = job_env(tmp_path, started, submitted=started - 2)
    env |= {"SLURM_JOB_PARTITION": "cpu", "SLURM_JOB_PARTITION_HET_GROUP_0": "gpu"}  # a het job's client, in cpu
    argv = generation(server, inp, tmp_path / "out", "++max_concurrent_requests=1", f"++server.server_log={tmp_path}/s")
    proc = subprocess.Popen(argv, env=env, stderr=subprocess.PIPE)
    path = figures_file(tmp_path / "logs", "gen", "3")
    deadline = time.time() + 60
    while time.time() < deadline and not ((f := read_figures(path)) and len(f.units) >= 2):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()

    kept = read_figures(path)
    assert kept is not None and 2 <= len(kept.units) < 4, kept
    assert [u.label for u in kept.units] == ["chunk_0", "chunk_1", "chunk_2"][: len(kept.units)]
    assert all(u.samples == 2 and u.tokens == 2 * STUB_TOKENS and u.seconds >= 0.4 for u in kept.units)
    assert kept.server == ServerKey("stub", "vllm", 8, 1) and kept.max_concurrent_requests == 1
    assert kept.startup_s >= 5 and kept.queue_wait_s == 2.0 and kept.generation_s >= 0.8
    assert (kept.expname, kept.job, kept.element, kept.job_started_at) == ("exp", "gen", "3", round(started, 3))
    assert kept.partition == "gpu"  # the server's component: the queue the job waited in

    # the rest, by a second client of the same job (as kit eval runs its benchmarks in turn): its own file, and no
    # start-up (the first one paid it)
    res = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    second = read_figures(figures_file(tmp_path / "logs", "gen", "3.2"))
    assert second is not None and second.startup_s is None and second.element == "3.2"
    # (a unit whose last sample was written just before the kill has nothing left to request: no figures of it)
    first_labels, second_labels = {u.label for u in kept.units}, {u.label for u in second.units}
    assert not first_labels & second_labels and len(first_labels | second_labels) >= 3
    assert read_figures(path) == kept
    assert [f.element for f in experiment_figures(tmp_path / "logs")] == ["3", "3.2"]


def test_a_client_that_finds_every_unit_done_records_that_it_had_nothing_to_do(stub, tmp_path):
    """Where the job's client runs though every unit is done (the outputs were not visible at submission, a
    --dependent_jobs copy): its figures have no units and count the units done before (`nothing_to_do`)."""
    server = stub()
    inp = problems(tmp_path, 4)
    argv = generation(server, inp, tmp_path / "out")
    first = time.time()
    assert subprocess.run(argv, env=job_env(tmp_path, first, first), capture_output=True).returncode == 0
    did = read_figures(figures_file(tmp_path / "logs", "gen", "3"))
    assert len(did.units) == 4 and did.units_done_before == 0 and not did.nothing_to_do
    requests = len(server.requests())
    rerun = job_env(tmp_path, first + 10, first + 10)  # a later job (another start): it writes the same file
    res = subprocess.run(argv, env=rerun, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert len(server.requests()) == requests  # nothing asked
    idle = read_figures(figures_file(tmp_path / "logs", "gen", "3"))
    assert (idle.units, idle.units_done_before, idle.nothing_to_do) == ((), 4, True)
    assert idle.startup_s is None and idle.generation_s == 0 and idle.job_started_at == round(first + 10, 3)


def test_without_kit_log_dir_nothing_is_written_and_a_folder_it_cannot_write_is_one_line(tmp_path):
    cfg = generate_config(tmp_path, "++server.model=stub", "++server.server_log=s.log")
    said: list[str] = []
    off = FiguresRecorder(cfg, environ={}, say=said.append)  # the script run by hand
    off.server_ready()
    off.unit_done("o.jsonl", 1, 3, 0.5)
    assert off.path is None and not said
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the log folder should be")
    recorder = FiguresRecorder(cfg, {**job_env(tmp_path, 1.0, 1.0), "KIT_LOG_DIR": str(blocked)}, said.append)
    recorder.server_ready()
    for _ in range(3):
        recorder.unit_done("o.jsonl", 1, 3, 0.5)  # the job goes on
    assert len(said) == 1 and "cannot write the job's measurements" in said[0], said


def test_status_reads_the_figures_of_a_remote_log_folder_over_ssh(tmp_path, monkeypatch):
    """Over an SSH tunnel the log folder is the cluster's: the figures come back through one remote command."""
    log_dir = tmp_path / "logs" / "exp" / "run1"
    units = (UnitFigures("rs0", 4, 40, 2.0),)
    server = ServerKey("/models/m", "vllm", 8, 2)
    for element in ("10", "2", "2.2"):
        figures = JobFigures(server, "generic/math", 64, 300.0, 12.0, 2.5, units, "exp", "gen", element=element)
        write_figures(figures_file(log_dir, "gen", element), figures)
    (log_dir / "measurements" / "gen.bad.json").write_text("{half")
    ran = []

    def remote_run(cluster, command, check=True):
        ran.append(command)
        return subprocess.run(["bash", "-c", command], capture_output=True, text=True)

    monkeypatch.setattr(launch_figures, "remote_run", remote_run)
    record = ExperimentRecord("exp", "run1", "slurm", str(log_dir), jobs=[JobRecord("gen", "t", ["g"], 3)])
    found = launch_figures.job_figures(SimpleNamespace(ssh_tunnel=object()), record)
    assert len(ran) == 1 and [f.element for f in found["gen"]] == ["2", "2.2", "10"]
    assert found == launch_figures.job_figures(SimpleNamespace(ssh_tunnel=None), record)  # as read here
