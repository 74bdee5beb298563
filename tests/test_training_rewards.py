"""GRPO's reward is the grader's verdict: known completions (right, wrong, no answer, equivalent forms, reasoning
traces) scored by the reward function exactly as TRL's GRPOTrainer calls it, against `kit grade` with kit eval's
default extraction (and with `--extract=auto` when the reward is set to it) on the same completions and against
verdicts other projects wrote (tests/data/grader_cases), plus the format reward (`boxed`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline_kit.training.config import RewardConfig
from pipeline_kit.training.rewards import GraderReward

CASES = Path(__file__).parent / "data" / "grader_cases"
CFG = RewardConfig(workers=0)  # grade in this process: the verdicts are the same, the test faster
CORRECT, INCORRECT, BOXED = CFG.correct, CFG.incorrect, CFG.boxed

# (completion, expected answer, correct?, boxed?): each verdict is what a grader of the field gives
KNOWN = [
    (r"Half of it: $\boxed{\frac{1}{2}}$.", "0.5", True, True),  # equivalent forms
    (r"So $x = \boxed{0.5}$", r"\frac{1}{2}", True, True),
    (r"The answer is \boxed{\dfrac12}", "1/2", True, True),
    (r"2+2 is \boxed{5}.", "4", False, True),  # wrong
    ("I cannot solve this.", "4", False, False),  # no answer
    ("2 + 2 = 4, so the answer is 4.", "4", False, False),  # right, not boxed: kit eval (boxed) gives no answer
    (r"\boxed{4", "4", False, False),  # a box left open (cut off): no answer
    (r"The roots are $\boxed{3, -2}$", "3,-2", True, True),
    (r"\boxed{10\%}", "0.1", True, True),
    (r"Final: \boxed{x^2+2x+1}", "(x+1)^2", True, True),
    # reasoning traces: the last box counts, as kit eval reads it
    (r"<think>Is it 5? No: 2+2=4.</think> The answer is $\boxed{4}$.", "4", True, True),
    (r"<think>First \boxed{5}, then \boxed{4}.</think> So \boxed{4}", "4", True, True),
    (r"<think>Maybe \boxed{4}. Check: 2+2=5.</think> \boxed{5}", "4", False, True),
    ("<think>2+2 is 4, so the answer is 4", "4", False, False),  # a trace cut off before any box
]


def grpo_call(reward: GraderReward, completions: list, expected: list[str]) -> tuple[list[float], dict]:
    """Call the reward the way TRL's GRPOTrainer does: prompts, completions, completion_ids and every dataset
    column but the prompt as keyword lists, plus the trainer state and a metric logger."""
    logged: dict = {}
    rewards = reward(
        prompts=[[{"role": "user", "content": "?"}]] * len(completions),
        completions=completions,
        completion_ids=[[0]] * len(completions),
        expected_answer=expected,
        problem=["?"] * len(completions),
        trainer_state=None,
        log_metric=lambda name, value: logged.__setitem__(name, value),
    )
    return rewards, logged


def expected_reward(correct: bool, boxed: bool) -> float:
    return (CORRECT if correct else INCORRECT) + (BOXED if boxed else 0.0)


def grade_with_kit(tmp_path, completions: list[str], expected: list[str], *extract: str) -> list[bool]:
    """The grader's verdicts as `kit grade` writes them, with kit eval's default extraction unless `extract` says
    (`--extract`, `auto`)."""
    path = tmp_path / "completions.jsonl"
    path.write_text(
        "".join(
            json.dumps({"generation": c, "expected_answer": e}) + "\n"
            for c, e in zip(completions, expected, strict=True)
        )
    )
    proc = subprocess.run(
        [sys.executable, "-m", "pipeline_kit.grading.grade", str(path), *extract, "--workers", "0"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line)["symbolic_correct"] for line in path.read_text().splitlines()]


def test_known_completions_get_the_graders_verdict(tmp_path):
    texts = [c for c, *_ in KNOWN]
    expected = [e for _, e, *_ in KNOWN]
    rewards, logged = grpo_call(GraderReward(CFG), texts, expected)
    assert rewards == [expected_reward(ok, boxed) for _, _, ok, boxed in KNOWN]
    # the same completions through kit grade: the reward's verdict is the grader's
    verdicts = grade_with_kit(tmp_path, texts, expected)
    assert [
        r - (BOXED if b else 0.0) == pytest.approx(CORRECT) for r, (*_, b) in zip(rewards, KNOWN, strict=True)
    ] == verdicts
    assert logged["accuracy"] == pytest.approx(sum(ok for _, _, ok, _ in KNOWN) / len(KNOWN))
    assert logged["boxed_rate"] == pytest.approx(sum(b for *_, b in KNOWN) / len(KNOWN))


def test_the_reward_extracts_as_set_and_refuses_an_unknown_mode(tmp_path):
    """++reward.extract_mode=auto: the reward follows `kit grade --extract=auto` (a stated final answer counts); a
    mode that does not exist is refused with the key named."""
    from pipeline_kit.errors import UserError
    from pipeline_kit.training.config import TrainConfig, check_config

    texts = [c for c, *_ in KNOWN]
    expected = [e for _, e, *_ in KNOWN]
    auto = RewardConfig(workers=0, extract_mode="auto")
    rewards, _ = grpo_call(GraderReward(auto), texts, expected)
    correct = [
        r - (auto.boxed if b else 0.0) == pytest.approx(auto.correct) for r, (*_, b) in zip(rewards, KNOWN, strict=True)
    ]
    assert correct == grade_with_kit(tmp_path, texts, expected, "--extract", "auto")
    assert correct[texts.index("2 + 2 = 4, so the answer is 4.")]  # what boxed mode leaves unanswered
    cfg = TrainConfig("grpo", model="m", training_data="d", output_dir="o", reward=RewardConfig(extract_mode="last"))
    with pytest.raises(UserError, match=r"\+\+reward.extract_mode='last' is not an extraction mode; use one of"):
        check_config(cfg)


def test_with_parse_reasoning_the_reward_grades_the_answer_part_as_eval_does(tmp_path):
    """++reward.parse_reasoning=True: only what follows the last </think> counts (a trace cut before it has no
    answer, whatever it boxed while thinking), the same verdict `kit grade` gives the `generation` that
    `kit eval ++parse_reasoning=True` records (inference/reasoning.py)."""
    from pipeline_kit.inference.reasoning import split_reasoning

    cases = [
        (r"<think>Maybe \boxed{4}. Check: 2+2=5.</think> \boxed{5}", "5", True, True),
        (r"<think>It is \boxed{4}, I am sure", "4", False, False),  # cut off: the trace's box does not count
        (r"<think>First \boxed{5}.</think> So \boxed{4}", "4", True, True),
        (r"\boxed{4}", "4", False, False),  # no trace end at all: no answer part
    ]
    cfg = RewardConfig(workers=0, parse_reasoning=True)
    texts, expected = [c for c, *_ in cases], [e for _, e, *_ in cases]
    rewards, _ = grpo_call(GraderReward(cfg), texts, expected)
    assert rewards == [expected_reward(ok, boxed) for *_, ok, boxed in cases]
    answers = [split_reasoning(t, "</think>").answer for t in texts]
    assert grade_with_kit(tmp_path, answers, expected) == [ok for *_, ok, _ in cases]
    without = grpo_call(GraderReward(CFG), texts, expected)[0]
    # without it the whole text is graded, and extraction too reads only after a trace's end: the cut trace's guess
    # is not correct either way (its box still earns the format part); a completion without any trace is its answer
    assert without == [rewards[0], expected_reward(False, True), rewards[2], expected_reward(True, True)]


def test_conversational_completions_are_graded_like_text():
    """With a chat dataset TRL hands over each completion as a list of messages: the assistant's content is graded."""
    texts = [c for c, *_ in KNOWN]
    expected = [e for _, e, *_ in KNOWN]
    messages = [[{"role": "assistant", "content": t}] for t in texts]
    assert grpo_call(GraderReward(CFG), messages, expected)[0] == grpo_call(GraderReward(CFG), texts, expected)[0]


