"""One request pool per job (inference/job_pool.py): the units of a plan (++output_dir, chunks x seeds) share
++max_concurrent_requests, so requests of different units are in flight together; each unit still writes, finishes
and merges its own files, and a job killed mid-run resumes exactly."""

from __future__ import annotations

import gc
import itertools
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from conftest import generate, problems, rows, samples_on_disk

from pipeline_kit.inference.job_pool import YOUNG_OBJECTS_PER_COLLECTION, fewer_collections

UNITS = "++units=[rs0_chunk_0,rs0_chunk_1,rs1_chunk_0,rs1_chunk_1]"


def plan(server, inp: Path, out: Path, *more: str) -> list[str]:
    return [
        f"++input_file={inp}",
        f"++output_dir={out}",
        f"++server.base_url={server.url}",
        "++server.model=stub",
        "++num_chunks=2",
        UNITS,
        *more,
    ]


def expected(n: int, seed: int) -> list[tuple[int, str]]:
    return [(i, f"\\boxed{{{i + seed}}}") for i in range(n)]


def test_units_of_a_job_share_one_pool_of_requests(stub, tmp_path):
    server = stub("--hold", "16", "--add_seed")  # no answer before all 16 requests arrived, however loaded the machine
    inp, out = problems(tmp_path, 8), tmp_path / "out"  # 4 units of 4 rows
    res = generate(*plan(server, inp, out, "++max_concurrent_requests=16"))
    assert res.returncode == 0, res.stderr
    sent = server.requests()
    assert len(sent) == 16
    # every request arrived while others were in flight: more than one unit's rows at once, of both seeds
    assert max(r["in_flight"] for r in sent) > 4, [r["in_flight"] for r in sent]
    # a seed-1 request arrived while a seed-0 one was in flight (more in flight than seed-1 requests had arrived,
    # the log being in arrival order): units one after another would send seed 1's only once seed 0's were written
    seed_one_so_far = itertools.accumulate(r["body"]["seed"] == 1 for r in sent)
    overlaps = [r["in_flight"] > n for r, n in zip(sent, seed_one_so_far, strict=True) if r["body"]["seed"] == 1]
    assert any(overlaps), [(r["body"]["seed"], r["in_flight"]) for r in sent]
    assert res.stderr.count("ready after") == 1  # the server is checked once per job
    for seed in (0, 1):
        merged = out / f"output-rs{seed}.jsonl"
        assert [(r["id"], r["generation"]) for r in rows(merged)] == expected(8, seed)
        assert Path(f"{merged}.done").exists()
    assert not list(out.glob("*_chunk_*")) and not list(out.glob("*.in-progress"))
    # done: a rerun requests nothing
    again = generate(*plan(server, inp, out, "++max_concurrent_requests=16"))
    assert again.returncode == 0 and again.stderr.count("is done; skipping") == 4, again.stderr
    assert len(server.requests()) == 16


def test_a_job_killed_mid_run_resumes_every_unit_exactly(stub, tmp_path):
    server = stub("--delay", "0.05", "--add_seed")
    inp, out = problems(tmp_path, 40), tmp_path / "out"  # 4 units of 20 rows
    args = plan(server, inp, out, "++max_concurrent_requests=8")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline_kit.inference.generate", *args], stderr=subprocess.PIPE)
    kill_at = random.randint(5, 40)  # at most half: units also finish one after another
    deadline = time.time() + 60
    while time.time() < deadline and samples_on_disk(out, (0, 1), 2, 20) < kill_at:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = len(server.requests())
    while time.sleep(0.2) or len(server.requests()) != first:  # requests still in the socket's backlog get logged late
        first = len(server.requests())
    kept = samples_on_disk(out, (0, 1), 2, 20)
    assert kill_at <= kept < 80

    res = generate(*args)
    assert res.returncode == 0, res.stderr
    asked = [(r["body"]["seed"], r["prompt"]) for r in server.requests()[first:]]
    assert len(asked) == 80 - kept and len(set(asked)) == len(asked)  # only the missing samples, each once
    for seed in (0, 1):
        merged = out / f"output-rs{seed}.jsonl"
        assert [(r["id"], r["generation"]) for r in rows(merged)] == expected(40, seed)  # complete, no duplicates
        assert Path(f"{merged}.done").exists()
    assert not list(out.glob("*_chunk_*")) and not list(out.glob("*.in-progress"))


def test_temp_files_a_killed_writer_left_are_removed_when_the_unit_runs_again(stub, tmp_path):
    """A SIGKILL during an atomic write leaves write_atomic's `.NAME.XXXXXXXX` behind; the unit's next run clears it
    (and nothing else of the folder)."""
    server = stub("--add_seed")
    inp, out = problems(tmp_path, 4), tmp_path / "out"
    out.mkdir()
    stale = [out / ".output-rs0_chunk_0.jsonl.k9x_2ab7", out / ".output-rs1.jsonl.zz01qq3m"]
    kept = [out / ".output-rs0_chunk_0.jsonl.notes", out / "mine.txt"]
    for path in stale + kept:
        path.write_text("half")
    res = generate(*plan(server, inp, out))
    assert res.returncode == 0, res.stderr
    assert not any(p.exists() for p in stale) and all(p.exists() for p in kept)


def test_the_collector_settings_of_the_pool_are_restored_after_it_even_when_it_fails():
    before = gc.get_threshold()
    try:
        with fewer_collections():
            assert gc.get_threshold() == (YOUNG_OBJECTS_PER_COLLECTION, *before[1:])
            raise RuntimeError("stopped mid-way")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before
