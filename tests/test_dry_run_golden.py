"""`--dry_run` output against golden files in tests/golden/dry_run/: sbatch scripts, Docker specs and local
process requests, plus kit's job scripts. Paths, ids, hashes and run ids are normalised; ports are explicit.
Regenerate after an intended change with KIT_UPDATE_GOLDEN=1 and review the diff."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from conftest import run_committed
from dry_run_cases import CASES, CONFIGS

GOLDEN = Path(__file__).parent / "golden" / "dry_run"

# a generate-shaped pipeline through the Python API: a het job (server group + client group, explicit port) and
# an array job that runs after it with afterok
PIPELINE_SCRIPT = """
import sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, HardwareConfig, Job, Pipeline

if __name__ == "__main__":
    cluster = load_cluster_config("slurm", sys.argv[1])
    server = Command("serve --port $KIT_PORT", name="server", port=8000, service=True, num_gpus=4)
    client = Command(lambda refs: f"client --url http://{refs['server'].address}", name="client",
                     refs={"server": server}, env={"SEED": "1"})
    het = Job("gen", groups=[CommandGroup([server], HardwareConfig(num_gpus=4, exclusive=True), name="srv"),
                             CommandGroup([client], HardwareConfig(partition="cpu"), name="cli")])
    judge = Job("judge", groups=[CommandGroup([Command("judge --unit $KIT_UNIT", name="judge")], name="j")],
                after=[het], array_size=8, array_parallelism=2, dependency_type="afterok")
    print(run_pipeline(Pipeline("gen", cluster, [het, judge]), dry_run=True).dry_run_text, end="")
"""


def normalise(text: str, tmp_path: Path) -> str:
    text = text.replace(str(tmp_path), "<TMP>")
    text = re.sub(r"\d{8}-\d{6}-\d{6}-\d+-\d{3}", "<RUN_ID>", text)  # kit's run id: time, µs, pid, counter
    text = re.sub(r"(?<=_)\d{16,}", "<EXP_ID>", text)  # nemo-run's experiment id: time in ns
    text = re.sub(r"(?<=-)\d{16,}", "<EXP_ID>", text)
    for suffix in set(re.findall(r"app_id='[\w.]+?-([a-z0-9]{10,20})'", text)):  # torchx's random app id suffix,
        text = text.replace(suffix, "<APP_ID>")  # letters only at times
    text = re.sub(r"(?<=-)(?=[a-z0-9]*\d)[a-z0-9]{10,20}\b", "<APP_ID>", text)  # torchx's random app id suffix
    text = re.sub(r"(?<=^id: )([\w.]+)-[a-z0-9]{10,20}$", r"\1-<APP_ID>", text, flags=re.M)  # ... also all letters
    text = re.sub(r"(?<=/code/)[0-9a-f]{16}", "<CODE_KEY>", text)  # packed code: named by the commit
    text = re.sub(re.escape(str(Path(sys.executable).parent)) + r"/python3?\b", "<PYTHON>", text)  # kit's interpreter
    return text


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if os.environ.get("KIT_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing; run with KIT_UPDATE_GOLDEN=1 to create it"
    assert text == path.read_text(), f"dry run differs from {path}; if intended, regenerate with KIT_UPDATE_GOLDEN=1"


@pytest.fixture
def golden_configs(configs, tmp_path):
    src = tmp_path / "mount-src"
    src.mkdir()
    (src / "in.jsonl").write_text('{"problem": "1+1"}\n')
    for name, text in CONFIGS.items():
        configs(name, text.replace("MOUNT_SRC", str(src)))
    return configs.dir, src


@pytest.mark.parametrize("case", sorted(CASES))
def test_dry_run_matches_golden(kit, golden_configs, tmp_path, case):
    config_dir, src = golden_configs
    args = [a.replace("MOUNT_SRC", str(src)) for a in CASES[case]]
    res = kit(*args, f"--config_dir={config_dir}", "--dry_run", env={"DOCKER_HOST": "unix:///nonexistent"})
    assert res.returncode == 0, res.stderr
    check_golden(case, normalise(res.stdout, tmp_path))


def test_pipeline_api_dry_run_matches_golden(golden_configs, user_repo, tmp_path):
    config_dir, _ = golden_configs
    proc = run_committed(user_repo, tmp_path, "gen.py", PIPELINE_SCRIPT, str(config_dir))
    assert proc.returncode == 0, proc.stderr
    check_golden("slurm_het_then_array", normalise(proc.stdout, tmp_path))


def test_dry_run_submits_nothing(kit, golden_configs):
    config_dir, _ = golden_configs
    res = kit("run_cmd", "--cluster=none", f"--config_dir={config_dir}", "--command=touch ran.txt", "--dry_run")
    assert res.returncode == 0, res.stderr
    assert "touch ran.txt" in res.stdout
    assert kit("status", "--cluster=none", f"--config_dir={config_dir}", "run_cmd").returncode == 2  # no record


# the same generate runs as CASES, built from Python with the job builders `kit generate` uses
BUILDER_SCRIPT = """
import sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.jobs import GenerateSpec, JobOptions, generate_jobs
from pipeline_kit.launch import run_pipeline
from pipeline_kit.pipeline import Pipeline
from pipeline_kit.components.sandbox import SandboxSpec
from pipeline_kit.servers import ServerSpec

