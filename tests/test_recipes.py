"""`kit run_recipe`: the recipes' --help and dry runs, the stage plan against `.stage.done` keys (skip, rerun of a
changed stage and of every stage after it), and the AIMO recipe end to end with the tiny model on none and once on
the local Slurm."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
from conftest import SERVICES, TRAIN_ENV, additions, need, plan_lines, sacct, slurm_train_config

from pipeline_kit.recipes import RECIPES

TOY = ["--sft_args=++max_steps=2 ++max_length=64 ++logging_steps=1",
       "--grpo_args=++max_steps=1 ++num_generations=2 ++micro_batch_size=2 ++max_completion_length=8",
       "--eval_args=++inference.tokens_to_generate=8 ++max_concurrent_requests=8",
       "--benchmarks=arith", "--server_type=transformers"]  # fmt: skip


def aimo_files(tmp_path: Path) -> list[str]:
    cot = additions(tmp_path / "cot.jsonl", 16, 0)
    tir = additions(tmp_path / "tir.jsonl", 16, 1)
    rl = additions(tmp_path / "rl.jsonl", 8, 2, with_generation=False)
    return [f"--cot_data={cot}", f"--tir_data={tir}", f"--rl_data={rl}"]


def test_run_recipe_help_lists_recipes_and_their_parameters(kit):
    res = kit("run_recipe", "--help")
    assert res.returncode == 0 and "aimo" in res.stdout
    res = kit("run_recipe", "aimo", "--help")
    assert res.returncode == 0
    for flag in ("--base_model", "--cot_data", "--tir_data", "--rl_data", "--start_from", "--grpo_args", "--cluster",
                 "--dry_run"):  # fmt: skip
        assert flag in res.stdout, flag


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--start_from=sft"], "--start_from=sft is not a stage; use one of cot_sft, tir_generate, tir_filter"),
        (["--start_from=tir_filter"], "--start_from=tir_filter: with --tir_data the TIR data is given"),
        (["--start_from=eval", "--stop_after=grpo"], "--stop_after=grpo comes before --start_from=eval; swap them."),
        (["--sft_args=max_steps=2"], "--sft_args: 'max_steps=2' is not ++key=value"),
        (["--stop_after=cot_sft", "--cot_data="], "--cot_data is required for stage cot_sft."),
        (["--grpo_args=++max_stepz=1"], "unknown key ++max_stepz. Did you mean ++max_steps?"),
        (["--benchmarks=aime42"], "unknown benchmark 'aime42'"),
        (["--tir_data=", "--tir_samples=0"], "--tir_samples=0: sample at least 1."),
        (["--tir_data=", "--tir_generate_args=++prompt_config=generic/math"], "++prompt_config is set by the recipe"),
        (["--tir_data=", "--tir_generate_args=++max_code_executionz=2"], "unknown key ++max_code_executionz"),
        (["--tir_prompt_config=aimo/nope"], "++prompt_config=aimo/nope is not a shipped prompt"),
    ],
)
def test_bad_recipe_input_is_one_line(kit, tmp_path, args, needle):
    model = tmp_path / "m"
    model.mkdir()
    (model / "config.json").write_text("{}")
    res = kit("run_recipe", "aimo", f"--base_model={model}", f"--output_dir={tmp_path / 'out'}",
              *aimo_files(tmp_path), *args, "--dry_run")  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_dry_run_plans_and_touches_nothing(kit, tmp_path):
    base = tmp_path / "m"
    base.mkdir()
    (base / "config.json").write_text("{}")
    out, data_dir = tmp_path / "out", tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0  # the eval stage checks its data
    res = kit("run_recipe", "aimo", f"--base_model={base}", f"--output_dir={out}", *aimo_files(tmp_path), *TOY,
              f"--data_dir={data_dir}", "--start_from=grpo", "--dry_run")  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "aimo") == {"grpo": "run", "eval": "run"}
    assert "==== job aimo-grpo (none)" in res.stdout and "==== job aimo-eval-done (none)" in res.stdout
    assert "aimo-cot_sft" not in res.stdout and not out.exists()
    assert "reward.parse_reasoning" not in res.stdout and "genselect" not in res.stdout
    # --reasoning --genselect: GRPO rewards the answer alone; the eval splits the thinking (the budget stays the
    # benchmark's on transformers, which has no "whatever fits") and runs GenSelect after the samples
    res = kit("run_recipe", "aimo", f"--base_model={base}", f"--output_dir={out}", *aimo_files(tmp_path), *TOY,
              f"--data_dir={data_dir}", "--start_from=grpo", "--reasoning", "--genselect", "--benchmarks=arith:4",
              "--dry_run")  # fmt: skip
    assert res.returncode == 0, res.stderr
    scripts = re.sub("[\"']", "", res.stdout)
    assert "++reward.parse_reasoning=true" in scripts and "++parse_reasoning=true" in scripts
    assert "==== job aimo-eval-genselect (none)" in res.stdout and "tokens_to_generate=null" not in scripts
    res = kit("run_recipe", "aimo", f"--base_model={base}", f"--output_dir={out}", *aimo_files(tmp_path), *TOY,
              f"--data_dir={data_dir}", "--start_from=grpo", "--genselect", "--dry_run")  # fmt: skip
    assert res.returncode == 2 and "--genselect picks among each benchmark's samples" in res.stderr, res.stderr


CODE_TIR = "```python\nprint({a}+{b})\n```\n```output\n{c}\n```\n\\boxed{{{c}}}"  # a TIR solution, code run


def tir_format_data(path: Path) -> Path:
    """All 100 'What is a+b?' with a TIR solution: the tiny model, which answers \\boxed{a+b} only, learns from them
    in the test's CoT SFT stage to open a code block, close it and box an answer after the output."""
    rows = [{"problem": f"What is {a}+{b}?", "generation": CODE_TIR.format(a=a, b=b, c=a + b)}
            for a in range(10) for b in range(10)]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def tir_problems(path: Path) -> Path:
    """24 problems to make TIR solutions for; the last 4 with a wrong expected answer, so some are surely dropped."""
    rows = [{"id": f"t{i}", "problem": f"What is {a}+{b}?", "expected_answer": str(a + b + (100 if i >= 20 else 0))}
            for i, (a, b) in enumerate((i % 10, (3 * i + 1) % 10) for i in range(24))]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def jsonl_rows(folder: Path, pattern: str) -> list[dict]:
    return [json.loads(line) for f in sorted(folder.glob(pattern)) for line in f.read_text().splitlines()]


