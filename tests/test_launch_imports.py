"""Launching imports no ML library: where torch is installed (as on almost every user's machine), nemo-run's import
tries `import torch` (~1.7 s), so kit blocks it (launch/nemorun_env.py). Each case runs kit's `main()` in a
subprocess of the test venv, which has torch installed (tests/setup.sh), and lists what ended up in sys.modules."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SERVICES, need, skip_or_fail

# hydra (0.25 s) parses the generation script's overrides; at submission kit checks plain ones without it. nemo-run's
# own CLI (typer help, omegaconf, catalogue: 0.3 s in its package __init__) is not needed to launch (nemorun_env.py)
HEAVY = ("torch", "transformers", "vllm", "litellm", "hydra", "nemo_run.cli")

# runs kit in-process, then prints one JSON line: its exit code, which heavy modules got imported, and whether
# torch can still be found (kit's placeholders for the blocked modules must be gone once nemo-run is imported)
PROBE = """
import importlib.util, json, sys
from pipeline_kit.cli.main import main
rc = main(sys.argv[1:])
imported = sorted(m for m in HEAVY if m in sys.modules)
print("KIT_PROBE " + json.dumps({"rc": rc, "imported": imported, "torch_findable": bool(importlib.util.find_spec("torch")),
                                 "nemo_run": "nemo_run" in sys.modules}))
"""


@pytest.fixture(autouse=True)
def torch_installed():
    if importlib.util.find_spec("torch") is None:
        msg = (
            f"torch is not installed in {sys.prefix}, so this test would prove nothing "
            "(tests/setup.sh installs torch==2.13.0 into .venv)"
        )
        skip_or_fail(msg)


def kit_in_process(tmp_path: Path, cwd: Path, *args: str) -> dict:
    env = {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "kh")}
    proc = subprocess.run(
        [sys.executable, "-c", f"HEAVY = {HEAVY!r}\n{PROBE}", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = [line for line in proc.stdout.splitlines() if line.startswith("KIT_PROBE ")]
    assert proc.returncode == 0 and lines, proc.stdout + proc.stderr
    result = json.loads(lines[-1].removeprefix("KIT_PROBE "))
    assert result["rc"] == 0, proc.stdout + proc.stderr
    return result


def assert_nothing_heavy(result: dict) -> None:
    assert result["imported"] == [], f"kit imported {result['imported']} to launch"
    assert result["torch_findable"], "kit left its placeholder for torch in sys.modules"


def test_generate_dry_run_on_slurm_imports_no_ml_library(configs, user_repo, tmp_path):
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: acct\npartition: debug\n")
    gen = ["generate", "--cluster=slurm", f"--config_dir={d}", "--model=/m", "--server_gpus=1"]
    gen += ["--input_file=/data/in.jsonl", "--output_dir=/out", "--num_chunks=4", "--num_random_seeds=2", "--dry_run"]
    gen += ["++prompt_config=generic/math", "++inference.temperature=0.7", "++max_concurrent_requests=64"]
    result = kit_in_process(tmp_path, user_repo, *gen)
    assert_nothing_heavy(result)
    assert not result["nemo_run"], "a Slurm dry run renders its sbatch scripts without nemo-run (sbatch_render.py)"


def test_local_run_imports_no_ml_library(configs, user_repo, tmp_path):
    d = configs("local0", "executor: none\njob_dir: JOB_DIR\n")
    run = ["run_cmd", "--cluster=local0", f"--config_dir={d}", "--expname=noimports", "--command=true"]
    result = kit_in_process(tmp_path, user_repo, *run)
    assert_nothing_heavy(result)
    assert not result["nemo_run"], "none starts its jobs itself (launch/detached.py)"


@pytest.mark.slurm
def test_slurm_submission_imports_no_ml_library(configs, user_repo, tmp_path):
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n")
    # --begin keeps the job pending; it is cancelled below
    run = ["run_cmd", "--cluster=slurm", f"--config_dir={d}", "--expname=noimports", "--command=true"]
    run += ['--sbatch_kwargs={"begin": "now+600"}']
    try:
        assert_nothing_heavy(kit_in_process(tmp_path, user_repo, *run))
    finally:
        env = {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "kh")}
        cancel = [str(Path(sys.executable).parent / "kit"), "cancel", "--cluster=slurm", f"--config_dir={d}"]
        subprocess.run([*cancel, "noimports"], cwd=user_repo, env=env, capture_output=True, timeout=120)


def test_version_names_the_package_and_imports_nothing_heavy(tmp_path, user_repo):
    import tomllib

    version = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"][
        "version"
    ]
    for flag in ("--version", "-V"):
        proc = subprocess.run([str(Path(sys.executable).parent / "kit"), flag], capture_output=True, text=True)
        assert proc.returncode == 0 and proc.stdout.startswith(f"kit {version} (pipeline_kit in "), proc.stderr
    assert_nothing_heavy(kit_in_process(tmp_path, user_repo, "--version"))
