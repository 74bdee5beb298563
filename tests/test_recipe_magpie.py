"""`kit run_recipe magpie_math`: the pre-query prefix of real chat templates, pair selection by hand, the file steps
(filter, gather, grade), bad input as one line, and the recipe end to end on none with the tiny model and the tiny
reward model (every file's format, and DPO on the pairs), then a rerun that submits nothing and one that reruns only
the changed stage."""

from __future__ import annotations

import json
import time

import pytest
from conftest import SERVICES, TRAIN_ENV, need, plan_lines, rows

from pipeline_kit.errors import UserError
from pipeline_kit.inference.chat_template import ChatTemplate
from pipeline_kit.recipes import magpie_data
from pipeline_kit.recipes.preference_pairs import preference_pairs, select_pair

# Qwen2.5-Instruct's template without its tool branch: a system message, else a default one
QWEN_STYLE = (
    "{%- if messages[0]['role'] == 'system' %}{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant."
    "<|im_end|>\\n' }}{%- endif %}"
    "{%- for message in messages %}{%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}{%- endif %}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
LLAMA3_STYLE = (
    "{{- bos_token }}{%- for message in messages %}{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>"
    "\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{%- endif %}"
)


def test_pre_query_prefix_of_the_tiny_model_and_of_a_qwen_style_template(tmp_path):
    need("KIT_TEST_TINY_MODEL", "the tiny model (tests/services/models_up.sh)")
    tiny = ChatTemplate(SERVICES["KIT_TEST_TINY_MODEL"])
    assert tiny.pre_query("Be a number theorist.") == (
        "<|im_start|>system\nBe a number theorist.<|im_end|>\n<|im_start|>user\n",
        "<|im_end|>",
    )
    assert tiny.pre_query("") == ("<|im_start|>user\n", "<|im_end|>")  # no system prompt: no system turn
    qwen = tmp_path / "qwen.jinja"
    qwen.write_text(QWEN_STYLE)  # a .jinja file has no eos_token: the end of turn is read off the template
    assert ChatTemplate(str(qwen)).pre_query("Algebra.") == (
        "<|im_start|>system\nAlgebra.<|im_end|>\n<|im_start|>user\n",
        "<|im_end|>",
    )
    assert ChatTemplate(str(qwen)).pre_query("")[0].startswith("<|im_start|>system\nYou are Qwen")
    llama = tmp_path / "llama.jinja"
    llama.write_text(LLAMA3_STYLE)
    prefix, end = ChatTemplate(str(llama)).pre_query("Geometry.")
    assert (
        prefix
        == "<|start_header_id|>system<|end_header_id|>\n\nGeometry.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
    )
    assert end == "<|eot_id|>"


def response(pid: str, seed: int, score: float | None, text: str | None = None) -> dict:
    return {"id": pid, "domain": "algebra", "problem": f"problem {pid}", "generation": text or f"{pid}/{seed}",
            "seed": seed, "s": score}  # fmt: skip


def test_pair_selection_by_hand():
    # best 2.0 (seed 1), worst -1.0 (seed 2): gap 3.0
    rows = [response("a", 0, 0.5), response("a", 1, 2.0), response("a", 2, -1.0)]
    best, worst = select_pair(rows, "s", 3.0)
    assert (best["seed"], worst["seed"]) == (1, 2)
    assert select_pair(rows, "s", 3.01) is None  # the gap is under the minimum
    # ties: the first of equal best and of equal worst (lowest seed)
    tied = [response("b", 0, 1.0), response("b", 1, 0.0), response("b", 2, 1.0), response("b", 3, 0.0)]
    best, worst = select_pair(tied, "s", 0.0)
    assert (best["seed"], worst["seed"]) == (0, 1)
    assert select_pair([response("c", 0, 1.0), response("c", 1, 1.0)], "s", 0.0) is None  # all equal: no pair
    assert select_pair([response("d", 0, 1.0), response("d", 1, None)], "s", 0.0) is None  # one scored response
    best, worst = select_pair([response("e", 0, float("nan")), response("e", 1, 1.0), response("e", 2, 0.0)], "s", 1.0)
    assert (best["seed"], worst["seed"]) == (1, 2)  # a NaN score is no score

    pairs = preference_pairs(rows + tied, "s", 0.5, "generic/math")
    assert [(p["id"], p["chosen_score"], p["rejected_score"]) for p in pairs] == [("a", 2.0, -1.0), ("b", 1.0, 0.0)]
    first = pairs[0]
    assert first["chosen"] == [{"role": "assistant", "content": "a/1"}]
    assert first["rejected"] == [{"role": "assistant", "content": "a/2"}]
    assert first["prompt"][-1]["role"] == "user" and "problem a" in first["prompt"][-1]["content"]
    assert first["problem"] == "problem a" and first["domain"] == "algebra"


def test_filter_gather_and_grade(tmp_path):
    rows = [(1, {"id": "x-0", "domain": "algebra", "problem": "  What is 2+2?  "}),
            (2, {"id": "x-1", "domain": "algebra", "problem": ""}),
            (3, {"id": "x-2", "domain": "algebra", "problem": "what is 2+2?\n"}),  # a duplicate
            (4, {"id": "x-3", "domain": "algebra", "problem": "1+1?", "error": "context length exceeded"}),
            (5, {"problem": "3+4?", "expected_answer": 7})]  # fmt: skip
    assert magpie_data.filter_problems(rows, "in.jsonl") == [
        {"id": "x-0", "domain": "algebra", "problem": "What is 2+2?"},
        {"id": "input-5", "domain": "input", "problem": "3+4?", "expected_answer": 7},
    ]
    with pytest.raises(UserError, match="in.jsonl:1: 'problem' is int"):
        magpie_data.filter_problems([(1, {"problem": 3})], "in.jsonl")
    with pytest.raises(UserError, match="in.jsonl:2: id 'a' again \\(first on line 1\\)"):
        magpie_data.filter_problems(
            [(1, {"id": "a", "problem": "1+1"}), (2, {"id": "a", "problem": "2+2"})], "in.jsonl"
        )

    solutions = tmp_path / "solutions.jsonl"
    solutions.write_text(json.dumps({"id": "p", "generation": "so \\boxed{4}"}) + "\n"
                         + json.dumps({"id": "q", "expected_answer": 7, "generation": "\\boxed{8}"}) + "\n")  # fmt: skip
    responses = tmp_path / "responses"
    responses.mkdir()
    for seed, (p_text, q_text) in enumerate([("\\boxed{4}", "\\boxed{8}"), ("\\boxed{5}", "\\boxed{7}")]):
        (responses / f"output-rs{seed}.jsonl").write_text(
            json.dumps({"id": "p", "problem": "2+2", "generation": p_text}) + "\n"
            + json.dumps({"id": "q", "problem": "3+4", "generation": q_text}) + "\n"
        )  # fmt: skip
    failed = {"id": "q", "problem": "3+4", "generation": "", "error": "HTTP 500"}  # a failed request: no response
    with (responses / "output-rs1.jsonl").open("a") as f:
        f.write(json.dumps(failed) + "\n")
    gathered = magpie_data.gather(str(responses), str(solutions))
    assert [(r["id"], r["seed"], r["reference_answer"]) for r in gathered] == [
        ("p", 0, "4"), ("p", 1, "4"), ("q", 0, "7"), ("q", 1, "7")]  # fmt: skip
    scores = [r["score"] for r in magpie_data.grade(list(enumerate(gathered, 1)))]
    assert scores == [1.0, 0.0, 0.0, 1.0]


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--domains=algebra,topology"], "--domains=algebra,topology: 'topology' is not a domain; use some of algebra, number_theory, geometry"),
        (["--scorer=reward"], "--scorer=reward needs --reward_model"),
        (["--scorer=judge"], "--scorer=judge is not a scorer; use reward (with --reward_model) or grader."),
        (["--num_responses=1"], "--num_responses=1: a pair needs at least 2 responses per problem."),
        (["--generate_args=max_concurrent_requests=2"], "--generate_args: 'max_concurrent_requests=2' is not ++key=value"),
        (["--generate_args=++inference.temprature=1"], "unknown key ++inference.temprature"),
        (["--stop_after=dpoo"], "--stop_after=dpoo is not a stage; use one of requests, problems, filter,"),
        (["--dpo_args=++num_generations=4"], "++num_generations is a GRPO setting; drop it for kit dpo."),
    ],
)  # fmt: skip
def test_bad_recipe_input_is_one_line(kit, tmp_path, args, needle):
    res = kit("run_recipe", "magpie_math", f"--model={tmp_path}", f"--output_dir={tmp_path / 'out'}", *args,
              "--dry_run")  # fmt: skip
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_magpie_generation_type_needs_the_text_endpoint_and_a_system_field(tmp_path):
    need("KIT_TEST_TINY_MODEL", "the tiny model (tests/services/models_up.sh)")
    from pipeline_kit.inference.config import parse_generate_config
    from pipeline_kit.inference.magpie import MagpieTask

    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": 1, "system": "Algebra."}) + "\n" + json.dumps({"id": 2}) + "\n")
    base = [f"++input_file={rows}", f"++output_file={tmp_path / 'o.jsonl'}", "++server.base_url=http://x/v1",
            f"++server.model={SERVICES['KIT_TEST_TINY_MODEL']}", "++generation_type=magpie"]  # fmt: skip
    with pytest.raises(UserError, match=r"add \+\+server\.endpoint=text"):
        MagpieTask(parse_generate_config(base))
    with pytest.raises(UserError, match="line 2 has no 'system' text"):
        MagpieTask(parse_generate_config([*base, "++server.endpoint=text"]))