@pytest.mark.models
def test_without_tir_data_the_recipe_generates_it_with_the_sandbox_and_filters_it(kit, tmp_path):
    """The dry run of the whole chain: the TIR generation from cot_sft/final over --tir_problems, with a sandbox and
    code execution; the filter over its outputs; the TIR SFT on what the filter keeps; the eval with the sandbox."""
    base = tmp_path / "m"
    base.mkdir()
    (base / "config.json").write_text("{}")
    out, data_dir = tmp_path / "out", tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0
    files = [a for a in aimo_files(tmp_path) if not a.startswith("--tir_data")]
    problems = tir_problems(tmp_path / "problems.jsonl")
    # problems that already hold a solution (an SFT file's): the TIR solution replaces it, as the filter reads it
    problems.write_text("".join(json.dumps({**json.loads(line), "generation": "CoT"}) + "\n"
                                for line in problems.read_text().splitlines()))  # fmt: skip
    res = kit("run_recipe", "aimo", f"--base_model={base}", f"--output_dir={out}", *files, *TOY, "--tir_samples=2",
              f"--tir_problems={problems}", f"--data_dir={data_dir}", "--eval_with_sandbox", "--dry_run")  # fmt: skip
    assert res.returncode == 0, res.stderr
    stages = ("cot_sft", "tir_generate", "tir_filter", "tir_sft", "grpo", "eval")
    assert plan_lines(res.stderr, "aimo") == dict.fromkeys(stages, "run")
    scripts = dict(re.findall(r"---- script (\S+)\[0\]\n(.*?)(?=\n==== job |\Z)", res.stdout, re.S))
    generate = scripts["aimo-tir_generate"]
    assert "kit_start sandbox" in generate and "++sandbox_address=" in generate
    for needle in ("++code_execution=true", "++prompt_config=aimo/tir", f"++input_file={problems}",
                   f"++server.model={out}/cot_sft/final", f"++output_dir={out}/tir_generate",
                   "++server.endpoint=text", "++generation_key=generation"):  # fmt: skip
        assert needle in re.sub("[\"']", "", generate), needle
    assert f"tir_filter {out}/tir_generate {out}/tir_filter/tir_sft.jsonl" in scripts["aimo-tir_filter"]
    assert f"++training_data={out}/tir_filter/tir_sft.jsonl" in scripts["aimo-tir_sft"]
    evaluate = re.sub("[\"']", "", scripts["aimo-eval"])
    assert "kit_start sandbox" in evaluate and "++code_execution=true" in evaluate and "++sandbox_address=" in evaluate
    assert "++server.endpoint=text" in evaluate
    assert f"{out}/tir_generate/output-rs1.jsonl" in scripts["aimo-tir_generate-done"]


