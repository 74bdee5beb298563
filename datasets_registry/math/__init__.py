"""MATH: the full 5,000-problem test set of Hendrycks et al. (7 subjects, levels 1-5), LaTeX answers.
Upstream: Qwen2.5-Math's evaluation data; the answer is the last \\boxed{} of the reference solution."""

from pipeline_kit.benchmark_helpers import Source, last_boxed

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 0
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 4096
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://raw.githubusercontent.com/QwenLM/Qwen2.5-Math/main/evaluation/data/math/test.jsonl",
    "jsonl",
)
RENAMED = {"id": "source_id", "answer": "answer_raw"}


def prepare(row: dict, index: int) -> dict:
    answer = last_boxed(row["solution"])
    if answer is None:
        raise ValueError("its solution has no \\boxed{} answer")
    record = {"id": f"math-{index}", "problem": row["problem"], "expected_answer": answer}
    # the other fields (solution, level, type, ...) come along; upstream's own id/answer under another name
    record.update({RENAMED.get(k, k): v for k, v in row.items() if k != "problem"})
    return record