@pytest.mark.models
def test_magpie_math_end_to_end_then_a_rerun_submits_nothing(kit, tmp_path):
    need("KIT_TEST_TINY_MODEL", "the tiny model (tests/services/models_up.sh)")
    need("KIT_TEST_TINY_RM", "the tiny reward model (tests/services/models_up.sh)")
    out = tmp_path / "magpie"
    model = SERVICES["KIT_TEST_TINY_MODEL"]  # its generation_config.json says greedy; kit's requests sample anyway
    args = ["run_recipe", "magpie_math", f"--model={model}", f"--output_dir={out}", "--domains=algebra,number_theory",
            "--num_problems=3", "--num_responses=3", "--problem_tokens=24", "--tokens_to_generate=12",
            "--server_type=transformers", "--scorer=reward", f"--reward_model={SERVICES['KIT_TEST_TINY_RM']}",
            "--min_score_gap=0", "--generate_args=++max_concurrent_requests=8",
            "--problem_temperature=3", "--response_temperature=5",  # the trained tiny model is sure of itself
            "--dpo_args=++max_steps=2 ++micro_batch_size=2 ++max_length=128 ++report_to=none"]  # fmt: skip
    env = {"KIT_SERVER_PYTHON": SERVICES["KIT_TEST_HF_PYTHON"], **TRAIN_ENV}
    t0 = time.time()
    res = kit(*args, env=env, timeout=400)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    print(f"magpie_math recipe on none, 9 stages, 4 servers: {time.time() - t0:.1f}s")
    stages = ["requests", "problems", "filter", "solutions", "responses", "gather", "scores", "pairs", "dpo"]
    assert plan_lines(res.stderr, "magpie_math") == dict.fromkeys(stages, "run")

    requests = rows(out / "requests" / "requests.jsonl")
    assert [r["id"] for r in requests] == [f"{d}-{k}" for d in ("algebra", "number_theory") for k in range(3)]
    assert all(
        r["system"].startswith("You are a helpful assistant for " + r["domain"].replace("_", " ")) for r in requests
    )
    written = rows(out / "problems" / "output.jsonl")
    assert [r["id"] for r in written] == [r["id"] for r in requests]
    assert all(isinstance(r["problem"], str) for r in written) and len({r["seed"] for r in written}) == 6
    problems = rows(out / "filter" / "problems.jsonl")
    expected = list({" ".join(r["problem"].split()).lower(): r for r in written if r["problem"]}.values())
    assert problems and [set(r) for r in problems] == [{"id", "domain", "problem"}] * len(problems)
    assert {r["problem"] for r in problems} == {r["problem"] for r in expected}
    sft = rows(out / "solutions" / "sft.jsonl")
    assert sft and all(set(r) == {"problem", "generation", "id", "domain", "source"} for r in sft)
    assert {r["problem"] for r in sft} <= {r["problem"] for r in problems}
    for k in range(3):
        assert len(rows(out / "responses" / f"output-rs{k}.jsonl")) == len(problems)
    scored = rows(out / "scores" / "output.jsonl")
    assert len(scored) == 3 * len(problems) and all(isinstance(r["reward_model_score"], float) for r in scored)
    pairs = rows(out / "pairs" / "preference_pairs.jsonl")
    by_id = {}
    for r in scored:
        by_id.setdefault(r["id"], []).append(r)
    want = {
        pid: (max(s), min(s)) for pid, rs in by_id.items() if len(set(s := [r["reward_model_score"] for r in rs])) > 1
    }
    assert {p["id"]: (p["chosen_score"], p["rejected_score"]) for p in pairs} == want
    assert pairs, "the sampled responses of no problem differ in score"
    for p in pairs:
        assert set(p) == {"prompt", "chosen", "rejected", "problem", "chosen_score", "rejected_score", "id", "domain"}
        assert p["prompt"][-1]["role"] == "user" and p["problem"] in p["prompt"][-1]["content"]
        assert p["chosen"][0]["role"] == p["rejected"][0]["role"] == "assistant"
    # the last stage: the model trained on its own pairs
    dpo = json.loads((out / "dpo" / "kit-train.json").read_text())
    assert (dpo["algorithm"], dpo["model"], dpo["training_data"]) == (
        "dpo",
        model,
        str(out / "pairs" / "preference_pairs.jsonl"),
    )
    assert (out / "dpo" / "checkpoint-2" / "kit-complete").is_file() and (
        out / "dpo" / "final" / "config.json"
    ).is_file()

    res = kit(*args, env=env)  # the same settings: nothing is submitted
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "magpie_math") == dict.fromkeys(stages, "skip") and "nothing to submit" in res.stderr
    assert "job" not in res.stdout

    changed = [a if a != "--min_score_gap=0" else "--min_score_gap=1000" for a in args]
    res = kit(*changed, "--stop_after=pairs", env=env, timeout=120)  # only pairs' setting changed: only it reruns
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    assert plan_lines(res.stderr, "magpie_math") == {**dict.fromkeys(stages[:-2], "skip"), "pairs": "rerun"}
    assert rows(out / "pairs" / "preference_pairs.jsonl") == []


