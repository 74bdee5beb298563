"""`kit generate` through the declarative layer against a stub OpenAI-compatible endpoint (--server_type=openai):
the chunks × seeds files and .done markers, finished units left out of the plan, --rerun_done, several jobs as an
array, a client-only array on the real Slurm, and the flag errors. Real vLLM runs in test_generate_vllm.py."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import BIN, client_python, free_port, need, problems, rows

from pipeline_kit.measurements import stored_figures


def endpoint(stub) -> list[str]:
    return ["--server_type=openai", f"--server_address={stub.url}", "--model=stub"]


def test_chunks_times_seeds_give_merged_files_with_done_markers(kit, none_cluster, stub, tmp_path):
    server = stub()
    inp, out = problems(tmp_path, 10), tmp_path / "out"
    args = [*none_cluster, *endpoint(server), f"--input_file={inp}", f"--output_dir={out}"]
    res = kit(
        "generate", *args, "--num_chunks=2", "--num_random_seeds=2", "--starting_seed=4", "++inference.temperature=0.5"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        ".kit-plan.json",  # what the run planned, written at submission (kit summarize names what never started)
        "output-rs4.jsonl",
        "output-rs4.jsonl.done",
        "output-rs5.jsonl",
        "output-rs5.jsonl.done",
    ]
    assert json.loads((out / ".kit-plan.json").read_text()) == {"outputs": ["output-rs4.jsonl", "output-rs5.jsonl"]}
    dry = kit("generate", *args[:-1], f"--output_dir={tmp_path / 'dry'}", "--num_random_seeds=2", "--dry_run")
    assert dry.returncode == 0 and not (tmp_path / "dry").exists(), dry.stderr  # a dry run writes no plan
    for seed in (4, 5):
        got = rows(out / f"output-rs{seed}.jsonl")
        assert [r["id"] for r in got] == list(range(10))
        assert all(r["generation"] == f"\\boxed{{{r['id']}}}" for r in got)
    sent = server.requests()
    assert len(sent) == 20
    assert sorted({r["body"]["seed"] for r in sent}) == [4, 5] and {r["body"]["temperature"] for r in sent} == {0.5}

    # every unit is done with the same settings: nothing is requested, and a job that says so stands in for them
    same = ["--num_chunks=2", "--num_random_seeds=2", "--starting_seed=4", "++inference.temperature=0.5"]
    again = kit("generate", *args, *same, "++max_concurrent_requests=3")  # concurrency is not part of the key
    assert again.returncode == 0, again.stderr
    assert "4 of 4 units are done already" in again.stdout
    assert f"all 4 units in {out} are done; nothing to generate" in again.stderr  # the job says so as it runs
    assert len(server.requests()) == 20

    # done with other settings: one line naming what changed, and nothing is submitted
    other = kit("generate", *args, "--num_chunks=2", "--num_random_seeds=2", "--starting_seed=4")
    assert other.returncode == 2 and other.stderr.count("\n") == 1, other.stderr
    assert (
        "output-rs4.jsonl is done, but was made with other settings (inference.temperature: 0.5 → 0.0)" in other.stderr
    )
    assert "--rerun_done" in other.stderr and len(server.requests()) == 20

    # --rerun_done redoes exactly the units named
    redo = kit("generate", *args, *same[:1], "--random_seeds=5", "--chunk_ids=1", "--rerun_done", same[-1])
    assert redo.returncode == 0, redo.stdout + redo.stderr
    assert len(server.requests()) == 25
    assert [r["id"] for r in rows(out / "output-rs5.jsonl")] == list(range(10))  # merged again, in order
    assert not list(out.glob("*_chunk_*"))


def test_greedy_run_then_a_partly_done_plan_as_an_array(kit, none_cluster, stub, tmp_path):
    server = stub()
    inp, out = problems(tmp_path, 9), tmp_path / "out"
    args = [*none_cluster, *endpoint(server), f"--input_file={inp}", f"--output_dir={out}"]
    greedy = kit("generate", *args, "--expname=greedy")
    assert greedy.returncode == 0, greedy.stdout + greedy.stderr
    assert [r["id"] for r in rows(out / "output.jsonl")] == list(range(9))
    assert "seed" not in server.requests()[0]["body"]

    # chunk 0 of seed 0 is done before the run: the other 5 units run as 2 array units of the same job
    first = kit("generate", *args, "--expname=part", "--num_chunks=3", "--random_seeds=0", "--chunk_ids=0")
    assert first.returncode == 0, first.stderr
    res = kit("generate", *args, "--expname=sampled", "--num_chunks=3", "--num_random_seeds=2", "--num_jobs=2")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "1 of 6 units are done already" in res.stdout
    assert len(server.requests()) == 9 + 3 + 15
    for seed in (0, 1):
        assert [r["id"] for r in rows(out / f"output-rs{seed}.jsonl")] == list(range(9))
    logs = kit("logs", *none_cluster, "sampled").stdout
    assert "unit0-client.log" in logs and "unit1-client.log" in logs


def test_postprocess_runs_on_the_merged_file(kit, none_cluster, stub, tmp_path):
    server = stub()
    inp, out = problems(tmp_path, 4), tmp_path / "out"
    post = f"{sys.executable} -c \"import os; print('post', os.environ['KIT_OUTPUT_FILE'])\""
    res = kit(
        "generate",
        *none_cluster,
        *endpoint(server),
        f"--input_file={inp}",
        f"--output_dir={out}",
        "--num_chunks=2",
        f"--postprocess_cmd={post}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"post {out}/output.jsonl" in kit("logs", *none_cluster, "generate").stdout


@pytest.mark.slurm
def test_client_only_array_on_slurm(kit, configs, stub, tmp_path):
    """An external endpoint: each array element is a client on a fake node; they reach the stub on this host."""
    need("SLURM_CONF", "the local Slurm cluster")
    d = configs(
        "slurm",
        f"executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\nenv_vars:\n"
        f"  - KIT_CLIENT_PYTHON={client_python()}\n",
    )
    server = stub()
    inp, out = problems(tmp_path, 6), tmp_path / "out"
    res = kit(
        "generate",
        "--cluster=slurm",
        f"--config_dir={d}",
        *endpoint(server),
        f"--input_file={inp}",
        f"--output_dir={out}",
        "--num_chunks=3",
        "--wait",
        timeout=240,
    )
    assert res.returncode == 0, res.stdout + res.stderr
    assert [r["id"] for r in rows(out / "output.jsonl")] == list(range(6))
    assert len(server.requests()) == 6
    # each element's measurements (pipeline_kit.measurements): its unit, no start-up (not kit's server), a queue wait
    figures = stored_figures(configs.job_dir)
    assert sorted(f.element for f in figures) == ["0", "1", "2"]
    assert all(f.startup_s is None and f.queue_wait_s is not None for f in figures)
    assert sorted(u.label for f in figures for u in f.units) == ["chunk_0", "chunk_1", "chunk_2"]
    assert all(u.samples == 2 for f in figures for u in f.units)


@pytest.mark.parametrize(
    "flags, needle",
    [
        (["--num_random_seeds=2", "--random_seeds=1"], "give --num_random_seeds or --random_seeds, not both"),
        (["--chunk_ids=1"], "--chunk_ids needs --num_chunks"),
        (["--num_chunks=2", "--chunk_ids=0,x"], "--chunk_ids=0,x: 'x' is not a number"),
        (["--num_chunks=2", "--chunk_ids=2"], "chunk 2 is out of range 0..1"),
        (["--server_type=vllm2"], "Did you mean 'vllm'?"),
        (["--server_type=openai"], "--server_type=openai needs --server_address"),
        (["--server_address=localhost:8000"], "is not a URL like http://host:8000/v1"),
        (["--server_nodes=0"], "use 0 or more GPUs and 1 or more nodes"),
        (["--input_file=missing.jsonl"], "missing.jsonl does not exist"),
        (["--num_jobs=0"], "--num_jobs must be at least 1"),
        (["--server_type=transformers"], "input /m does not exist, and no job of this pipeline or of --run_after"),
        (["--server_type=transformers", "++chat_template_kwargs.enable_thinking=false"], "add ++server.endpoint=text"),
        (["++inference.reasoning_effort=max"], "++inference.reasoning_effort=max is not one of low, medium, high"),
        (["++max_samples=0"], "++max_samples=0: give how many records to use (1 or more), or -1 for all"),
        (["++inference.tokens_to_generate=-5"], "++inference.tokens_to_generate=-5: give the tokens a sample may have"),
        (["--server_type=transformers", "++inference.tokens_to_generate=null"], "has no 'whatever fits'"),
        (["++end_reasoning_string="], "++end_reasoning_string is empty"),
    ],
)
def test_flag_errors_are_one_line_exit_2(kit, none_cluster, tmp_path, flags, needle):
    inp = problems(tmp_path, 2)
    base = [*none_cluster, "--model=/m", f"--input_file={inp}", f"--output_dir={tmp_path / 'out'}"]
    res = kit("generate", *base, *flags)
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not (tmp_path / "out").exists()


def test_the_server_runs_on_kits_python_else_the_error_names_the_variable(kit, none_cluster, tmp_path):
    """On none the server runs here: kit's own Python when it has the server's modules (this venv has transformers,
    not vLLM), else python3 on PATH when that has them (here: the same venv), else one line naming KIT_SERVER_PYTHON."""
    model = tmp_path / "model"
    model.mkdir()
    base = [*none_cluster, f"--model={model}", f"--input_file={problems(tmp_path, 2)}", "--output_dir=/o", "--dry_run"]
    res = kit("generate", *base, env={"KIT_SERVER_PYTHON": None})
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stdout + res.stderr
    assert "--server_type=vllm needs vllm" in res.stderr and "export KIT_SERVER_PYTHON=" in res.stderr, res.stderr
    res = kit("generate", *base, env={"KIT_SERVER_PYTHON": "/opt/vllm/bin/python"})
    assert res.returncode == 0 and '"${KIT_SERVER_PYTHON:-python3}" -m vllm.entrypoints' in res.stdout, res.stderr
    res = kit("generate", *base, "--server_type=transformers", env={"KIT_SERVER_PYTHON": None})
    python = re.search(
        r'"\$\{KIT_SERVER_PYTHON:-(\S+)\}" -m pipeline_kit.servers.transformers_seeded_serve', res.stdout
    )
    assert res.returncode == 0 and python and Path(python[1]).parent == BIN, res.stdout + res.stderr


def test_relative_paths_are_refused_off_this_machine(kit, configs):
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\npartition: debug\n")
    res = kit(
        "generate", "--cluster=slurm", f"--config_dir={d}", "--model=/m", "--input_file=in.jsonl", "--output_dir=/o"
    )
    assert res.returncode == 2 and "--input_file=in.jsonl is relative" in res.stderr, res.stderr


def test_generate_has_no_lambda_references(tmp_path):
    """The client's reference to the server is an explicit object, so a plan can be inspected and compared."""
    from pipeline_kit.components.client import ClientCommand
    from pipeline_kit.pipeline.model import Endpoint
    from pipeline_kit.servers import ServerSpec

    client = ClientCommand("python3", ServerSpec("vllm", "/m"), ("++input_file=/i",), (("rs0",), ("rs1",)))
    text = client({"server": Endpoint("node7", 5000)})
    assert "++server.base_url=http://node7:5000/v1" in text
    assert text.startswith("kit_shares=('[rs0]' '[rs1]')\n") and '"++units=${kit_shares[$KIT_UNIT]}"' in text
    assert json.dumps(client.shares) == '[["rs0"], ["rs1"]]'


