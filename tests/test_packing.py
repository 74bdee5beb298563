"""`--num_jobs=auto` and `kit plan`: units per job chosen from synthetic figures (the fewest GPU-hours within
--max_wall_ratio of the fastest plan's wall time on the free nodes; where they are unknown, the start-up share; the
time limit, --max_jobs), the measured and estimated paths with their stated assumptions, recorded queue waits, the
free nodes from sinfo, the FIFO queue model, the plan's lines from `kit plan generate|eval` and at the top of a dry
run, and bad flag values as one line. No services, but for the test marked slurm."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pipeline_kit.cluster.config import ClusterConfig
from pipeline_kit.jobs.options import JobOptions
from pipeline_kit.jobs.packing_plan import free_nodes, packing_plan, parse_num_jobs
from pipeline_kit.measurements import JobFigures, ServerKey, UnitFigures, figures_file, write_figures
from pipeline_kit.packing import (
    PackingLimits,
    choose_units_per_job,
    describe,
    makespan,
    plan_packing,
    plan_wall_s,
)
from pipeline_kit.packing_figures import CostFigures, estimated_figures, measured_queue_wait
from pipeline_kit.servers.base import ServerSpec

# the 70B case: start-up 6 min; a unit of 50 problems x 4,000 tokens at 1,200 tokens/s (166.7 s); 8 GPUs
BIG = CostFigures(360.0, 4000 / 1200, 50, 8, 1, "given")


def test_auto_packs_so_that_startup_is_at_most_the_share():
    k, why = choose_units_per_job(800, BIG, PackingLimits(0.1))
    assert k == 20 and "10%" in why  # 360 / (360 + 20 x 166.7) = 9.7%; 19 units would be 10.2%
    assert 360 / (360 + k * BIG.unit_s) <= 0.1 < 360 / (360 + (k - 1) * BIG.unit_s)
    assert choose_units_per_job(800, BIG, PackingLimits(0.25))[0] == 7


def test_auto_fits_the_time_limit_with_its_margin():
    k, why = choose_units_per_job(800, BIG, PackingLimits(0.1, time_limit_s=3600))
    assert k == 15 and "80% of the 1h00m time limit" in why  # (0.8 x 3600 - 360) / 166.7 = 15.1
    assert 360 + k * BIG.unit_s <= 0.8 * 3600
    k, why = choose_units_per_job(800, BIG, PackingLimits(0.1, time_limit_s=600))
    assert k == 1 and "does not fit" in why


def test_max_jobs_caps_the_jobs_even_past_the_time_limit():
    k, why = choose_units_per_job(800, BIG, PackingLimits(0.1, max_jobs=10, time_limit_s=3600))
    assert (k, why) == (80, "--max_jobs=10")
    assert plan_packing(800, BIG, PackingLimits(0.1, max_jobs=30)).jobs == 30  # 27 units per job: 30 jobs
    assert plan_packing(800, BIG, PackingLimits(0.1, max_jobs=100)).jobs == 40  # the share needs no more


@pytest.mark.parametrize(
    "figures, needle",
    [
        (CostFigures(360.0, None, 50, 8, 1, "x"), "seconds per unit are unknown"),
        (CostFigures(360.0, 1.0, None, 8, 1, "x"), "seconds per unit are unknown"),
        (CostFigures(0.0, 1.0, 50, 0, 1, "x"), "no server start-up"),
    ],
)
def test_without_a_basis_auto_keeps_one_unit_per_job(figures, needle):
    k, why = choose_units_per_job(40, figures, PackingLimits())
    assert k == 1 and needle in why


def test_a_multi_node_server_runs_every_unit_in_one_job():
    assert choose_units_per_job(40, CostFigures(360.0, 1.0, 50, 8, 2, "x"), PackingLimits())[0] == 40


def test_plan_costs_and_the_saving_against_one_unit_per_job():
    plan = plan_packing(800, BIG, PackingLimits(0.1))
    assert (plan.jobs, plan.units_per_job) == (40, 20)
    assert plan.startup_hours() == pytest.approx(40 * 360 * 8 / 3600)
    assert plan.generation_hours() == pytest.approx(800 * 166.667 * 8 / 3600, rel=1e-4)
    lines = describe(plan)
    assert lines[0] == "plan: 800 units in 40 jobs of 20 units (auto: start-up at most 10% of each job)"
    assert "expected GPU-hours: start-up 32, generation 296 (8 GPUs x 1 node per job)" in lines[1]
    saved = next(line for line in lines if "vs one unit per job" in line)
    assert "936 GPU-hours, 608 GPU-hours saved (65%)" in saved
    assert plan_packing(800, BIG, PackingLimits(), jobs=3).reason == "as given"


def test_makespan_starts_jobs_first_come_first_served_as_nodes_free_up():
    assert makespan([10, 10, 10, 10], 1, 2) == 20
    assert makespan([30, 10, 10, 10], 1, 2) == 30  # the short ones run beside the long one
    assert makespan([10, 10], 2, 3) == 20  # a job of two nodes waits for two
    assert makespan([10] * 5, 1, 100) == 10


def test_the_estimate_states_its_assumptions():
    figures = estimated_figures(2_000_000_000, 8, 1, 4000, 50.0)
    assert figures.startup_s == pytest.approx(120 + 4) and figures.seconds_per_sample == pytest.approx(4000 / 3200)
    assert figures.source == "estimated"
    assert figures.assumptions[0] == "start-up 120 s + weights at 500 MB/s (2 GB: 4 s)"
    assert "3200 tokens/s per server (400 per GPU x 8)" in figures.assumptions[1]
    cpu = estimated_figures(None, 0, 1, 100, None)
    assert "a CPU-only server" in cpu.assumptions[1] and "model folder not readable here" in cpu.assumptions[0]
    assert "samples per unit unknown" in cpu.assumptions[2]
    lines = describe(plan_packing(4, cpu, PackingLimits()))
    assert any("node-hours" in line and "GPU-hours: start-up 0, generation 0" in line for line in lines)


def test_num_jobs_values():
    assert parse_num_jobs("auto") == "auto" and parse_num_jobs("3") == 3 and parse_num_jobs(None) is None
    for bad in ("abc", "0", "1.5"):
        with pytest.raises(Exception, match="--num_jobs"):
            parse_num_jobs(bad)


def _figures(
    job_dir: Path,
    server: ServerKey,
    exp: str,
    startup: float,
    seconds: float,
    samples: int = 10,
    queue_wait: float = 1.0,
    partition: str = "",
):
    units = (UnitFigures("rs0_chunk_0", samples, samples * 100, seconds),)
    figures = JobFigures(server, "p", 64, startup, queue_wait, seconds, units, exp, "gen", job_started_at=1e9,
                         partition=partition)  # fmt: skip
    write_figures(figures_file(job_dir / "logs" / exp / "run1", "gen"), figures)


def test_measured_figures_are_the_median_of_the_last_jobs(tmp_path):
    job_dir = tmp_path / "jobs"
    key = ServerKey("/models/m", "vllm", 8, 1)
    for i, (startup, seconds) in enumerate([(999, 999), (300, 10), (360, 20), (420, 30)]):
        _figures(job_dir, key, f"e{i}", startup, seconds)
    _figures(job_dir, ServerKey("/models/other", "vllm", 8, 1), "other", 1, 1)
    (tmp_path / "in.jsonl").write_text("{}\n" * 100)
    cluster = ClusterConfig("c.yaml", "slurm", str(job_dir), timeouts={"gpu": "04:00:00"}, partition="gpu")
    server = ServerSpec("vllm", "/models/m", gpus=8)
    work = [(str(tmp_path / "in.jsonl"), 10, 400, ())]
    plan = packing_plan(cluster, server, work, JobOptions("gen"), None)
    assert plan.figures.source == "measured 4 times (/models/m on vllm, 8 GPU(s) x 1 node(s))"
    assert plan.figures.startup_s == pytest.approx(390) and plan.figures.seconds_per_sample == pytest.approx(2.5)
    assert plan.figures.samples_per_unit == 10  # 100 rows / 10 chunks
    assert plan.time_limit_s == 4 * 3600
    assert plan.jobs == 3  # 390 x 0.9 / (0.1 x 25 s per unit) = 140.4 -> 141 units per job -> 3 jobs of 134 or 133
    assert packing_plan(cluster, server, work, JobOptions("gen"), 4).jobs == 4
    assert packing_plan(ClusterConfig("n.yaml", "none", str(job_dir)), server, work, JobOptions("g"), None).jobs == 1


@pytest.fixture
def measured_cluster(configs, tmp_path):
    """A Slurm config with a 4-hour partition, measured figures for /models/m (8 GPUs), and a 100-row input."""
    d = configs(
        "gpu", "executor: slurm\njob_dir: JOB_DIR\naccount: acct\npartition: gpu\ntimeouts:\n  gpu: '04:00:00'\n"
    )
    for i in range(3):
        _figures(configs.job_dir, ServerKey("/models/m", "vllm", 8, 1), f"e{i}", 360, 50, samples=5)
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"problem": f"{i}+1"}) + "\n" for i in range(100)))
    common = ["--cluster=gpu", f"--config_dir={d}", "--model=/models/m", "--server_gpus=8"]
    return [*common, f"--input_file={inp}", f"--output_dir={tmp_path / 'out'}"]


def test_kit_plan_generate_prints_the_plan_and_submits_nothing(kit, measured_cluster, tmp_path):
    res = kit("plan", "generate", *measured_cluster, "--num_chunks=20", "--num_random_seeds=2", "--nodes_free=4")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    # 10 s per sample x 5 samples = 50 s per unit, start-up 360 s, 4 free nodes: the fastest is 4 jobs of 10 units
    # (360 + 500 s = 14m20s); 3 jobs of 14 or 13 take 360 + 700 s = 17m40s, 1.23x; 2 jobs (1.58x) would be too slow
    want = "plan: 40 units in 3 jobs of 14 or 13 units (auto: the fewest GPU-hours within 1.25x the fastest plan's wall"
    assert lines[0] == want + " time)"
    assert lines[1].startswith("plan: expected GPU-hours: start-up 2.4, generation 4.44 (8 GPUs x 1 node per job)")
    assert lines[2] == (
        "plan: expected wall time: 17m40s on 4 free nodes (--nodes_free), no queue wait recorded for partition gpu "
        "(counted as 0); longest job 17m40s of a 4h00m limit"
    )
    assert lines[3] == (
        "plan: chosen:  3 jobs of 14 or 13 units, 6.84 GPU-hours, wall time 17m40s (1.23x the fastest plan's wall time)"
    )
    assert lines[4] == "plan: fastest: 4 jobs of 10 units, 7.64 GPU-hours, wall time 14m20s"
    assert lines[5] == (  # the next plan a larger ratio buys: 2 jobs, 360 + 1000 s = 22m40s, 1.581x
        "plan: cheaper: 2 jobs of 20 units, 6.04 GPU-hours, wall time 22m40s (-12% GPU-hours vs chosen; "
        "--max_wall_ratio=1.59 allows it)"
    )
    assert "vs one unit per job (40 jobs): 36.4 GPU-hours, 29.6 GPU-hours saved (81%)" in lines[6]
    assert lines[7] == "plan: figures: measured 3 times (/models/m on vllm, 8 GPU(s) x 1 node(s))"
    assert not (tmp_path / "out").exists() and not (tmp_path / "jobs" / "experiments").exists()
    ratio = kit("plan", "generate", *measured_cluster, "--num_chunks=20", "--num_random_seeds=2", "--nodes_free=4",
                "--max_wall_ratio=1.1")  # fmt: skip
    assert ratio.stdout.startswith("plan: 40 units in 4 jobs of 10 units (auto: the fewest GPU-hours within 1.1x")
    assert "plan: fastest: 4 jobs of 10 units" in ratio.stdout  # the fastest is the choice: both are printed
    assert "plan: cheaper: 3 jobs of 14 or 13 units, 6.84 GPU-hours, wall time 17m40s (-10% GPU-hours vs chosen; " \
        "--max_wall_ratio=1.24 allows it)" in ratio.stdout  # fmt: skip
    # no --nodes_free: sinfo lists no partition gpu (or there is no sinfo): the start-up share and the time limit
    short = [*measured_cluster, "--num_chunks=20", "--num_random_seeds=2", "--time_min=00:13:00"]
    res = kit("plan", "generate", *short)  # (0.8 x 780 s - 360) / 50 = 5.3 units fit
    assert res.stdout.startswith("plan: 40 units in 8 jobs of 5 units (auto: each job within 80% of the 13m00s time")
    [unknown] = [line for line in res.stdout.splitlines() if "free nodes unknown" in line]
    assert re.fullmatch(
        r"plan: free nodes unknown \((sinfo lists no partition gpu|sinfo cannot be run here)\): the wall time is for "
        r"as many nodes as the jobs, and auto packs by the start-up share and the time limit; --nodes_free=N trades "
        r"GPU-hours for wall time",
        unknown,
    ), unknown
    res = kit("plan", "generate", *short, "--max_jobs=4")
    assert res.stdout.startswith("plan: 40 units in 4 jobs of 10 units (auto: --max_jobs=4)")


def test_a_dry_run_starts_with_the_plan_and_auto_packs_the_array(kit, measured_cluster):
    short = [*measured_cluster, "--num_chunks=20", "--num_random_seeds=2", "--time_min=00:13:00"]
    res = kit("generate", *short, "--dry_run")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("plan: 40 units in 8 jobs of 5 units")
    assert re.findall(r"^#SBATCH --array=(\S+)", res.stdout, re.M) == ["0-7"]
    given = kit("generate", *measured_cluster, "--num_chunks=20", "--num_random_seeds=2", "--num_jobs=40", "--dry_run")
    assert given.stdout.startswith("plan: 40 units in 40 jobs (as given)")
    assert re.findall(r"^#SBATCH --array=(\S+)", given.stdout, re.M) == ["0-39"]


def test_kit_plan_eval_packs_across_benchmarks(kit, configs, tmp_path):
    data = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data}").returncode == 0
    d = configs("gpu", "executor: slurm\njob_dir: JOB_DIR\naccount: acct\npartition: gpu\n")
    args = ["--cluster=gpu", f"--config_dir={d}", "--model=/models/m", "--server_gpus=8", f"--data_dir={data}"]
    res = kit("plan", "eval", *args, "--benchmarks=arith:8", f"--output_dir={tmp_path / 'out'}", "--num_chunks=4")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("plan: 32 units in ")
    assert "GPU-hours" in res.stdout and "plan: figures: estimated" in res.stdout


@pytest.mark.parametrize(
    "flag, needle",
    [
        ("--max_startup_share=2", "--max_startup_share=2.0 is not a share between 0 and 1"),
        ("--num_jobs=abc", "--num_jobs=abc is not a whole number or 'auto'"),
        ("--max_jobs=0", "--max_jobs=0 must be at least 1"),
        ("--nodes_free=0", "--nodes_free=0 must be at least 1"),
        ("--max_wall_ratio=0.9", "--max_wall_ratio=0.9 must be at least 1.0"),
        ("--max_wall_ratio=nan", "--max_wall_ratio=nan must be at least 1.0"),
    ],
)
def test_a_bad_packing_flag_is_one_line(kit, measured_cluster, flag, needle):
    for command in (["plan", "generate"], ["generate", "--dry_run"]):
        res = kit(*command, *measured_cluster, flag)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert needle in res.stderr


def test_a_bad_wall_ratio_is_one_line_in_eval_and_simulate(kit, configs, tmp_path):
    d = configs("gpu", "executor: slurm\njob_dir: JOB_DIR\naccount: acct\npartition: gpu\n")
    args = ["--cluster=gpu", f"--config_dir={d}", "--model=/models/m", "--benchmarks=arith:8", "--max_wall_ratio=0.5"]
    for res in (
        kit("plan", "eval", *args, f"--output_dir={tmp_path / 'out'}"),
        kit("eval", *args, f"--output_dir={tmp_path / 'out'}", "--dry_run"),
        kit("plan", "simulate", "--max_wall_ratio=0.5"),
    ):
        assert res.returncode == 2 and res.stderr.strip().splitlines() == [
            "kit: error: --max_wall_ratio=0.5 must be at least 1.0 (a wall time at most this many times the fastest "
            "plan's); e.g. 1.25."
        ], res.stderr


def _fastest_wall(units: int, figures: CostFigures, limits: PackingLimits, free: int) -> float:
    """The least wall time of any number of jobs whose units fit the time limit (every one, not only the model's
    candidates)."""
    fit = int((limits.margin * limits.time_limit_s - figures.startup_s) // figures.unit_s)
    return min(plan_wall_s(units, figures, jobs, free) for jobs in range(-(-units // fit), units + 1))


@pytest.mark.parametrize("free", [8, 32, 128, 800])
def test_the_70b_simulation_saves_30_percent_of_the_gpu_hours_within_the_wall_ratio(free):
    """Issue 36's acceptance on the pure model: the 70B case after a 5-minute queue wait (kit plan simulate
    --queue_wait_min 5): at least 30% fewer GPU-hours than one unit per job, wall time at most 1.25x the fastest."""
    figures = CostFigures(360.0, 4000 / 1200, 50, 8, 1, "given", queue_wait_s=300.0, queue_source="given")
    limits = PackingLimits(time_limit_s=4 * 3600)
    auto = plan_packing(800, figures, limits, nodes_free=free)
    one_per_unit = plan_packing(800, figures, limits, jobs=800, nodes_free=free)
    assert auto.gpu_hours() <= 0.7 * one_per_unit.gpu_hours()
    fastest = _fastest_wall(800, figures, limits, free)
    assert auto.wall_s() <= 1.25 * fastest and auto.wall_s(auto.fastest_jobs) == pytest.approx(fastest)
    assert max(auto.durations()) <= 0.8 * 4 * 3600


def test_without_a_queue_wait_all_units_at_once_leave_nothing_to_trade():
    """800 free nodes, no queue wait: one unit per job takes 6 + 2.8 min; any job of 2 units takes 6 + 5.6 min
    (1.32x), so auto keeps one unit per job: the wall ratio holds, the GPU-hours are not saved. Below, it saves."""
    figures = CostFigures(360.0, 4000 / 1200, 50, 8, 1, "given")
    limits = PackingLimits(time_limit_s=4 * 3600)
    auto = plan_packing(800, figures, limits, nodes_free=800)
    assert (auto.jobs, auto.fastest_jobs, auto.cheaper_jobs) == (800, 800, 400)
    assert describe(auto)[5] == (  # what a user who would wait 1.32x for it is told
        "plan: cheaper: 400 jobs of 2 units, 616 GPU-hours, wall time 11m33s (-34% GPU-hours vs chosen; "
        "--max_wall_ratio=1.32 allows it)"
    )
    assert plan_packing(800, figures, replace(limits, max_wall_ratio=1.32), nodes_free=800).jobs == 400
    assert plan_wall_s(800, figures, 400, 800) / auto.wall_s() == pytest.approx(
        (360 + 2 * BIG.unit_s) / (360 + BIG.unit_s)
    )
    for free in (8, 32, 128):
        packed = plan_packing(800, figures, limits, nodes_free=free)
        assert packed.gpu_hours() <= 0.7 * plan_packing(800, figures, limits, jobs=800).gpu_hours()
        assert packed.wall_s() <= 1.25 * _fastest_wall(800, figures, limits, free)


def test_the_wall_ratio_trades_gpu_hours_for_wall_time():
    figures, limits = BIG, PackingLimits(time_limit_s=4 * 3600)
    plans = [plan_packing(800, figures, replace(limits, max_wall_ratio=r), nodes_free=128) for r in (1.0, 1.25, 3)]
    assert [p.jobs for p in plans] == [115, 89, 32]  # 7, 9 and 25 units per job
    assert [p.fastest_jobs for p in plans] == [115, 115, 115]
    hours = [p.gpu_hours() for p in plans]
    walls = [p.wall_s() for p in plans]
    assert hours == sorted(hours, reverse=True) and walls == sorted(walls)
    assert walls[2] <= 3 * walls[0]
    lines = describe(plans[1])
    assert "plan: chosen:  89 jobs of 9 or 8 units, 367 GPU-hours, wall time 31m00s (1.22x the fastest" in lines[3]
    assert lines[4] == "plan: fastest: 115 jobs of 7 or 6 units, 388 GPU-hours, wall time 25m27s"


def test_a_queue_wait_is_part_of_the_wall_time():
    waited = replace(BIG, queue_wait_s=600.0, queue_source="the median of 3 submissions")
    plan = plan_packing(800, waited, PackingLimits(time_limit_s=4 * 3600), nodes_free=800)
    assert plan.wall_s() == pytest.approx(600 + 360 + plan.units_per_job * BIG.unit_s)
    assert (plan.jobs, plan.units_per_job) == (400, 2)  # (600 + 693) / (600 + 527) = 1.15 <= 1.25; 3 units: 1.29
    assert "queue wait 10m00s included (the median of 3 submissions)" in describe(plan)[2]


def test_the_recorded_queue_wait_is_the_median_of_the_submissions_first_starts():
    key = ServerKey("/models/m", "vllm", 8, 1)

    def job(exp: str, element: str, wait: float, started: float, partition: str = "gpu") -> JobFigures:
        return JobFigures(key, "p", 64, 1, wait, 1, (), exp, "gen", element=element, job_started_at=started,
                          partition=partition)  # fmt: skip

    jobs = [
        job("a", "0", 100, 1100),
        job("a", "1", 900, 1900),  # the same submission (at 1000): it waited for the run's own jobs
        job("b", "0", 300, 5300),
        job("c", "0", 50, 9050),
        job("d", "0", 999, 9999, partition="cpu"),  # another partition's
        job("e", "0", 1, 2, partition=""),  # an older kit's file, or a job off Slurm
    ]
    assert measured_queue_wait(jobs, "gpu") == (100, "the median of 3 submissions to partition gpu recorded here")
    assert measured_queue_wait(jobs, "other") is None and measured_queue_wait(jobs, None) is None


def test_kit_plan_simulate_prints_the_table(kit):
    res = kit("plan", "simulate", "--nodes_free=128")
    assert res.returncode == 0, res.stderr
    assert (
        "| 128 | **auto** | 89 | 9 | 367 (71 + 296) | 0.52 h | -61% GPU-hours, 0.50x wall | 1.22x wall |" in res.stdout
    )
    assert (
        "| 128 | fastest | 115 | 7 | 388 (92 + 296) | 0.42 h | -59% GPU-hours, 0.41x wall | 1.00x wall |" in res.stdout
    )
    waited = kit("plan", "simulate", "--nodes_free=800", "--queue_wait_min=5")
    assert "queue wait 5m00s" in waited.stdout
    assert "| 800 | **auto** | 400 | 2 | 616 (320 + 296) | 0.28 h | -34% GPU-hours, 1.20x wall | 1.20x wall |" in (
        waited.stdout
    )
    bad = kit("plan", "simulate", "--nodes_free=a")
    assert bad.returncode == 2 and "--nodes_free=a is not whole numbers" in bad.stderr


def _sinfo(tmp_path: Path, monkeypatch, script: str) -> ClusterConfig:
    """A stand-in `sinfo` alone on PATH; a Slurm cluster config."""
    sinfo = tmp_path / "sinfo"
    sinfo.write_text(script)
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))  # only this one: not the real sinfo
    return ClusterConfig(source="t.yaml", executor="slurm", job_dir=str(tmp_path))


def test_a_sinfo_that_cannot_run_leaves_the_free_nodes_unknown(tmp_path, monkeypatch):
    """A sinfo that cannot be started (here: a broken interpreter line) is no error: the free nodes are unknown."""
    cluster = _sinfo(tmp_path, monkeypatch, "#!/nonexistent/interpreter\n")
    assert free_nodes(cluster, "debug") == (None, "sinfo cannot be run here")


@pytest.mark.parametrize(
    "printed, want",
    [
        (
            "2 idle\n3 mixed\n1 idle*\n4 allocated\n5 idle\n",
            (7, "idle now in partition debug, from sinfo; --nodes_free=N"),
        ),
        ("3 mixed\n", (None, "no node of partition debug is idle now (sinfo)")),
        ("", (None, "sinfo lists no partition debug")),
    ],
)
def test_the_free_nodes_are_the_partitions_idle_ones(tmp_path, monkeypatch, printed, want):
    cluster = _sinfo(tmp_path, monkeypatch, f"#!/bin/sh\n[ \"$*\" = '-h -o %D %T -p debug' ] && printf '{printed}'\n")
    free, source = free_nodes(cluster, "debug")
    assert free == want[0] and source.startswith(want[1]), source
    local = ClusterConfig(source="n.yaml", executor="none", job_dir=str(tmp_path))
    assert free_nodes(local, None) == (1, "executor none runs the jobs one after another on this machine")


@pytest.mark.slurm
def test_kit_plan_on_the_local_slurm_packs_as_the_simulation_says(kit, configs, tmp_path):
    """A server measured in partition debug (start-up 6 min, 10 s per sample, a recorded queue wait of 2 min):
    `kit plan generate` without --nodes_free asks sinfo for the idle nodes of the local Slurm and picks the packing
    `kit plan simulate` gives for the same figures and free nodes."""
    from conftest import need

    need("SLURM_CONF", "the local Slurm cluster")
    d = configs(
        "slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\ntimeouts:\n  debug: '04:00:00'\n"
    )
    key = ServerKey("/models/m", "vllm", 8, 1)
    for i in range(3):
        _figures(configs.job_dir, key, f"e{i}", 360, 50, samples=5, queue_wait=120, partition="debug")
    inp = tmp_path / "in.jsonl"
    inp.write_text("".join(json.dumps({"problem": f"{i}+1"}) + "\n" for i in range(100)))
    args = ["--cluster=slurm", f"--config_dir={d}", "--model=/models/m", "--server_gpus=8", f"--input_file={inp}",
            f"--output_dir={tmp_path / 'out'}", "--num_chunks=20", "--num_random_seeds=2"]  # fmt: skip
    for _ in range(60):  # other users of the shared cluster may hold every node for a while
        res = kit("plan", "generate", *args)
        assert res.returncode == 0, res.stderr
        free = re.search(r"on (\d+) free nodes? \(idle now in partition debug, from sinfo", res.stdout)
        if free:
            break
        time.sleep(2)
    assert free, res.stdout
    assert "queue wait 2m00s included (the median of 3 submissions to partition debug recorded here)" in res.stdout
    jobs, per_job = re.search(r"^plan: 40 units in (\d+) jobs?(?: of (\d+))?", res.stdout, re.M).groups()
    table = kit("plan", "simulate", "--units=40", "--startup_min=6", "--tokens_per_s=1", "--tokens_per_problem=10",
                "--problems_per_unit=5", "--gpus=8", f"--nodes_free={free[1]}", "--queue_wait_min=2",
                "--time_limit_h=4")  # fmt: skip
    assert table.returncode == 0, table.stderr
    row = re.search(rf"^\| {free[1]} \| \*\*auto\*\* \| (\d+) \| (\d+) \|", table.stdout, re.M)
    assert (int(jobs), int(per_job or 40)) == (int(row[1]), int(row[2])), res.stdout + table.stdout
