"""Comp-Math 24-25: 256 competition problems (AIME 2024 and 2025, HMMT 2024-25) as NeMo-Skills ships them.
Upstream: NeMo-Skills' test.txt (JSONL), used as it is; subset_for_metrics names each row's contest."""

from pipeline_kit.benchmark_helpers import Source

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 4
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 8192
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = Source(
    "https://raw.githubusercontent.com/NVIDIA/NeMo-Skills/0b012df8a09cd4730d31b16e90a0d8f13d145fb8/"
    "nemo_skills/dataset/comp-math-24-25/test.txt",
    "jsonl",
)
LICENSE = "Apache-2.0"  # NeMo-Skills; the problems are the MAA's and HMMT's
ROWS = 256
FINGERPRINT = "457a7664c67e5c25"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    return {"id": row["id"], "problem": row["problem"], "expected_answer": row["expected_answer"], **row}