@pytest.mark.parametrize(
    "value", ["/a b/c", "x -c \"print('post')\"", "a\\b", "tail\\", 'echo "${KIT_OUTPUT_FILE}"', "it\\'s"]
)
def test_values_reach_the_generation_script_unchanged(value):
    from pipeline_kit.inference.config import parse_generate_config
    from pipeline_kit.overrides import override_value

    required = ["++input_file=i", "++server.base_url=u", "++server.model=m"]
    assert parse_generate_config([f"++postprocess_cmd={override_value(value)}", *required]).postprocess_cmd == value


def test_external_endpoint_gets_the_key_from_the_named_env_var(kit, none_cluster, stub, tmp_path):
    server = stub()
    inp, out = problems(tmp_path, 3), tmp_path / "out"
    args = [*none_cluster, *endpoint(server), f"--input_file={inp}", f"--output_dir={out}"]
    res = kit("generate", *args, "++server.api_key_env=PROVIDER_KEY", env={"PROVIDER_KEY": "sk-test-123"})
    assert res.returncode == 0, res.stdout + res.stderr
    sent = server.requests()
    assert len(sent) == 3 and {r["auth"] for r in sent} == {"Bearer sk-test-123"}
    assert {r["body"]["model"] for r in sent} == {"stub"} and sent[0]["path"] == "/v1/chat/completions"
    # the variable is missing where the job runs: one clear line in the job's log, no request
    res = kit("generate", *args, "--expname=nokey", "--rerun_done", "++server.api_key_env=PROVIDER_KEY")
    assert res.returncode == 1 and "$PROVIDER_KEY is not set; export it" in res.stdout, res.stdout
    assert len(server.requests()) == 3


