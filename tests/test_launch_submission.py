"""What kit submits, and how a submission is refused, each checked where it happens: Slurm arrays larger than
MaxArraySize (dry run and the real cluster, 10,000 units), no silent 10-minute limit, time limits checked before
anything is packed, a refused sbatch, one container per Docker job, the sandbox's unconfined profile as an explicit
group field, the TIR sandbox log path, a stage whose units are all done still leaving a job that --run_after waits
on, and --wait's timeout."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from conftest import SERVICES, need, problems, run_committed

SLURM = "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n"


def sbatch_arrays(text: str) -> list[str]:
    return re.findall(r"#SBATCH --array=(\S+)", text)


def test_an_array_over_max_array_size_is_split_in_the_plan(kit, configs):
    d = configs("small", SLURM + "max_array_size: 3\n")
    res = kit(
        "run_cmd", "--cluster=small", f"--config_dir={d}", "--array_size=7", "--command=echo $KIT_UNIT", "--dry_run"
    )
    assert res.returncode == 0, res.stderr
    assert (
        "kit: job run_cmd has 7 units, more than the cluster's MaxArraySize (3): submitted as 3 Slurm arrays"
        in res.stdout
    )
    assert sbatch_arrays(res.stdout) == ["0-2", "0-2", "0-0"]
    assert re.findall(r"export KIT_UNIT=(.+)$", res.stdout, re.M) == [
        "${SLURM_ARRAY_TASK_ID:-0}",
        "$((${SLURM_ARRAY_TASK_ID:-0} + 3))",
        "$((${SLURM_ARRAY_TASK_ID:-0} + 6))",
    ]


def test_generate_of_2000_units_renders_arrays_within_the_limit(kit, configs):
    """--num_chunks=250 --num_random_seeds=8 once rendered one --array=0-1999, which sbatch refuses."""
    d = configs("big", SLURM)
    args = ["--cluster=big", f"--config_dir={d}", "--model=/m", "--input_file=/data/in.jsonl", "--output_dir=/out"]
    res = kit("generate", *args, "--num_chunks=250", "--num_random_seeds=8", "--dry_run")
    assert res.returncode == 0, res.stderr
    limit = 1001
    if "SLURM_CONF" in SERVICES:  # the local cluster answers `scontrol show config`
        out = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True, env={**SERVICES})
        limit = int(re.search(r"MaxArraySize\s*=\s*(\d+)", out.stdout).group(1))
    sizes = [int(a.split("-")[1]) + 1 for a in sbatch_arrays(res.stdout)]
    assert sum(sizes) == 2000 and max(sizes) <= limit and len(sizes) == -(-2000 // limit)


def test_no_time_limit_means_the_partition_default_not_ten_minutes(kit, configs):
    d = configs("plain", SLURM)
    res = kit("run_cmd", "--cluster=plain", f"--config_dir={d}", "--command=true", "--dry_run")
    assert res.returncode == 0, res.stderr
    assert "#SBATCH --time" not in res.stdout
    timed = kit("run_cmd", "--cluster=plain", f"--config_dir={d}", "--command=true", "--time_min=02:00:00", "--dry_run")
    assert "#SBATCH --time=02:00:00" in timed.stdout


def test_a_docker_job_with_two_containers_is_refused(kit, configs, tmp_path):
    d = configs("dk", "executor: local\njob_dir: JOB_DIR\ncontainers:\n  vllm: img-a:1\n  kit: img-b:1\n")
    inp = problems(tmp_path, 2)
    args = ["--cluster=dk", f"--config_dir={d}", "--model=/m", f"--input_file={inp}", f"--output_dir={tmp_path}/o"]
    res = kit("generate", *args, "--container=kit", "--dry_run")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "job 'generate': its groups name different containers (server: vllm, client: kit)" in res.stderr
    # by default the client runs in the server's container: one image for the whole job
    same = kit("generate", *args, "--dry_run")
    assert same.returncode == 0, same.stderr
    assert "container_image: img-a:1" in same.stdout and "img-b:1" not in same.stdout


UNCONFINED = """
import sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

if __name__ == "__main__":
    cluster = load_cluster_config("dk", sys.argv[1])
    named = Job("named", [CommandGroup([Command("true", name="sandbox", container="base")], name="sandbox")])
    flagged = Job("flagged", [CommandGroup([Command("true", container="base")], needs_namespaces=True)])
    print(run_pipeline(Pipeline("p", cluster, [named, flagged]), dry_run=True).dry_run_text)
