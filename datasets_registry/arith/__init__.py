"""Arith: 50 single-digit additions ("What is 3+4?"), made here without a download: the quickstart benchmark.
Each pair (a, b) appears once, in a fixed order, so every checkout writes the same file."""

GROUP = "math"
METRICS_TYPE = "math"
PROMPT_CONFIG = "generic/math"
SPLIT = "test"
NUM_SAMPLES = 0
TEMPERATURE = 0.7
TOP_P = 0.95
TOKENS_TO_GENERATE = 512
REQUIRES_SANDBOX = False
EXTRACT = "boxed"  # the last \boxed{} is the answer; none, no answer (as published numbers count)
SOURCE = None
LICENSE = "made by kit: no upstream"
ROWS = 50
FINGERPRINT = "98b1225046581ae1"  # of the records generate() makes
COUNT = 50


def generate() -> list[dict]:
    records = []
    for i in range(COUNT):
        a, b = divmod((37 * i + 34) % 100, 10)  # 37 is prime to 100: the first 100 i give 100 distinct pairs
        records.append(
            {"id": f"arith-{i}", "problem": f"What is {a}+{b}?", "expected_answer": str(a + b), "a": a, "b": b}
        )
    return records
