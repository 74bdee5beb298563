"""#31 part 2, the job's side: where kit cannot see a generation's paths at submission (a cluster over SSH), the job
runs the same checks before any of its commands (the server among them) starts; and the verdict cache of big inputs."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from conftest import SERVICES, client_python, need, run_committed

from pipeline_kit.pipeline import Command, CommandGroup, Job
from pipeline_kit.pipeline.render import PRELUDE, _input_checks

REFUSING_CHECK = """
import json, sys
from pipeline_kit.cluster import load_cluster_config
from pipeline_kit.launch import run_pipeline
from pipeline_kit.pipeline import Command, CommandGroup, Job, Pipeline

if __name__ == "__main__":
    cluster = load_cluster_config("procs", sys.argv[1])
    serve = Command("touch {started}; sleep 60", name="server", service=True)
    work = Command("echo work", name="client")
    checks = ["echo 'in.jsonl:4: not valid JSON; fix it' >&2; exit 2", "exit 1"]  # only exit 2 refuses
    ok = Job("ok", [CommandGroup([Command("echo fine", name="say")])], checks=["exit 1"])
    refused = Job("refused", [CommandGroup([serve, work])], checks=checks)
    exp = run_pipeline(Pipeline("checked", cluster, [ok, refused]))
    print(json.dumps({{"states": exp.wait(), "why": exp.why_failed("refused")}}))
