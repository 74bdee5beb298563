"""MAWPS: 2,065 arithmetic word problems in four subsets (AddSub, SingleEq, SingleOp, MultiArith), numeric answers.
Upstream: the four JSONL files of ToRA's data, as NeMo-Skills reads them; `type` names the subset."""

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
BASE = "https://raw.githubusercontent.com/microsoft/ToRA/213c1c995038c73fab10343814df7a42f990f026/src/data/mawps"
SOURCE = tuple(
    Source(f"{BASE}/{subset}.jsonl", "jsonl", label=subset)
    for subset in ("addsub", "singleeq", "singleop", "multiarith")
)
LICENSE = "MIT"  # ToRA's copy; MAWPS itself states none
ROWS = 2065
FINGERPRINT = "acaa467465146170"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int, source: Source) -> dict:
    return {
        "id": f"mawps-{source.label}-{index}",
        "problem": row["input"],
        "expected_answer": plain_number(row["target"]),
        "answer_raw": row["target"],
        "type": source.label,
    }
