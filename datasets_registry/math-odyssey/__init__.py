"""Math Odyssey: 387 problems from high-school competitions to university level, written for the benchmark.
Upstream: protagolabs' JSONL (one {"Problem_N": {...}} per line); LaTeX layout endings cut from the answers."""

import re

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
    "https://raw.githubusercontent.com/protagolabs/odyssey-math/fe9e83df06111728e1b06ddaee0a60837c07d6c9/"
    "final-odyssey-math-with-levels.jsonl",
    "jsonl",
)
LICENSE = "MIT"
ROWS = 387
FINGERPRINT = "649ec60a1d8aaa0f"  # of the records kit prepares from SOURCE
BLANK = "\\underline{\\hspace{2cm}}"  # the answer blank in a problem's text


def prepare(row: dict, index: int) -> dict:
    (key, item), *more = row.items()
    if more or not isinstance(item, dict):
        raise ValueError(f"a line must be one {{'Problem_N': {{...}}}} object, got keys {list(row)}")
    return {
        "id": f"math-odyssey-{index}",
        "problem": item["question"].split("\\end{problem}")[0].replace(BLANK, "").strip(),
        "expected_answer": answer(item["answer"]),
        "original_answer": item["answer"],
        "reference_solution": item["reasoning"],
        "label": item["label"],
        "level": item["level"],
        "source_key": key,
    }


def answer(text: str) -> str:
    """The answer without its layout ending (line breaks, \\\\, \\noindent), outer backslashes, a final '.' and $."""
    text = re.sub(r"(?:\s|\\\\)*\\noindent\s*$", "", text).strip().strip("\\").strip()
    return text.removesuffix(".").replace("$", "").strip()