def test_dry_run_stages_for_the_grader_and_for_given_problems(kit, tmp_path):
    given = tmp_path / "problems.jsonl"
    given.write_text(json.dumps({"problem": "2+2?", "expected_answer": 4}) + "\n")
    (tmp_path / "config.json").write_text("{}")  # the model folder, as the DPO stage checks it at submission
    common = ["run_recipe", "magpie_math", f"--model={tmp_path}", f"--output_dir={tmp_path / 'out'}", "--dry_run"]
    res = kit(*common)  # the defaults: the grader scores, against each problem's low-temperature solution
    assert res.returncode == 0, res.stderr
    assert list(plan_lines(res.stderr, "magpie_math")) == ["requests", "problems", "filter", "solutions", "responses", "gather", "scores",
                                      "pairs", "dpo"]  # fmt: skip
    assert "pipeline_kit.recipes.magpie_data grade" in res.stdout and "generation_type=reward" not in res.stdout
    assert "--score_field=score --min_score_gap=0.5" in res.stdout
    out = tmp_path / "out"  # the DPO stage trains the model on the pairs, after the pairs stage's done job
    assert (f"-m pipeline_kit.training.trl_train ++algorithm=dpo ++backend=trl ++model={tmp_path} "
            f"++training_data={out}/pairs/preference_pairs.jsonl ++output_dir={out}/dpo") in res.stdout  # fmt: skip
    res = kit(*common, f"--input_file={given}", "--scorer=reward", f"--reward_model={tmp_path}")
    assert res.returncode == 0, res.stderr
    assert list(plan_lines(res.stderr, "magpie_math")) == [
        "filter",
        "solutions",
        "responses",
        "gather",
        "scores",
        "pairs",
        "dpo",
    ]
    assert "++generation_type=reward" in res.stdout and "--score_field=reward_model_score" in res.stdout
    assert not (tmp_path / "out").exists()