def test_reward_weights_come_from_the_config():
    cfg = RewardConfig(correct=2.0, incorrect=0.0, boxed=0.0, workers=0)
    rewards, _ = grpo_call(GraderReward(cfg), [r"\boxed{4}", r"\boxed{5}", "no idea"], ["4", "4", "4"])
    assert rewards == [2.0, 0.0, 0.0]


def contract_cases() -> list[dict]:
    """Equivalence cases other projects assert (NeMo-Skills' and Qwen2.5-Math's tests, evaluator rules) whose
    prediction is a plain answer that a box can hold as is (no braces, no trailing backslash)."""
    cases = []
    for name in ("nemo_skills.jsonl", "evaluator_rules.jsonl"):
        for line in (CASES / name).read_text().splitlines():
            case = json.loads(line)
            options = case.get("options") or {}
            if set(options) - {"symmetric"} or "{" in case["pred"] or "\\boxed" in case["pred"] or not case["pred"]:
                continue
            if case["pred"].endswith("\\"):  # `\boxed{185\}`: the backslash would escape the box's brace
                continue
            cases.append(case)
    return cases


def test_contract_cases_reward_as_their_authors_grade_them():
    cases = contract_cases()
    assert len(cases) >= 40, len(cases)
    completions = [f"Therefore the final answer is $\\boxed{{{c['pred']}}}$." for c in cases]
    rewards, _ = grpo_call(GraderReward(CFG), completions, [c["gold"] for c in cases])
    wrong = [
        (c["pred"], c["gold"], c["equivalent"], r)
        for c, r in zip(cases, rewards, strict=True)
        if r != expected_reward(c["equivalent"], True)
    ]
    assert not wrong, wrong


def test_a_run_from_before_extract_mode_resumes_as_sft_and_is_refused_as_grpo(tmp_path):
    """kit-train.json of a run made before `reward.extract_mode` existed (its reward extracted in `auto` mode): an SFT
    run resumes (it has no reward), a GRPO run is refused with the reward named, since resuming would mix rules."""
    from dataclasses import asdict

    from pipeline_kit.errors import UserError
    from pipeline_kit.training.checkpoints import SETTINGS, check_settings

    for algorithm in ("sft", "grpo"):
        out = tmp_path / algorithm
        out.mkdir()
        now = {"algorithm": algorithm, "reward": asdict(RewardConfig()), "learning_rate": 1e-5}
        before = {**now, "reward": {k: v for k, v in now["reward"].items() if k != "extract_mode"}}
        (out / SETTINGS).write_text(json.dumps(before))
        if algorithm == "sft":
            check_settings(out, now, write=False)
        else:
            with pytest.raises(UserError, match=r"holds a run with other settings \(reward: "):
                check_settings(out, now, write=False)