def test_only_the_first_job_of_a_chain_reruns_the_rest_resume(kit, none_cluster, tmp_path):
    inp = problems(tmp_path, 2)
    args = [
        *none_cluster,
        f"--model={tmp_path}",
        f"--input_file={inp}",
        f"--output_dir={tmp_path / 'out'}",
        "--dry_run",
    ]
    res = kit("generate", *args, "--rerun_done", "--dependent_jobs=2")
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("==== job generate") == 3 and res.stdout.count("++rerun_done=true") == 1


@pytest.mark.parametrize("mask, want", [(0o022, 0o644), (0o077, 0o600)], ids=["umask022", "umask077"])
def test_outputs_done_and_merged_files_have_the_umask_mode(kit, none_cluster, stub, tmp_path, mask, want):
    server = stub()
    inp = problems(tmp_path, 4)
    args = [*none_cluster, *endpoint(server), f"--input_file={inp}"]
    old = os.umask(mask)  # the kit process, and the job it runs, inherit it
    try:
        merged = kit("generate", *args, f"--output_dir={tmp_path / 'merged'}", "--num_chunks=2")
        single = kit("generate", *args, f"--output_dir={tmp_path / 'single'}", "--random_seeds=1")
    finally:
        os.umask(old)
    assert merged.returncode == 0 and single.returncode == 0, merged.stderr + single.stderr
    files = [
        "merged/output.jsonl",
        "merged/output.jsonl.done",
        "single/output-rs1.jsonl",
        "single/output-rs1.jsonl.done",
    ]
    assert {f: oct(stat.S_IMODE((tmp_path / f).stat().st_mode)) for f in files} == dict.fromkeys(files, oct(want))


