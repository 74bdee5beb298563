"""ASDiv: 2,305 diverse elementary-school word problems (the whole corpus), mostly numeric answers.
Upstream: ASDiv.xml; problem = Body + Question, the answer is Answer before its unit in parentheses."""

from pipeline_kit.benchmark_helpers import Source

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
    "https://raw.githubusercontent.com/chaochun/nlu-asdiv-dataset/883f90a9a65bf00304ba8f37423910fe743abc47/"
    "dataset/ASDiv.xml",
    "xml",
    rows="Problem",
)
LICENSE = "CC BY-NC 4.0 (non-commercial)"
ROWS = 2305
FINGERPRINT = "968e9bd206db7473"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    # as NeMo-Skills: "5 (years old); 15 (years old)" keeps "5", while "11; 12; 13" (no unit) stays whole
    return {
        "id": f"asdiv-{row['ID']}",
        "problem": f"{row['Body'].strip()} {row['Question'].strip()}",
        "expected_answer": row["Answer"].split("(")[0].strip(),
        "answer_raw": row["Answer"],
        "type": row["Solution-Type"],
        "formula": row["Formula"],
        "grade": row["Grade"],
        "source_url": row["Source"],
        "source_id": row["ID"],
    }
