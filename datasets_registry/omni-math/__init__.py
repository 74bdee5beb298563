"""Omni-MATH: 4,428 olympiad-level problems in 33 sub-domains, difficulty 1-10; answers often need a judge.
Upstream: the KbsdJames/Omni-MATH dataset on Hugging Face, a parquet file (pyarrow); NeMo-Skills grades it with an LLM judge."""

from pipeline_kit.benchmark_helpers import Source

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 0
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 8192
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://huggingface.co/datasets/KbsdJames/Omni-MATH/resolve/40ba231d8f16e29ecd40e6407e2c8640145a8f62/"
    "data/test-00000-of-00001.parquet",
    "parquet",
)
LICENSE = "Apache-2.0"
ROWS = 4428  # as its source documents; no copy of the file could be read here for a FINGERPRINT


def prepare(row: dict, index: int) -> dict:
    return {
        "id": f"omni-math-{index}",
        "problem": row["problem"],
        "expected_answer": str(row["answer"]).strip(),
        "reference_solution": row["solution"],
        "domain": list(row["domain"]),
        "difficulty": row["difficulty"],
        "source": row["source"],
    }
