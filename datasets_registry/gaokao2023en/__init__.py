"""Gaokao 2023 En: 383 problems of China's 2023 college entrance exam in English (plus some HMMT and SAT items).
Upstream: Qwen2.5-Math's evaluation data, answers as written ($...$ kept); its 2 rows without an answer are left out."""

from pipeline_kit.benchmark_helpers import Source

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
    "https://raw.githubusercontent.com/QwenLM/Qwen2.5-Math/a45202bd16f1ec06f433442dc1152d0074773465/"
    "evaluation/data/gaokao2023en/test.jsonl",
    "jsonl",
)
LICENSE = "MIT (Qwen2.5-Math's evaluation data)"
ROWS = 383
FINGERPRINT = "945a4ab82460812e"  # of the records kit prepares from SOURCE
RENAMED = {"id": "source_id"}


def prepare(row: dict, index: int) -> dict | None:
    if not row["answer"].strip():
        return None  # nothing to grade against (upstream rows 167 and 192)
    record = {"id": f"gaokao2023en-{index}", "problem": row["question"], "expected_answer": row["answer"]}
    record.update({RENAMED.get(k, k): v for k, v in row.items() if k not in ("question", "answer")})
    return record