def test_a_refused_sample_fails_its_chunk_and_a_rerun_requests_only_it(kit, none_cluster, stub, tmp_path):
    refusing = stub("--fail_status", "422", "--fail_when", "0+4?")  # problem 4, in chunk 1
    inp, out = problems(tmp_path, 6), tmp_path / "out"
    args = [*none_cluster, f"--input_file={inp}", f"--output_dir={out}", "--num_chunks=2", "--model=stub"]
    res = kit("generate", *args, "--server_type=openai", f"--server_address={refusing.url}", "--expname=first")
    assert res.returncode == 1, res.stdout + res.stderr
    why = res.stdout.split("--- why job first failed:\n", 1)[1]  # the job's report names the failure
    assert "kit generate: error: 1 sample failed in" in why and "HTTP 422: stub refuses this request" in why, why
    written = sorted(p.name for p in out.iterdir() if p.suffix != ".lock")  # (the lock of the merge that waits)
    assert written == [  # chunk 1 is written but not done, so nothing is merged
        ".kit-plan.json",
        "output_chunk_0.jsonl",
        "output_chunk_0.jsonl.done",
        "output_chunk_1.jsonl",
        "output_chunk_1.jsonl.in-progress",
    ]
    assert [r.get("error") for r in rows(out / "output_chunk_1.jsonl")][1] == (
        "HTTP 422: stub refuses this request (status 422)"
    )

    healthy = stub()
    again = kit("generate", *args, "--server_type=openai", f"--server_address={healthy.url}", "--expname=again")
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 of 2 units are done already" in again.stdout
    assert [r["prompt"] for r in healthy.requests()] == ["What is 0+4?"]
    assert [r["generation"] for r in rows(out / "output.jsonl")] == [f"\\boxed{{{i}}}" for i in range(6)]
    assert sorted(p.name for p in out.iterdir()) == [".kit-plan.json", "output.jsonl", "output.jsonl.done"]


def test_a_run_here_names_its_logs_first_and_shows_progress_not_log_tails(kit, none_cluster, stub, tmp_path):
    server = stub()
    inp, out = problems(tmp_path, 3), tmp_path / "out"
    res = kit("generate", *none_cluster, *endpoint(server), f"--input_file={inp}", f"--output_dir={out}", "--expname=g")
    assert res.returncode == 0, res.stdout + res.stderr
    first = res.stderr.splitlines()[0]
    assert first.startswith("g: logs in ") and Path(first.removeprefix("g: logs in ")).is_dir(), res.stderr
    assert f"kit generate: wrote {out}/output.jsonl: 3 samples, 0 failed" in res.stderr
    assert "(last lines)" not in res.stdout and res.stdout == "g: job g SUCCEEDED\n", res.stdout


