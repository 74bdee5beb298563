"""HMMT February 2025: the 30 problems MathArena evaluates, LaTeX answers (numbers and closed forms).
Upstream: the MathArena/hmmt_feb_2025 dataset on Hugging Face, a parquet file (reading it needs pyarrow)."""

from pipeline_kit.benchmark_helpers import Source

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 16
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 8192
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://huggingface.co/datasets/MathArena/hmmt_feb_2025/resolve/6fdc4277120810ff75aa22d2d5489b91f7a262a1/"
    "data/train-00000-of-00001.parquet",
    "parquet",
)
LICENSE = "CC BY-NC-SA 4.0 (non-commercial)"  # share-alike
ROWS = 30
FINGERPRINT = "b3f9d42544d1dcf4"  # of the records kit prepares from SOURCE
RENAMED = {"problem_idx": "source_id", "answer": "answer_raw"}


def prepare(row: dict, index: int) -> dict:
    record = {
        "id": f"hmmt_feb25-{row['problem_idx']}",
        "problem": row["problem"],
        "expected_answer": str(row["answer"]).strip(),
    }
    # the other columns (e.g. problem_type) come along as they are
    record.update({RENAMED.get(k, k): v for k, v in row.items() if k != "problem"})
    return record
