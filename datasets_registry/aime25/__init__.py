"""AIME 2025: the 30 problems of AIME I (rows 0-14) and AIME II (rows 15-29) 2025, integer answers 0-999.
Upstream: NeMo-Skills' aime25 file (JSONL named test.txt) with AoPS reference solutions."""

from pipeline_kit.benchmark_helpers import Source, plain_number

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
    "https://raw.githubusercontent.com/NVIDIA-NeMo/Skills/959efb95e9cc7cf6559d1d0e3e3299392100edef/"
    "nemo_skills/dataset/aime25/test.txt",
    "jsonl",
)
LICENSE = "Apache-2.0"  # NeMo-Skills; the problems are the MAA's
ROWS = 30
FINGERPRINT = "6fe33eacd93075aa"  # of the records kit prepares from SOURCE
PER_CONTEST = 15


def prepare(row: dict, index: int) -> dict:
    if index >= 2 * PER_CONTEST:
        raise ValueError(f"AIME 2025 has {2 * PER_CONTEST} problems; the file has more rows")
    return {
        "id": row["id"],
        "problem": row["problem"],
        "expected_answer": plain_number(row["expected_answer"]),
        "reference_solution": row["reference_solution"],
        "year": 2025,
        "contest": "AIME I" if index < PER_CONTEST else "AIME II",
        "problem_number": index % PER_CONTEST + 1,
    }