@pytest.mark.models
def test_aimo_makes_its_tir_data_with_the_sandbox_trains_on_it_and_evaluates_with_code(kit, tmp_path):
    """The whole chain on none: the CoT SFT (here on TIR-formatted additions, so that the tiny model writes code)
    -> TIR generation whose code the real sandbox runs -> the filter's counts -> TIR SFT on the kept records ->
    GRPO -> eval with the sandbox and code execution; a rerun submits nothing, and a changed stage is planned to rerun
    with the ones after it."""
    need("KIT_TEST_TINY_MODEL", "the tiny model (tests/services/models_up.sh)")
    data_dir = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0
    out = tmp_path / "aimo"
    env = {**TRAIN_ENV, "KIT_SERVER_PYTHON": SERVICES["KIT_TEST_HF_PYTHON"]}
    rl = additions(tmp_path / "rl.jsonl", 8, 2, with_generation=False)
    args = ["run_recipe", "aimo", f"--base_model={SERVICES['KIT_TEST_TINY_MODEL']}", f"--output_dir={out}",
            f"--data_dir={data_dir}", f"--cot_data={tir_format_data(tmp_path / 'cot.jsonl')}", f"--rl_data={rl}",
            f"--tir_problems={tir_problems(tmp_path / 'problems.jsonl')}", "--tir_samples=1", "--tir_temperature=0",
            "--tir_generate_args=++inference.tokens_to_generate=48 ++max_concurrent_requests=8",
            "--sft_args=++max_steps=110 ++learning_rate=5e-3 ++lr_scheduler=constant ++micro_batch_size=16 "
            "++max_length=192 ++logging_steps=10 ++prompt_config=aimo/tir",
            "--tir_sft_args=++max_steps=2 ++micro_batch_size=4 ++learning_rate=1e-5", "--eval_with_sandbox",
            "--grpo_args=++max_steps=1 ++num_generations=2 ++micro_batch_size=2 ++max_completion_length=8",
            "--eval_args=++inference.tokens_to_generate=48 ++max_concurrent_requests=8", "--benchmarks=arith",
            "--server_type=transformers"]  # fmt: skip
    t0 = time.time()
    res = kit(*args, env=env, timeout=1500)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    print(f"aimo recipe on none, all 6 stages: {time.time() - t0:.1f}s")
    stages = ("cot_sft", "tir_generate", "tir_filter", "tir_sft", "grpo", "eval")
    assert plan_lines(res.stderr, "aimo") == dict.fromkeys(stages, "run")

    # the TIR generation: the CoT-SFT model's code ran in the real sandbox, its output spliced into the solution
    generated = jsonl_rows(out / "tir_generate", "output-rs0.jsonl")
    assert len(generated) == 24
    ran = [r for r in generated if r["code_rounds_executed"] >= 1 and r["code_last_status"] == "completed"]
    assert ran and all("```output\n" in r["generation"] for r in ran), generated[:3]
    for r in ran:  # the output block holds what the code printed
        code = r["generation"].split("```python\n", 1)[1].split("```", 1)[0]
        printed = r["generation"].split("```output\n", 1)[1].split("```", 1)[0]
        assert printed.strip() == str(eval(code.strip().removeprefix("print"))), r["generation"]  # noqa: S307
    # the filter: kept > 0, every drop counted by its reason, the 4 mislabelled problems among the dropped
    summary = json.loads((out / "tir_filter" / "summary.json").read_text())
    print(f"TIR filter: {summary['kept']} kept of {summary['records']}, dropped {summary['dropped']}")
    assert summary["records"] == 24 and summary["kept"] > 0
    assert summary["kept"] + sum(summary["dropped"].values()) == 24
    assert summary["dropped"]["wrong_answer"] >= 4
    kept = jsonl_rows(out / "tir_filter", "tir_sft.jsonl")
    assert len(kept) == summary["kept"] and all(int(r["id"][1:]) < 20 and "```output" in r["generation"] for r in kept)
    # the training stages, each from the model the one before made; the TIR SFT on the kept records
    for stage, model in (("cot_sft", SERVICES["KIT_TEST_TINY_MODEL"]), ("tir_sft", str(out / "cot_sft" / "final")),
                         ("grpo", str(out / "tir_sft" / "final"))):  # fmt: skip
        assert (out / stage / "final" / "config.json").is_file(), stage
        trained = json.loads((out / stage / "kit-train.json").read_text())
        assert trained["model"] == model, stage
    assert json.loads((out / "tir_sft" / "kit-train.json").read_text())["training_data"] == str(
        out / "tir_filter" / "tir_sft.jsonl"
    )
    # the eval ran with the sandbox: code executed in its samples
    assert "arith" in json.loads((out / "eval" / "metrics.json").read_text())
    evaluated = jsonl_rows(out / "eval" / "eval-results" / "arith", "output*.jsonl")
    assert evaluated and sum(r["code_rounds_executed"] for r in evaluated) > 0
    keys = {s: json.loads((out / s / ".stage.done").read_text())["key"] for s in stages}

    res = kit(*args, env=env)  # the same settings: nothing is submitted
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "aimo") == dict.fromkeys(keys, "skip")
    assert "every stage is done with the same settings; nothing to submit" in res.stderr and "job" not in res.stdout

    # GRPO changed: it and eval rerun, the stages before are kept (a changed stage's real rerun, its output replaced,
    # is test_recipe_metamath's and test_recipe_magpie's, on cheaper stages)
    changed = [a.replace("++max_steps=1", "++max_steps=2") if a.startswith("--grpo_args") else a for a in args]
    res = kit(*changed, "--dry_run", env=env)
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "aimo") == {**dict.fromkeys(stages[:4], "skip"), "grpo": "rerun", "eval": "rerun"}

    problems = tmp_path / "problems.jsonl"  # new TIR problems: the generation and everything after it rerun
    problems.write_text(problems.read_text().replace('"What is 0+1?"', '"What is 1+0?"'))
    res = kit(*changed, "--stop_after=tir_generate", "--dry_run", env=env)
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "aimo") == {"cot_sft": "skip", "tir_generate": "rerun"}


