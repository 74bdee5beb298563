"""A Slurm dry run renders its sbatch scripts without nemo-run (launch/sbatch_render.py). They must be the bytes
nemo-run itself writes and submits: each case runs `kit ... --dry_run` with the dry run replaced by a comparison
of kit's rendering and nemo-run's, for the same experiment id; and a real submission to the local Slurm is
compared with the script nemo-run wrote for sbatch."""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import SERVICES, need
from dry_run_cases import CASES, CONFIGS

# runs kit's CLI in-process once per case (nemo-run imported once), with Submission.dry_run replaced: both
# renderings of every task of every case, as JSON
COMPARE = """
import json, os, sys
from pipeline_kit.launch import submit
from pipeline_kit.cli.main import main

def compare(self):
    exp_id = f"{self.pipeline.name}_1795807388832063660"
    found.append({"kit": self.rendered_sbatch(exp_id), "nemo_run": self.nemo_run_requests(exp_id)})
    return ""

submit.Submission.dry_run = compare
results = {}
for case, args in json.loads(sys.argv[1]).items():
    found = []
    rc = main([*args, "--dry_run"])
    results[case] = {"rc": rc, "tasks": found}
with open(os.environ["KIT_COMPARE_OUT"], "w") as f:
    json.dump(results, f)
"""

EXTRA_CONFIGS = {
    # no job_name_prefix and no account; environment variables with spaces; arrays split at 3
    "plain": "executor: slurm\njob_dir: JOB_DIR\npartition: debug\nmax_array_size: 3\n"
    "env_vars:\n  - HF_HOME=/shared/hf cache\n  - KIT_GOLDEN=1\n",
    # sbatch over SSH: the experiment folder lies under the tunnel's job_dir
    "tunnel": "executor: slurm\njob_dir: JOB_DIR\naccount: acct_team\npartition: debug\n"
    "ssh_tunnel:\n  host: 127.0.0.1\n  user: root\n  job_dir: /remote/jobs\n",
}

EXTRA_CASES = {
    "plain_array_split": [
        "run_cmd",
        "--cluster=plain",
        "--expname=split",
        "--array_size=7",
        "--command=echo $KIT_UNIT",
    ],
    "plain_het_generate": [
        "generate",
        "--cluster=plain",
        "--expname=gen",
        "--model=/models/qwen",
        "--server_gpus=8",
        "--input_file=/data/in.jsonl",
        "--output_dir=/out",
    ],
    "plain_exclusive": [
        "run_cmd",
        "--cluster=plain",
        "--expname=train",
        "--num_gpus=8",
        "--num_nodes=2",
        '--sbatch_kwargs={"qos": "high", "no_requeue": true, "exclusive": true}',
        "--command=python3 train.py",
    ],
    "tunnel_generate_array": [
        "generate",
        "--cluster=tunnel",
        "--expname=gen",
        "--model=/models/qwen",
        "--server_gpus=2",
        "--input_file=/data/in.jsonl",
        "--output_dir=/out",
        "--num_chunks=2",
        "--num_random_seeds=2",
    ],
}

SLURM_CASES = {**{k: v for k, v in CASES.items() if k.startswith("slurm_")}, **EXTRA_CASES}


def compare_renderings(cases: dict[str, list[str]], cwd: Path, home: Path, out: Path) -> dict:
    env = {"KIT_SERVER_PYTHON": "python3", **os.environ, **SERVICES, "KIT_HOME": str(home), "KIT_COMPARE_OUT": str(out)}
    proc = subprocess.run(
        [sys.executable, "-c", COMPARE, json.dumps(cases)], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(out.read_text())


def assert_same(kit_scripts: list[str], nemo_run_scripts: list[str]) -> None:
    assert len(kit_scripts) == len(nemo_run_scripts)
    for ours, theirs in zip(kit_scripts, nemo_run_scripts, strict=True):
        diff = "".join(difflib.unified_diff(theirs.splitlines(True), ours.splitlines(True), "nemo-run", "kit"))
        assert ours == theirs, diff


def test_kit_renders_the_sbatch_script_nemo_run_writes(configs, user_repo, tmp_path):
    for name, text in {**CONFIGS, **EXTRA_CONFIGS}.items():
        configs(name, text.replace("MOUNT_SRC", str(tmp_path)))
    cases = {case: [*args, f"--config_dir={configs.dir}"] for case, args in SLURM_CASES.items()}
    results = compare_renderings(cases, user_repo, tmp_path / "kh", tmp_path / "both.json")
    assert sorted(results) == sorted(cases)
    for case, result in results.items():
        assert result["rc"] == 0, case
        [both] = result["tasks"]
        assert both["kit"] and all(s.startswith("#!/bin/bash\n") for s in both["kit"]), case
        assert_same(both["kit"], both["nemo_run"])


# a real submission: a het job (server + client groups) and a 3-element array, held by --begin so that nothing runs;
# after sbatch answered, kit's rendering for the experiment's id is compared with what nemo-run wrote and submitted
SUBMIT = """
import glob, json, os, sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import run_pipeline, submit
from pipeline_kit.pipeline import Command, CommandGroup, HardwareConfig, Job, Pipeline

rendered = {}
original = submit.Submission._submit

def keep_rendering(self, run_id):
    experiment = original(self, run_id)
    rendered.update(zip([t.name for t in self.tasks], self.rendered_sbatch(experiment.record.nemo_run_id)))
    return experiment

submit.Submission._submit = keep_rendering
if __name__ == "__main__":
    cluster = load_cluster_config("slurm", sys.argv[1])
    hold = {"begin": "now+600"}
    server = Command("sleep 100", name="server", service=True, num_gpus=1)
    client = Command("true", name="client")
    het = Job("pair", groups=[CommandGroup([server], HardwareConfig(num_gpus=1, sbatch_kwargs=hold), name="srv"),
                              CommandGroup([client], HardwareConfig(sbatch_kwargs=hold), name="cli")])
    array = Job("units", groups=[CommandGroup([Command("echo $KIT_UNIT", name="unit")],
                                              HardwareConfig(sbatch_kwargs=hold), name="u")], array_size=3)
    exp = run_pipeline(Pipeline("held", cluster, [het, array], allow_uncommitted=True))
    written = {}
    for task in rendered:
        [path] = glob.glob(os.path.join(cluster.job_dir, "experiments", "held", "*", f"{task}_sbatch.sh"))
        written[task] = open(path).read()
    print("KIT_BOTH " + json.dumps({"kit": rendered, "nemo_run": written, "ids": exp.slurm_ids}))
"""


@pytest.mark.slurm
def test_a_real_submission_sends_what_kit_renders(configs, user_repo, tmp_path):
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n")
    (user_repo / "held.py").write_text(SUBMIT)
    env = {**os.environ, **SERVICES, "KIT_HOME": str(tmp_path / "kh")}
    proc = subprocess.run(
        [sys.executable, "held.py", str(d)], cwd=user_repo, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    both = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("KIT_BOTH "))[9:])
    ids = [i for job_ids in both["ids"].values() for i in job_ids]
    subprocess.run(["scancel", *ids], check=False)
    assert sorted(both["kit"]) == sorted(both["nemo_run"]) == ["pair", "units"]
    for task in both["kit"]:
        assert_same([both["kit"][task]], [both["nemo_run"][task] + "\n"])
