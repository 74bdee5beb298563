"""GSM-Plus: 10,552 GSM8K problems under 8 perturbations (numbers changed, distractors, missing information, ...).
Upstream: the qintongli/GSM-Plus test file on Hugging Face; an unanswerable problem expects "insufficient"."""

from pipeline_kit.benchmark_helpers import Source, plain_number

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 0
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 2048
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://huggingface.co/datasets/qintongli/GSM-Plus/resolve/eeaf6b0fda873f917a60f9ca449f7c6e37f105be/"
    "data/test-00000-of-00001.jsonl",
    "jsonl",
)
LICENSE = "CC BY-SA 4.0"  # attribution, share-alike
ROWS = 10552  # as its source documents; no copy of the file could be read here for a FINGERPRINT


def prepare(row: dict, index: int) -> dict:
    answer = str(row["answer"]).strip()
    if answer == "None":  # the critical-thinking perturbation: the problem lacks what it needs
        expected = "insufficient"
    else:
        try:
            expected = plain_number(answer.replace(",", ""))
        except ValueError:
            expected = answer
    return {
        "id": f"gsm-plus-{index}",
        "problem": row["question"],
        "expected_answer": expected,
        "reference_solution": row["solution"],
        "perturbation_type": row["perturbation_type"],
        "seed_question": row["seed_question"],
        "seed_answer": row["seed_answer"],
        "answer_raw": row["answer"],
    }
