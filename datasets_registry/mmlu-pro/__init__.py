"""MMLU-Pro: 12,032 ten-option multiple-choice questions in 14 subjects (math, physics, law, ...), letter answers.
Upstream: the TIGER-Lab/MMLU-Pro test split on Hugging Face, a parquet file (pyarrow); options lettered A-J."""

from pipeline_kit.benchmark_helpers import Source

GROUP = "multichoice"
METRICS_TYPE = "mcq"
PROMPT_CONFIG = "generic/mcq"
SPLIT = "test"
NUM_SAMPLES = 0
TEMPERATURE = 0.6
TOP_P = 0.95
TOKENS_TO_GENERATE = 4096
REQUIRES_SANDBOX = False
EXTRACT = "mcq"  # the last stated option letter: \boxed{C}, "Answer: C", "(C)"
# revision b189ec76: the one third-party evaluation scripts pin; no copy of the file could be read where kit was built
SOURCE = Source(
    "https://huggingface.co/datasets/TIGER-Lab/MMLU-Pro/resolve/b189ec765aa7ed75c8acfea42df31fdae71f97be/"
    "data/test-00000-of-00001.parquet",
    "parquet",
)
LICENSE = "MIT"
ROWS = 12032  # as its dataset card documents; no FINGERPRINT (no copy of the file here)
LETTERS = "ABCDEFGHIJ"


def prepare(row: dict, index: int) -> dict:
    options = [str(option) for option in row["options"]]
    if not 2 <= len(options) <= len(LETTERS):
        raise ValueError(f"options must be 2 to {len(LETTERS)} choices, got {len(options)}")
    answer = str(row["answer"]).strip().upper()
    if answer not in LETTERS[: len(options)] or LETTERS.index(answer) != int(row["answer_index"]):
        raise ValueError(f"answer {row['answer']!r} is not option {row['answer_index']} of {len(options)}")
    lettered = "\n".join(f"{letter}. {option}" for letter, option in zip(LETTERS, options, strict=False))
    return {
        "id": f"mmlu-pro-{row['question_id']}",
        "problem": f"{row['question'].strip()}\n\n{lettered}",
        "expected_answer": answer,
        "question": row["question"],
        "options": options,
        "category": row["category"],
        "source": row["src"],
        "cot_content": row["cot_content"],
    }
