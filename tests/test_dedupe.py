"""What makes two records duplicates (pipeline_kit/dedupe.py), as each step that drops them sees it: a question asked
again (magpie's problems, metamath's rephrasings: spacing and case aside) and a repeated training sample (metamath's
solutions and `kit prepare_training_data`: the exact text)."""

from __future__ import annotations

from pipeline_kit.dedupe import question_key, sample_key
from pipeline_kit.recipes.magpie_data import filter_problems
from pipeline_kit.recipes.metamath_data import rephrase_verdict, solution_verdict


def test_a_question_asked_again_is_one_whatever_its_spacing_and_case():
    assert question_key(" What is\n2+2? ") == question_key("what  is 2+2?") == "what is 2+2?"
    assert question_key("What is 2+3?") != question_key("What is 2+2?")


def test_magpie_and_metamath_drop_the_same_questions():
    rows = [(1, {"id": "a", "problem": "What is 2+2?"}), (2, {"id": "b", "problem": "  WHAT is 2+2?\n"})]
    assert [r["id"] for r in filter_problems(rows, "in.jsonl")] == ["a"]
    original = {"original_id": "a", "problem": "What is 2+2?"}
    seen: set = set()
    assert rephrase_verdict({"generation": "what is  2+2?"}, original, seen) == ("same_as_original", "")
    assert rephrase_verdict({"generation": "How much is 2+2?"}, original, seen)[0] == "keep"
    assert rephrase_verdict({"generation": "HOW MUCH is 2+2?"}, original, seen) == ("duplicate", "")


def test_a_training_sample_is_a_duplicate_only_when_exactly_the_same():
    assert sample_key("p", "x = 1") != sample_key("p", "x  = 1")
    rec = {"problem": "p", "generation": "x = \\boxed{1}", "symbolic_correct": True}
    seen = {sample_key("p", "x = \\boxed{1}")}
    assert solution_verdict(rec, seen) == "duplicate"
    assert solution_verdict({**rec, "generation": "X = \\boxed{1}"}, seen) == "keep"