"""


def test_a_check_that_exits_2_refuses_the_job_before_its_commands_start(user_repo, tmp_path, configs):
    d = configs("procs", "executor: none\njob_dir: JOB_DIR\n")
    started = tmp_path / "server-started"
    res = run_committed(user_repo, tmp_path, "checked.py", REFUSING_CHECK.format(started=started), str(d), timeout=120)
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["states"] == {"ok": "SUCCEEDED", "refused": "FAILED"}
    assert "in.jsonl:4: not valid JSON; fix it" in out["why"]
    assert not started.exists()  # the server never started


def check(*overrides: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pipeline_kit.inference.input_check", *overrides], capture_output=True, text=True
    )


def test_the_jobs_check_command_says_what_submission_would(tmp_path):
    inp, out = tmp_path / "in.jsonl", tmp_path / "out"
    inp.write_text('{"problem": "a"}\n{"question": "b"}\n')
    res = check(f"++input_file={inp}", f"++output_dir={out}", "++prompt_config=generic/math")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"{inp}:2: the record has no field 'problem', which prompt config generic/math needs" in res.stderr
    inp.write_text("")
    assert "has no records" in check(f"++input_file={inp}", f"++output_dir={out}").stderr
    assert check(f"++input_file={inp}", f"++output_dir={out}", "++allow_empty_input=true").returncode == 0
    assert not out.exists()  # a check writes nothing


def test_a_big_inputs_verdict_is_cached_by_its_content(tmp_path, monkeypatch):
    from pipeline_kit.inference import input_check

    monkeypatch.setenv("KIT_DIGEST_CACHE", str(tmp_path / "cache" / "digests.json"))
    inp = tmp_path / "big.jsonl"
    line = json.dumps({"problem": "x" * 1000}) + "\n"
    inp.write_text(line * (input_check.CACHED_FROM_BYTES // len(line) + 1))
    count = input_check.check_input_file(str(inp), {"problem"}, "generic/math", False)
    assert count > 1000

    def no_read(*args):
        raise AssertionError("read again")

    monkeypatch.setattr(input_check, "_count_records", no_read)
    assert input_check.check_input_file(str(inp), {"problem"}, "generic/math", False) == count  # from the cache
    with pytest.raises(AssertionError, match="read again"):  # other fields: another verdict
        input_check.check_input_file(str(inp), {"problem", "answer"}, "x", False)
    with inp.open("a") as f:
        f.write('{"question": 1}\n')
    monkeypatch.undo()
    monkeypatch.setenv("KIT_DIGEST_CACHE", str(tmp_path / "cache" / "digests.json"))
    from pipeline_kit.errors import UserError

    with pytest.raises(UserError, match=rf"big.jsonl:{count + 1}: the record has no field 'problem'"):
        input_check.check_input_file(str(inp), {"problem"}, "generic/math", False)  # new content: read again


@pytest.mark.slurm
def test_a_broken_input_is_refused_before_sbatch_on_slurm(kit, configs, tmp_path):
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n")
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"problem": "a"}\n{"problem": \n')
    expname = f"broken-input-{os.getpid()}"
    res = kit("generate", "--cluster=slurm", f"--config_dir={d}", f"--expname={expname}", f"--input_file={inp}",
              f"--output_dir={tmp_path / 'out'}", "--server_type=openai", "--server_address=http://127.0.0.1:9/v1",
              "--model=m")  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"{inp}:2: not valid JSON" in res.stderr
    env = {**os.environ, **SERVICES}
    queued = subprocess.run(["squeue", "-h", "-o", "%j"], capture_output=True, text=True, env=env).stdout
    known = subprocess.run(["sacct", "-n", "-X", "-P", "-o", "JobName", "-S", "now-1days"], capture_output=True,
                           text=True, env=env).stdout  # fmt: skip
    assert expname not in queued + known
    assert not configs.job_dir.exists()


@pytest.mark.slurm
def test_over_ssh_the_job_checks_the_input_before_its_server_starts(kit, configs, tmp_path):
    """kit cannot see the input of a cluster reached over SSH: the job's batch shell checks it before any srun, so
    neither the server nor the client starts, and `kit status` shows the one line."""
    need("KIT_TEST_SSH_KEY", "the loopback sshd")
    need("SLURM_CONF", "the local Slurm cluster")
    env = [f"KIT_CLIENT_PYTHON={client_python()}"]
    env += [f"PYTHONPATH={os.environ['PYTHONPATH']}"] if os.environ.get("PYTHONPATH") else []  # a worktree's kit
    d = configs("viassh", f"""
        executor: slurm
        job_dir: JOB_DIR
        account: root
        partition: debug
        ssh_tunnel: {{host: 127.0.0.1, user: root, port: {SERVICES["KIT_TEST_SSH_PORT"]},
                      identity: {SERVICES["KIT_TEST_SSH_KEY"]}, job_dir: {tmp_path / "remote"}}}
        env_vars: [{", ".join(env)}]
    """)  # fmt: skip
    inp = tmp_path / "in.jsonl"
    inp.write_text("")
    args = ["--cluster=viassh", f"--config_dir={d}"]
    res = kit("generate", *args, "--expname=unseen", f"--input_file={inp}", f"--output_dir={tmp_path / 'out'}",
              "--server_type=vllm", "--model=/models/none", "--server_gpus=1", "--wait")  # fmt: skip
    assert res.returncode == 1 and "slurm job" in res.stdout, res.stdout + res.stderr  # submitted, then failed
    assert "unseen FAILED" in kit("status", *args, "unseen").stdout
    logs = kit("logs", *args, "unseen").stdout
    assert f"kit generate: error: {inp}: the input file has no records" in logs, logs
    written = sorted(p.name for p in (tmp_path / "remote" / "logs" / "unseen").rglob("*.log"))
    assert "kit.log" in written and not {"server.log", "client.log"} & set(written), written  # nothing started


def test_the_training_jobs_check_command_says_what_the_trainer_would(tmp_path):
    """`python -m pipeline_kit.training.precheck` (a TRL job's check where kit could not see its paths): the settings
    of the checkpoints already in the output folder, and the training records; it writes nothing."""
    from conftest import additions

    from pipeline_kit.training.checkpoints import run_settings
    from pipeline_kit.training.config import parse_train_overrides

    data, model, out = additions(tmp_path / "sft.jsonl", 8, 0), tmp_path / "model", tmp_path / "out"
    model.mkdir()
    (model / "config.json").write_text("{}")
    own = ["++algorithm=sft", "++backend=trl", f"++model={model}", f"++training_data={data}", f"++output_dir={out}"]

    def precheck(*more: str) -> subprocess.CompletedProcess:
        argv = [sys.executable, "-m", "pipeline_kit.training.precheck", *own, *more]
        return subprocess.run(argv, capture_output=True, text=True)

    assert precheck().returncode == 0 and not out.exists()
    out.mkdir()
    (out / "kit-train.json").write_text(json.dumps(run_settings(parse_train_overrides(own))))
    assert precheck().returncode == 0
    res = precheck("++learning_rate=1e-4")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert f"kit train: error: {out} holds a run with other settings (learning_rate: 1e-05 → 0.0001)" in res.stderr
    data.write_text('{"problem": "1+1"}\n')
    res = precheck()
    assert res.returncode == 2 and "sft.jsonl:1: the record has no 'generation' string" in res.stderr, res.stderr


def test_a_missing_input_that_kit_knows_how_to_make_says_so_where_the_job_starts(tmp_path):
    """Where kit could not look at submission (over SSH), the job's own check of a benchmark's data file names the
    command that makes it (Job.input_hints), as the submission-time check does."""
    data = str(tmp_path / "math500" / "test.jsonl")
    job = Job("ev", [CommandGroup([Command("true")])], inputs=[data], input_hints={data: "run `kit prepare_data x`"})
    script = "\n".join([PRELUDE, f'export KIT_LOG_DIR="{tmp_path / "logs"}" KIT_JOB=ev', *_input_checks(job, {})])
    proc = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    want = f"kit: job 'ev' cannot start: its input {data} does not exist; run `kit prepare_data x`\n"
    assert (tmp_path / "logs" / "ev" / "kit.log").read_text() == want
