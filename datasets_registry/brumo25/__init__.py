"""BRUMO 2025: the 30 problems of the Brown University Math Olympiad 2025 that MathArena evaluates.
Upstream: the MathArena/brumo_2025 dataset on Hugging Face, a parquet file (reading it needs pyarrow)."""

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
    "https://huggingface.co/datasets/MathArena/brumo_2025/resolve/6de9bc0987f5710c6376ee980e1483dbeb55cfda/"
    "data/train-00000-of-00001.parquet",
    "parquet",
)
LICENSE = "CC BY-NC-SA 4.0 (non-commercial)"  # share-alike
ROWS = 30
FINGERPRINT = "19ec9ac32b2dd708"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    return {
        "id": f"brumo25-{row['problem_idx']}",
        "problem": row["problem"],
        "expected_answer": str(row["answer"]).strip(),
        "problem_idx": row["problem_idx"],
        "problem_type": list(row["problem_type"]),
    }
