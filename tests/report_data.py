"""A synthetic results folder as `kit eval` leaves it (eval-results/<benchmark>/output-rs<seed>.jsonl, graded), of any
size: the 64 seeds x 500 problems of 8k-token samples that `kit report` must stay fast for (tests/test_report.py,
perf/README.md), and the small one of the docs' screenshot. Deterministic for a given `rng_seed`."""

from __future__ import annotations

import json
import random
from pathlib import Path

WORDS = (
    "let we so then since thus hence note that the of a an is are and or to in for with by on at from this it its "
    "number integer prime divisor remainder sum product value solution equation root roots polynomial term terms "
    "sequence triangle angle side sides area circle radius square cube modulo case cases both each every first second "
    "x y z n k m a b c p q r 2 3 4 5 7 10 12 = + - < > \\cdot \\frac{1}{2} \\sqrt{3} \\pi (x+1) (n-1) x^2 2^n "
    "\\equiv \\pmod{7} \\binom{n}{k} \\le \\ge wait check again substitute gives yields which means therefore"
).split()
CHARS_PER_TOKEN = 3.7  # about what a math model's tokenizer gives on such text


def _pool(rng: random.Random, chars: int) -> str:
    words = rng.choices(WORDS, k=chars // 4)
    text = " ".join(words)
    # sentences and paragraphs, as a model writes them
    return text.replace(" therefore ", ". Therefore ").replace(" wait ", ".\n\nWait, ").replace(" note ", ".\nNote ")


def write_results(
    root: Path, seeds: int, problems: int, tokens: int, benchmark: str = "synthmath", rng_seed: int = 0
) -> Path:
    """root/eval-results/<benchmark>/output-rs{0..seeds-1}.jsonl with `problems` graded samples each of about `tokens`
    tokens (three quarters thinking trace in `reasoning_content`, the rest the answer); returns `root`."""
    rng = random.Random(rng_seed)
    folder = root / "eval-results" / benchmark
    folder.mkdir(parents=True, exist_ok=True)
    chars = int(tokens * CHARS_PER_TOKEN)
    pool = _pool(rng, max(4 * chars, 200_000))
    skill = [rng.random() for _ in range(problems)]  # each problem's chance of a right answer
    expected = [str(rng.randint(1, 999)) for _ in range(problems)]
    # a model's wrong answers to a problem are a few, given again and again, not any number at all
    distractors = [[str(rng.randint(1, 999)) for _ in range(3)] for _ in range(problems)]
    texts = [f"Problem {i + 1}: " + pool[(i * 7919) % 50_000 :][: rng.randint(120, 500)] for i in range(problems)]
    for seed in range(seeds):
        with open(folder / f"output-rs{seed}.jsonl", "w") as f:
            for i in range(problems):
                right = rng.random() < skill[i]
                answer = expected[i] if right else (None if rng.random() < 0.1 else rng.choice(distractors[i]))
                n_tokens = max(16, int(rng.gauss(tokens, tokens / 8)))
                length = int(n_tokens * CHARS_PER_TOKEN)
                start = rng.randrange(len(pool) - length)
                thinking = pool[start : start + length * 3 // 4]
                tail = pool[start + length * 3 // 4 : start + length]
                generation = tail + (f" So the answer is \\boxed{{{answer}}}." if answer is not None else "")
                record = {
                    "id": f"{benchmark}-{i}",
                    "problem": texts[i],
                    "expected_answer": expected[i],
                    "generation": generation,
                    "reasoning_content": thinking,
                    "finished_reasoning": True,
                    "num_generated_tokens": n_tokens,
                    "generation_time": round(n_tokens / 900, 3),
                    "predicted_answer": answer,
                    "symbolic_correct": right,
                }
                if not right and answer is not None and rng.random() < 0.01:
                    record["grading_timed_out"] = True
                f.write(json.dumps(record) + "\n")
    return root
