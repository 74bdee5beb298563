"""`--num_jobs=auto` and `kit plan`: units per job chosen from synthetic figures (start-up share, time limit,
--max_jobs), the measured and estimated paths with their stated assumptions, the FIFO queue model, the plan's lines
from `kit plan generate|eval` and at the top of a dry run, and bad flag values as one line. No services."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from pipeline_kit.cluster.config import ClusterConfig
from pipeline_kit.jobs.options import JobOptions
from pipeline_kit.jobs.packing_plan import packing_plan, parse_num_jobs
from pipeline_kit.measurements import JobFigures, ServerKey, UnitFigures, figures_file, write_figures
from pipeline_kit.packing import (
    CostFigures,
    PackingLimits,
    choose_units_per_job,
    describe,
    estimated_figures,
    makespan,
    plan_packing,
)
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


def _figures(job_dir: Path, server: ServerKey, exp: str, startup: float, seconds: float, samples: int = 10):
    units = (UnitFigures("rs0_chunk_0", samples, samples * 100, seconds),)
    write_figures(
        figures_file(job_dir / "logs" / exp / "run1", "gen"), JobFigures(server, "p", 64, startup, 1.0, seconds, units)
    )


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
    # 10 s per sample x 5 samples = 50 s per unit; 360 x 0.9 / (0.1 x 50) = 64.8 -> every unit in one job
    assert lines[0] == "plan: 40 units in 1 job (auto: start-up at most 10% of each job)"
    assert lines[1].startswith("plan: expected GPU-hours: start-up 0.8, generation 4.44 (8 GPUs x 1 node per job)")
    assert lines[2].startswith("plan: expected wall time: 39m20s on 4 free nodes (--nodes_free); longest job 39m20s")
    assert "vs one unit per job (40 jobs): 36.4 GPU-hours, 31.2 GPU-hours saved (86%)" in lines[3]
    assert lines[4] == "plan: figures: measured 3 times (/models/m on vllm, 8 GPU(s) x 1 node(s))"
    assert not (tmp_path / "out").exists() and not (tmp_path / "jobs" / "experiments").exists()
    short = [*measured_cluster, "--num_chunks=20", "--num_random_seeds=2", "--time_min=00:13:00"]
    res = kit("plan", "generate", *short)  # (0.8 x 780 s - 360) / 50 = 5.3 units fit
    assert res.stdout.startswith("plan: 40 units in 8 jobs of 5 units (auto: each job within 80% of the 13m00s time")
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
    ],
)
def test_a_bad_packing_flag_is_one_line(kit, measured_cluster, flag, needle):
    for command in (["plan", "generate"], ["generate", "--dry_run"]):
        if flag.startswith("--nodes_free") and command[0] != "plan":
            continue
        res = kit(*command, *measured_cluster, flag)
        assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
        assert needle in res.stderr


def test_the_70b_simulation_saves_gpu_hours_within_the_wall_time_at_a_realistic_scale():
    figures = CostFigures(360.0, 4000 / 1200, 50, 8, 1, "given")
    limits = PackingLimits(0.1, None, 4 * 3600)
    auto, one_per_unit = (
        plan_packing(800, figures, limits, nodes_free=128),
        plan_packing(800, figures, limits, jobs=800),
    )
    hours = auto.startup_hours() + auto.generation_hours()
    baseline = one_per_unit.startup_hours() + one_per_unit.generation_hours()
    assert hours <= 0.7 * baseline and auto.wall_s() <= 1.2 * one_per_unit.wall_s(nodes_free=128)
    assert auto.wall_s(nodes_free=800) > 1.2 * one_per_unit.wall_s(nodes_free=800)  # all units at once: not so


def test_kit_plan_simulate_prints_the_table(kit):
    res = kit("plan", "simulate", "--nodes_free=128")
    assert res.returncode == 0, res.stderr
    assert "| 128 | auto | 40 | 20 | 328 (32 + 296) | 1.03 h | -65% GPU-hours, 1.00x wall |" in res.stdout
    bad = kit("plan", "simulate", "--nodes_free=a")
    assert bad.returncode == 2 and "--nodes_free=a is not whole numbers" in bad.stderr


def test_a_sinfo_that_cannot_run_leaves_the_free_nodes_unknown(tmp_path, monkeypatch):
    """`kit plan` on Slurm asks sinfo for idle nodes; a sinfo that cannot be started (here: a broken interpreter
    line) is no error: the wall time is planned for as many nodes as jobs."""
    from pipeline_kit.cli.packing_flags import PlanFlags, nodes_free

    sinfo = tmp_path / "sinfo"
    sinfo.write_text("#!/nonexistent/interpreter\n")
    sinfo.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))  # only the broken one: not the real sinfo
    cluster = ClusterConfig(source="t.yaml", executor="slurm", job_dir=str(tmp_path))
    assert nodes_free(cluster, PlanFlags(), "debug") == (None, "")