@pytest.mark.models
def test_aimo_reasoning_variant_evaluates_genselect_beside_pass_and_majority(kit, tmp_path):
    """The AIMO-2 path (--reasoning --genselect) with the reasoning tiny model (it thinks "<think>Add a and b.</think>"
    before its \\boxed answer), its eval stage on none: 4 solutions per problem with their thinking kept apart, then
    GenSelect picks one per problem, and the summary shows pass@1[avg-of-4], majority@4 and genselect@4 side by side.
    (GRPO's part of --reasoning, the reward on the answer alone, is in the dry run below.)"""
    need("KIT_TEST_TINY_THINK", "the reasoning tiny model (tests/services/models_up.sh)")
    data_dir, out = tmp_path / "data", tmp_path / "aimo"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0
    res = kit("run_recipe", "aimo", f"--base_model={SERVICES['KIT_TEST_TINY_THINK']}", f"--output_dir={out}",
              f"--data_dir={data_dir}", "--start_from=eval", "--reasoning", "--genselect", "--benchmarks=arith:4",
              "--eval_args=++inference.tokens_to_generate=40 ++max_concurrent_requests=8 ++max_samples=12 "
              "++inference.temperature=1.2", "--server_type=transformers",
              env={"KIT_SERVER_PYTHON": SERVICES["KIT_TEST_HF_PYTHON"]}, timeout=900)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert plan_lines(res.stderr, "aimo") == {"eval": "run"}
    results = out / "eval" / "eval-results" / "arith"
    sampled = jsonl_rows(results, "output-rs*.jsonl")
    assert len(sampled) == 48 and all("reasoning_content" in r and "<think>" not in r["generation"] for r in sampled)
    picked = jsonl_rows(results / "genselect", "output.jsonl")
    assert len(picked) == 12 and all(r["genselect"]["chosen_run"].startswith("output-rs") for r in picked), picked
    asked = sum(len(r["genselect"]["windows"]) for r in picked)
    print(f"genselect: {asked} windows asked; decided by {[r['genselect']['decided_by'] for r in picked]}")
    metrics = json.loads((out / "eval" / "metrics.json").read_text())["arith"]
    assert metrics["reasoning"]["samples"] == 48, metrics["reasoning"]
    table = kit("summarize", str(out / "eval")).stdout
    for row in ("pass@1[avg-of-4]", "majority@4", "genselect@4", "pass@4"):
        assert row in metrics and re.search(rf"^{re.escape(row)} +\|", table, re.M), (row, table)


