"""Teach the trained tiny model (tiny-model) to be a judge, offline, with a plain-torch loop on synthetic additions:
- the LLM judge's prompt (prompts/judge/math.yaml, rendered by pipeline_kit as kit eval's judge stage renders it),
  answered "P vs E." then "Judgement: Yes" when P is the sum, else "Judgement: No";
- GenSelect's prompt (prompts/generic/genselect.yaml with 2-4 "Solution i:" blocks, as pipeline_kit builds a
  window), answered "The sum is C." then "Judgment: k": the first solution whose answer is the sum, else 0;
- and, mixed in, the tiny model's own task (\\boxed{a+b}), so that the one model can also be the generator.
Usage: python train_tiny_judge.py TINY_MODEL_DIR OUT_DIR [STEPS]   (deterministic; STEPS default 500: ~5 min on an
idle 2-core box)
Ends with a greedy format check over held-out prompts of both kinds: format < 95% for either -> exit 1."""

from __future__ import annotations

import random
import re
import sys
from pathlib import Path

import torch
from tiny_common import ANSWER, PROBLEMS, prompt_configs, random_question, save_tokenizer, train
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))  # the prompts rendered by kit's own code, so training sees what the server gets

from pipeline_kit.inference.genselect import prompt_messages  # noqa: E402
from pipeline_kit.inference.prompts import load_prompt_config  # noqa: E402
from pipeline_kit.selection.genselect import Solution  # noqa: E402

SEED = 1234
BATCH = 16
LR = 2e-3
MIN_FORMAT = 0.95
JUDGE_ANSWER = "{p} vs {e}.\nJudgement: {v}"
SELECT_ANSWER = "The sum is {c}.\nJudgment: {k}"
JUDGE_FORMAT = re.compile(r"\s*(\S+) vs (\S+)\.\nJudgement: (Yes|No)\s*")
SELECT_FORMAT = re.compile(r"\s*The sum is (\d+)\.\nJudgment: (\d)\s*")


def judge_case(rng: random.Random, judge) -> tuple[list[dict], str, bool]:
    """(messages, answer, verdict) for one judge prompt: a predicted answer that is the sum half of the time."""
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    roll = rng.random()
    predicted = (
        str(a + b) if roll < 0.5 else "None" if roll < 0.6 else str(rng.choice([n for n in range(19) if n != a + b]))
    )
    record = {"problem": rng.choice(PROBLEMS).format(a=a, b=b), "expected_answer": str(a + b)}
    yes = predicted == str(a + b)
    answer = JUDGE_ANSWER.format(p=predicted, e=a + b, v="Yes" if yes else "No")
    return judge.messages({**record, "predicted_answer": predicted}), answer, yes


def select_case(rng: random.Random, genselect) -> tuple[list[dict], str, int]:
    """(messages, answer, index) for one GenSelect window of 2-4 solutions with at least two different answers."""
    a, b = rng.randint(0, 9), rng.randint(0, 9)
    n = rng.randint(2, 4)
    while True:
        wrong = [n for n in range(19) if n != a + b]
        answers = [a + b if rng.random() < 0.4 else rng.choice(wrong) for _ in range(n)]
        if len(set(answers)) > 1:
            break
    problem = rng.choice(PROBLEMS).format(a=a, b=b)
    sols = [
        Solution(f"output-rs{i}.jsonl", {"problem": problem, "generation": f"\\boxed{{{x}}}"}, str(x))
        for i, x in enumerate(answers)
    ]
    k = answers.index(a + b) if a + b in answers else 0
    return prompt_messages(genselect, sols), SELECT_ANSWER.format(c=a + b, k=k), k


def main() -> None:
    if len(sys.argv) not in (3, 4):
        sys.exit(f"usage: {sys.argv[0]} TINY_MODEL_DIR OUT_DIR [STEPS]")
    in_dir, out_dir = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) == 4 else 500
    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # bit-reproducible, as train_tiny.py
    rng = random.Random(SEED)
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(in_dir)
    model = AutoModelForCausalLM.from_pretrained(in_dir, dtype=torch.float32)
    judge, genselect = load_prompt_config("judge/math"), load_prompt_config("generic/genselect")
    configs = prompt_configs()

    def prompt_text(messages: list[dict] | str) -> str:
        if isinstance(messages, str):
            return messages
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)

    def example() -> tuple[list[int], list[int]]:
        roll = rng.random()
        if roll < 0.55:
            messages, answer, _ = judge_case(rng, judge)
        elif roll < 0.9:
            messages, answer, _ = select_case(rng, genselect)
        else:  # the tiny model's own task, kept
            a, b = rng.randint(0, 9), rng.randint(0, 9)
            messages, answer = random_question(rng, a, b, configs), ANSWER.format(c=a + b)
        prompt = tokenizer.encode(prompt_text(messages), add_special_tokens=False)
        target = tokenizer.encode(answer + tokenizer.eos_token, add_special_tokens=False)
        return prompt + target, [-100] * len(prompt) + target

    t_train = train(model, tokenizer, example, steps, LR, BATCH, log_every=50)

    # greedy generation, as the server answers at temperature 0, on fresh prompts of each kind
    model.eval()
    tokenizer.padding_side = "left"
    check = random.Random(SEED + 1)
    failed = []
    for name, make, pattern, right in (
        ("judge", lambda: judge_case(check, judge), JUDGE_FORMAT, lambda m, want: (m[3] == "Yes") == want),
        ("genselect", lambda: select_case(check, genselect), SELECT_FORMAT, lambda m, want: int(m[2]) == want),
    ):
        cases = [make() for _ in range(100)]
        batch = tokenizer(
            [prompt_text(m) for m, _, _ in cases], return_tensors="pt", padding=True, add_special_tokens=False
        )
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=32, do_sample=False)
        texts = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        found = [pattern.fullmatch(t) for t in texts]
        fmt = sum(m is not None for m in found) / len(cases)
        acc = sum(m is not None and right(m, want) for m, (_, _, want) in zip(found, cases, strict=True)) / len(cases)
        print(f"{name:10s} format {fmt:4.0%}  accuracy {acc:4.0%}  e.g. {texts[0]!r}")
        if fmt < MIN_FORMAT:
            failed.append(name)

    tokenizer.padding_side = "right"
    model.save_pretrained(out_dir)
    save_tokenizer(tokenizer, out_dir)
    print(f"trained {steps} steps (batch {BATCH}) in {t_train:.1f}s; saved to {out_dir}")
    if failed:
        sys.exit(f"too weak on: {', '.join(failed)} (want format >= {MIN_FORMAT:.0%})")


if __name__ == "__main__":
    main()
