"""BeyondAIME: 100 problems harder than AIME written by ByteDance Seed, integer answers.
Upstream: the copy in zai-org/glm-simple-evals (the set NeMo-Skills reads from Hugging Face); question, answer."""

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
    "https://raw.githubusercontent.com/zai-org/glm-simple-evals/2974f4ef150808745edd4a7aef3dc589f54b53f7/"
    "data/aime/beyond_aime.jsonl",
    "jsonl",
)
LICENSE = "none stated"  # the repository has no licence: check before you redistribute
ROWS = 100
FINGERPRINT = "19e8c47ff9ccb2af"  # of the records kit prepares from SOURCE


def prepare(row: dict, index: int) -> dict:
    return {"id": f"beyond-aime-{index}", "problem": row["question"], "expected_answer": str(row["answer"]).strip()}