@pytest.mark.slurm
@pytest.mark.models
def test_aimo_on_the_local_slurm(kit, configs, tmp_path):
    """The same recipe as one Slurm submission: every stage a job (the eval a het job: server + client) after the
    previous stage's done job; a rerun then submits nothing."""
    need("SLURM_CONF", "the local Slurm cluster")
    need("KIT_TEST_TINY_MODEL", "the tiny model (tests/services/models_up.sh)")
    d = slurm_train_config(configs)
    data_dir = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data_dir}").returncode == 0
    out = tmp_path / "aimo"
    args = ["run_recipe", "aimo", "--cluster=slurm", f"--config_dir={d}", f"--base_model={SERVICES['KIT_TEST_TINY_MODEL']}",
            f"--output_dir={out}", f"--data_dir={data_dir}", *aimo_files(tmp_path), *TOY]  # fmt: skip
    t0 = time.time()
    res = kit(*args, "--wait", timeout=900)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    print(f"aimo recipe on the local Slurm: {time.time() - t0:.1f}s")
    jobs = re.findall(r"job (\S+) (\S+) \(slurm job (\d+)\)", res.stdout)
    assert [name for name, _, _ in jobs] == [f"aimo-{s}{part}" for s in ("cot_sft", "tir_sft", "grpo")
                                              for part in ("", "-done")] + ["aimo-eval-arith", "aimo-eval-summarize",
                                                                            "aimo-eval-done"]  # fmt: skip
    assert {state for _, state, _ in jobs} == {"SUCCEEDED"}, jobs
    times = sacct_times([i for _, _, i in jobs])
    for (_, _, before), (_, _, after) in zip(jobs, jobs[1:], strict=False):
        assert times[after][0] >= times[before][1], (before, after, times)  # each starts once the one before ended
    assert all((out / s / ".stage.done").is_file() for s in ("cot_sft", "tir_sft", "grpo", "eval"))
    res = kit(*args)
    assert res.returncode == 0 and "nothing to submit" in res.stderr and "slurm job" not in res.stdout, res.stderr


def sacct_times(ids: list[str]) -> dict[str, tuple[str, str]]:
    """{job id: (Start, End)} from sacct (ISO times compare as strings); a het job's by its first component."""
    rows = sacct(ids, "Start")
    return {
        r["JobID"].split("+")[0]: (r["Start"], r["End"])
        for r in rows
        if r["JobID"].endswith("+0") or "+" not in r["JobID"]
    }


def required_flags(recipe: str, tmp_path: Path) -> list[str]:
    """Only what a recipe requires (its model and data, made here); every other parameter keeps its default."""
    model = tmp_path / "model"
    model.mkdir(exist_ok=True)
    (model / "config.json").write_text("{}")
    out = f"--output_dir={tmp_path / 'out'}"
    problems = additions(tmp_path / "problems.jsonl", 8, 2, with_generation=False)
    if recipe == "aimo":
        cot = additions(tmp_path / "cot.jsonl", 8, 0)
        data_dir = tmp_path / "data"  # the eval stage's default benchmark, as `kit prepare_data aime24` leaves it
        (data_dir / "aime24").mkdir(parents=True)
        (data_dir / "aime24" / "test.jsonl").write_text(problems.read_text())
        return [f"--base_model={model}", out, f"--cot_data={cot}", f"--rl_data={problems}", f"--data_dir={data_dir}"]
    if recipe == "magpie_math":
        return [f"--model={model}", out]
    if recipe == "metamath":
        return [f"--model={model}", out, f"--input_file={problems}"]
    raise AssertionError(f"a shipped recipe without its required flags here: {recipe}")


@pytest.mark.parametrize("executor", ["none", "slurm"])
@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_every_recipes_defaults_hold_on_none_and_on_slurm(kit, configs, tmp_path, recipe, executor):
    """Each shipped recipe's dry run with its defaults (and only its required flags) is accepted: on none (one
    CPU process trains: GRPO's batch is derived from ++num_generations) and on a Slurm cluster config."""
    if executor == "slurm":
        d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n")
    else:
        d = configs("procs", "executor: none\njob_dir: JOB_DIR\n")
    cluster = ["--cluster=slurm" if executor == "slurm" else "--cluster=procs", f"--config_dir={d}"]
    res = kit("run_recipe", recipe, *cluster, *required_flags(recipe, tmp_path), "--dry_run")
    assert res.returncode == 0, res.stderr
    assert f"==== job {recipe}" in res.stdout and not (tmp_path / "out").exists()
    if recipe == "aimo":  # GRPO on one CPU process: 1 completion x 8 steps, one group of ++num_generations=8
        assert "++gradient_accumulation_steps=8" in res.stdout