"""


def test_docker_security_profiles_follow_the_group_field_not_a_name(configs, user_repo, tmp_path):
    d = configs("dk", "executor: local\njob_dir: JOB_DIR\ncontainers:\n  base: img:1\n")
    res = run_committed(user_repo, tmp_path, "p.py", UNCONFINED, str(d), env={"DOCKER_HOST": "unix:///nonexistent"})
    assert res.returncode == 0, res.stderr
    named, flagged = res.stdout.split("==== job flagged")
    assert "seccomp=unconfined" not in named  # a command called "sandbox" gets no special treatment
    assert "security_opt:\n      - seccomp=unconfined\n      - apparmor=unconfined" in flagged


def test_tir_names_the_sandbox_log_where_the_job_writes_it(tmp_path, stub):
    """The sandbox of a --with_sandbox job logs to <log dir>/<job>/sandbox.log, beside the client's log."""
    inp, out = problems(tmp_path, 1), tmp_path / "out.jsonl"
    env = {"PATH": "/usr/bin:/bin", "KIT_LOG_DIR": str(tmp_path / "logs"), "KIT_LOG_PREFIX": "gen/"}
    args = [f"++input_file={inp}", f"++output_file={out}", f"++server.base_url={stub().url}"]
    args += ["++server.model=m", "++code_execution=true", "++sandbox_address=http://127.0.0.1:9"]
    args += ["++sandbox_ready_timeout=1", "++server.ready_timeout=1"]
    res = subprocess.run(
        [sys.executable, "-m", "pipeline_kit.inference.generate", *args], capture_output=True, text=True, env=env
    )
    assert res.returncode == 1
    assert f"see its log ({tmp_path}/logs/gen/sandbox.log)" in res.stderr, res.stderr


@pytest.fixture
def slurm(configs):
    need("SLURM_CONF", "the local Slurm cluster")
    return configs


def status(kit, cluster, expname) -> dict[str, str]:
    res = kit("status", *cluster, expname)
    assert res.returncode == 0, res.stderr
    return dict(line.split(" ", 1) for line in res.stdout.splitlines())


def test_split_array_runs_every_unit_once_on_slurm(kit, slurm, tmp_path):
    d = slurm("small", SLURM + "max_array_size: 3\n")
    cluster = ["--cluster=small", f"--config_dir={d}"]
    marks = tmp_path / "marks"
    marks.mkdir()
    res = kit("run_cmd", *cluster, "--array_size=7", "--wait", "--expname=split",
              f"--command=touch {marks}/$KIT_UNIT; test $KIT_UNIT != 5", timeout=240)  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr  # unit 5 fails
    assert "submitted as 3 Slurm arrays (units 0-2, 3-5, 6-6)" in res.stderr
    assert sorted(int(p.name) for p in marks.iterdir()) == list(range(7))
    assert status(kit, cluster, "split") == {"split": "FAILED", "split[5]": "FAILED"}


def test_ten_thousand_units_submit(kit, slurm):
    """One pipeline of 10,000 units submits (as arrays within MaxArraySize); they are held, then cancelled."""
    d = slurm("big", SLURM)
    cluster = ["--cluster=big", f"--config_dir={d}"]
    res = kit("run_cmd", *cluster, "--array_size=10000", "--expname=tenk", "--command=true",
              '--sbatch_kwargs={"begin": "now+3600"}', timeout=240)  # fmt: skip
    try:
        assert res.returncode == 0, res.stdout + res.stderr
        ids = re.search(r"job tenk \w+ \(slurm job ([\d,]+)\)", res.stdout).group(1).split(",")
        queued = subprocess.run(
            ["squeue", "-h", "-r", "-j", ",".join(ids), "-o", "%i"], capture_output=True, text=True, env=SERVICES
        )
        assert len(queued.stdout.split()) == 10000
        assert status(kit, cluster, "tenk") == {"tenk": "PENDING"}
    finally:
        kit("cancel", *cluster, "tenk")