if __name__ == "__main__":
    cluster = load_cluster_config("slurm", sys.argv[1])
    specs = {
        "slurm_generate_het": (
            GenerateSpec(ServerSpec("vllm", "/models/qwen", gpus=8), "/data/in.jsonl", "/out", server_port=8000,
                         overrides=("++inference.temperature=0.7",)),
            JobOptions("gen"),
        ),
        "slurm_generate_array": (
            GenerateSpec(ServerSpec("sglang", "/models/qwen", gpus=2, server_args="--mem-fraction-static 0.8"),
                         "/data/in.jsonl", "/out", seeds=[0, 1], num_chunks=2),
            JobOptions("gen", dependent_jobs=1),
        ),
        "slurm_generate_het_sandbox": (
            GenerateSpec(ServerSpec("vllm", "/models/qwen", gpus=8), "/data/in.jsonl", "/out", server_port=8000,
                         sandbox=SandboxSpec("--memory_gb 8", port=6000),
                         overrides=("++code_execution=true", "++code_tags=qwen")),
            JobOptions("tir"),
        ),
    }
    spec, options = specs[sys.argv[2]]
    pipeline = Pipeline(options.expname, cluster, generate_jobs(cluster, spec, options))
    print(run_pipeline(pipeline, dry_run=True).dry_run_text, end="")
"""


@pytest.mark.parametrize("case", ["slurm_generate_het", "slurm_generate_array", "slurm_generate_het_sandbox"])
def test_python_job_builders_match_kit_generate(golden_configs, user_repo, tmp_path, case):
    """`kit generate` and `pipeline_kit.jobs.generate_jobs` make the same jobs: the same dry run as the CLI's golden
    (less the plan's lines the CLI prints first)."""
    config_dir, _ = golden_configs
    proc = run_committed(user_repo, tmp_path, "stages.py", BUILDER_SCRIPT, str(config_dir), case)
    assert proc.returncode == 0, proc.stderr
    golden = (GOLDEN / f"{case}.txt").read_text()
    assert golden.startswith("plan: ")
    without_plan = "".join(line for line in golden.splitlines(keepends=True) if not line.startswith("plan: "))
    assert normalise(proc.stdout, tmp_path) == without_plan


def test_slurm_without_job_name_prefix_or_account(kit, configs):
    """Job names are the plain names (nemo-run alone writes `-.hello` and `log--.gen-0`), with no --account=''."""
    d = configs("bare", "executor: slurm\njob_dir: JOB_DIR\npartition: debug\n")
    common = ["--cluster=bare", f"--config_dir={d}", "--dry_run"]
    run = kit("run_cmd", *common, "--expname=hello", "--command=true")
    het = kit(
        "generate",
        *common,
        "--expname=gen",
        "--model=/models/qwen",
        "--server_gpus=8",
        "--input_file=/data/in.jsonl",
        "--output_dir=/out",
    )
    for res, names in ((run, ["hello"]), (het, ["gen-0", "gen-1"])):
        assert res.returncode == 0, res.stderr
        assert re.findall(r"^#SBATCH --job-name=(.*)$", res.stdout, re.M) == names
        assert "--account" not in res.stdout
        assert not re.search(r"(sbatch_|log-)[-.]", res.stdout), res.stdout  # file names start with the name too
