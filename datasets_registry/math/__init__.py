"""MATH: the full 5,000-problem test set of Hendrycks et al. (7 subjects, levels 1-5), LaTeX answers.
Upstream: ToRA's copy of the test split (also math-evaluation-harness'); the answer is the last \\boxed{} of the
reference solution."""

from pipeline_kit.benchmark_helpers import Source, boxed_content

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
    "https://raw.githubusercontent.com/microsoft/ToRA/213c1c995038c73fab10343814df7a42f990f026/src/data/math/test.jsonl",
    "jsonl",
)
LICENSE = "MIT"  # MATH, Hendrycks et al.; ToRA's copy
ROWS = 5000
FINGERPRINT = "fb7639f0bfbc5deb"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    answer = boxed_content(row["solution"], verbatim=True)
    if answer is None:
        raise ValueError("its solution has no \\boxed{} answer")
    return {
        "id": f"math-{row['idx']}",
        "problem": row["problem"],
        "expected_answer": answer,
        "solution": row["solution"],
        "subject": row["type"],
        "level": int(row["level"].removeprefix("Level ")),
        "level_raw": row["level"],
        "source_idx": row["idx"],
    }