def test_an_unreachable_address_fails_fast_naming_it(kit, none_cluster, tmp_path):
    """A server kit did not start is up or not: --server_address where nothing listens fails after
    ++server.external_ready_timeout (default 20 s, here 2), with one line naming the address and the refusal."""
    inp = problems(tmp_path, 2)
    address = f"http://127.0.0.1:{free_port()}/v1"
    res = kit("generate", *none_cluster, "--server_type=openai", f"--server_address={address}", "--model=m",
              f"--input_file={inp}", f"--output_dir={tmp_path / 'out'}", "++server.external_ready_timeout=2",
              timeout=120)  # fmt: skip
    assert res.returncode != 0, res.stdout + res.stderr
    line = next(x for x in (res.stdout + res.stderr).splitlines() if "did not answer in 2 s" in x)
    assert address in line and "Connection refused" in line and "--server_address" in line, line


def test_eval_whose_generation_failed_skips_its_summary_saying_why_once(kit, none_cluster, tmp_path):
    address = f"http://127.0.0.1:{free_port()}/v1"
    data = f"--data_dir={tmp_path / 'data'}"
    assert kit("prepare_data", "arith", data).returncode == 0
    res = kit("eval", *none_cluster, "--server_type=openai", f"--server_address={address}", "--model=m", data,
              "--benchmarks=arith", f"--output_dir={tmp_path / 'res'}", "++server.external_ready_timeout=2",
              "--expname=ev", timeout=120)  # fmt: skip
    assert res.returncode == 1, res.stdout + res.stderr
    assert "ev: job ev FAILED\nev: job ev-summarize skipped: ev failed\n" in res.stdout, res.stdout
    assert "why job ev-summarize" not in res.stdout and res.stdout.count("did not answer in 2 s") <= 1, res.stdout


def test_an_input_that_holds_a_generation_needs_a_generation_key(kit, none_cluster, stub, tmp_path):
    """Generating over an earlier stage's output would replace its `generation`: refused at submission with the
    fix; ++generation_key=NAME keeps both (the new stats prefixed), ++generation_key=generation replaces it."""
    server = stub()
    inp = tmp_path / "solved.jsonl"
    inp.write_text("".join(json.dumps({"id": i, "problem": "1+1?", "generation": "2"}) + "\n" for i in range(2)))
    args = [*none_cluster, *endpoint(server), f"--input_file={inp}"]
    res = kit("generate", *args, f"--output_dir={tmp_path / 'a'}")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stdout + res.stderr
    assert f"{inp}:1: the record already holds 'generation'" in res.stderr and "++generation_key=NAME" in res.stderr
    assert not (tmp_path / "a").exists()
    res = kit("generate", *args, f"--output_dir={tmp_path / 'b'}", "++generation_key=check")
    assert res.returncode == 0, res.stdout + res.stderr
    for r in rows(tmp_path / "b" / "output.jsonl"):
        assert r["generation"] == "2" and r["check"] and "check_num_generated_tokens" in r, r
        assert "num_generated_tokens" not in r
    res = kit("generate", *args, f"--output_dir={tmp_path / 'c'}", "++generation_key=generation")
    assert res.returncode == 0 and all(r["generation"] != "2" for r in rows(tmp_path / "c" / "output.jsonl"))


@pytest.mark.slurm
def test_a_missing_model_folder_is_refused_at_submission_on_a_slurm_login_node(kit, configs, tmp_path):
    """Without an SSH tunnel kit runs where the cluster's paths are: a model folder that is not there (directly, or
    through a container mount) is one line at submission, and nothing is queued."""
    need("SLURM_CONF", "the local Slurm cluster")
    mounted = tmp_path / "models"
    mounted.mkdir()
    d = configs("plain", "executor: slurm\njob_dir: JOB_DIR\npartition: debug\n")
    configs("pyxis", f"executor: slurm\njob_dir: JOB_DIR\npartition: debug\ncontainers:\n  vllm: img:1\n"
                     f"mounts: ['{mounted}:/models']\n")  # fmt: skip
    base = [f"--config_dir={d}", f"--input_file={problems(tmp_path, 2)}", "--output_dir=/o", "--expname=nomodel"]
    res = kit("generate", "--cluster=plain", *base, f"--model={tmp_path / 'no-such-model'}")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stdout + res.stderr
    assert f"input {tmp_path / 'no-such-model'} does not exist" in res.stderr, res.stderr
    res = kit("generate", "--cluster=pyxis", *base, "--model=/models/qwen")  # the vllm container, with the mount
    assert res.returncode == 2, res.stdout + res.stderr
    assert f"input /models/qwen (here {mounted}/qwen, through the job's container mounts) does not exist" in res.stderr
    queued = subprocess.run(["squeue", "-h", "-n", "nomodel", "-o", "%i"], capture_output=True, text=True)
    assert queued.stdout.strip() == "", queued.stdout
