"""What makes two records duplicates, for every step that drops them: a question asked again (magpie's problems,
metamath's rephrasings) and a training sample repeated (metamath's solutions, `kit prepare_training_data`). A leaf."""

from __future__ import annotations


def question_key(text: str) -> str:
    """What two questions share when one repeats the other: the text with its whitespace collapsed, lower-cased
    ("What is 2+2?" and "what is  2+2?\\n" are one question, asked again by a model that generates them)."""
    return " ".join(text.split()).lower()


def sample_key(problem: str, generation: str) -> tuple[str, str]:
    """What two training samples share when one repeats the other: the exact problem and generation. Exact, unlike
    question_key: a solution written with other spacing or case is other text to learn from; only the same record
    twice (a rerun's outputs, or one file under two --input_dir) is a duplicate."""
    return problem, generation
