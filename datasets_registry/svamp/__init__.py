"""SVAMP: 1,000 one-unknown arithmetic word problems with varied structure (robustness of simple solvers).
Upstream: SVAMP.json (a JSON array); problem = Body + Question, the answer a number (an integer when whole)."""

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
    "https://raw.githubusercontent.com/arkilpatel/SVAMP/689d7ccac74b9983a2ac7cc3b264f441b99e7c53/SVAMP.json", "json"
)
LICENSE = "MIT"
ROWS = 1000
FINGERPRINT = "6374f3416a01d038"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    body = row["Body"].strip()
    if body[-1:].isalpha():  # "... on each pack" + "How much ...?" reads as one sentence without it
        body += "."
    return {
        "id": f"svamp-{row['ID']}",
        "problem": f"{body} {row['Question'].strip()}",
        "expected_answer": plain_number(row["Answer"]),
        "answer_raw": row["Answer"],
        "reference_equation": row["Equation"],
        "type": row["Type"],
        "source_id": row["ID"],
    }