def test_a_stage_whose_units_are_all_done_still_leaves_a_job_to_wait_on(kit, slurm, stub, tmp_path):
    d = slurm("gen", SLURM)
    cluster = ["--cluster=gen", f"--config_dir={d}"]
    server = stub()
    inp, out = problems(tmp_path, 3), tmp_path / "out"
    gen = [*cluster, "--server_type=openai", f"--server_address={server.url}", "--model=stub"]
    gen += [f"--input_file={inp}", f"--output_dir={out}", "--expname=stage1", "--wait"]
    first = kit("generate", *gen, timeout=240)
    assert first.returncode == 0, first.stdout + first.stderr
    again = kit("generate", *gen, timeout=240)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 of 1 units are done already" in again.stdout and "job stage1 SUCCEEDED (slurm job" in again.stdout
    assert len(server.requests()) == 3
    after = kit("run_cmd", *cluster, "--run_after=stage1", "--expname=stage2", "--command=true", "--wait", "--dry_run")
    new_id = re.search(r"job stage1 SUCCEEDED \(slurm job (\d+)\)", again.stdout).group(1)
    assert f"--dependency=afterany:{new_id}" in after.stdout  # the dependent waits on the new, done-only job


REFUSED = """
import sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, HardwareConfig, Job, Pipeline

if __name__ == "__main__":
    cluster = load_cluster_config("plain", sys.argv[1])
    first = Job("first", [CommandGroup([Command("sleep 600")])])
    second = Job("second", [CommandGroup([Command("true")], HardwareConfig(partition="nope"))], after=[first])
    run_pipeline(Pipeline("refused", cluster, [first, second]))
"""


def test_time_limits_are_checked_before_anything_is_packed_or_submitted(kit, configs, user_repo):
    d = configs("plain", "executor: slurm\njob_dir: JOB_DIR\npartition: debug\n")
    res = kit("run_cmd", "--cluster=plain", f"--config_dir={d}", "--time_min=1h", "--command=true")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert "--time_min is '1h', not a Slurm time; write minutes (90), HH:MM:SS (01:30:00)" in res.stderr
    assert not (configs.job_dir / "code").exists()  # refused before the code was packed
    for good in ("90", "30:00", "01:30:00", "1-12", "1-12:30", "2-00:00:00"):
        res = kit(
            "run_cmd", "--cluster=plain", f"--config_dir={d}", f"--time_min={good}", "--dry_run", "--command=true"
        )
        assert res.returncode == 0 and f"--time={good}" in res.stdout, (good, res.stderr)
    d = configs("badcfg", "executor: slurm\njob_dir: JOB_DIR\ntimeouts:\n  debug: 4 hours\n")
    res = kit("run_cmd", "--cluster=badcfg", f"--config_dir={d}", "--command=true")
    assert res.returncode == 2 and f"{d}/badcfg.yaml: key 'timeouts.debug' is '4 hours', not a Slurm time" in res.stderr


def test_a_refused_sbatch_is_one_line_and_cancels_what_was_queued(kit, slurm, user_repo, tmp_path):
    d = slurm("plain", SLURM)
    res = kit("run_cmd", "--cluster=plain", f"--config_dir={d}", "--partition=nope", "--command=true")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert (
        "sbatch refused job run_cmd (sbatch: error: Batch job submission failed: Invalid partition name specified): "
        f"partition 'nope' (--partition, or 'partition'/'cpu_partition' in {d}/plain.yaml) is not one this cluster "
        "accepts; its partitions: debug, cpu." in res.stderr
    )
    res = kit("run_cmd", "--cluster=plain", f"--config_dir={d}", "--num_gpus=9", "--command=true")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "no node offers what the job asks (main: 1 node(s), 9 GPU(s)/node); lower --num_gpus" in res.stderr
    # a generation refused by sbatch leaves no plan (.kit-plan.json) and no output folder behind: nothing was queued
    out = tmp_path / "gen" / "out"
    res = kit(
        "generate", "--cluster=plain", f"--config_dir={d}", "--partition=nope", "--server_type=openai",
        "--server_address=http://127.0.0.1:9/v1", "--model=m", f"--input_file={problems(tmp_path, 2)}",
        f"--output_dir={out}",
    )  # fmt: skip
    assert res.returncode == 2 and "sbatch refused job generate" in res.stderr, res.stderr
    assert not (tmp_path / "gen").exists()
    proc = run_committed(user_repo, tmp_path, "refused.py", REFUSED, str(d), env=SERVICES)
    assert "sbatch refused job second" in proc.stderr and "the 1 job(s) it had queued were cancelled" in proc.stderr
    env = {**os.environ, **SERVICES}
    queued = subprocess.run(
        ["squeue", "-h", "-n", "root-root.first", "-o", "%T"], capture_output=True, text=True, env=env
    )
    assert queued.stdout.split() in ([], ["CANCELLED"], ["COMPLETING"])


def test_wait_timeout_stops_waiting_not_the_job(kit, slurm):
    d = slurm("plain", SLURM)
    cluster = ["--cluster=plain", f"--config_dir={d}"]
    try:
        res = kit(
            "run_cmd", *cluster, "--expname=slow", "--command=sleep 120", "--wait", "--wait_timeout=3", timeout=60
        )
        assert res.returncode == 1, res.stdout + res.stderr
        assert "kit: stopped waiting after 3 s; not finished: slow" in res.stderr
        assert status(kit, cluster, "slow")["slow"] in ("PENDING", "RUNNING")  # the job goes on
    finally:
        kit("cancel", *cluster, "slow")
