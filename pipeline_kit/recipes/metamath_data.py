"""The MetaMath recipe's data steps, run as its run_cmd stages (`python -m pipeline_kit.recipes.metamath_data STEP`):
`prepare` checks the input and masks one number per question, `build` turns the original questions, the model's
rephrasings and self-verification statements and the FOBAR questions into one file to solve, and `collect` keeps
the graded solutions whose answer checks out as metamath.jsonl. Every file is written atomically."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.dedupe import question_key, sample_key
from pipeline_kit.errors import UserError, did_you_mean
from pipeline_kit.grading.output_names import merged_outputs
from pipeline_kit.jsonl import read_jsonl, write_jsonl

METHODS = ("ansaug", "rephrase", "sv", "fobar")  # --methods, in the order the questions are built
TYPES = {"ansaug": "AnsAug", "rephrase": "Rephrased", "sv": "SV", "fobar": "FOBAR"}  # MetaMathQA's names
SV_QUESTION = "What is the value of unknown variable x?"
FOBAR_QUESTION = "If we know the answer to the above question is {answer}, what is the value of unknown variable x?"

# a number standing on its own: 7, 1,200, 3.5 (not the 2 of "x2" or of "v2.0"'s parts)
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w]|\.\d)|(?<![\w.,])\d+(?:\.\d+)?(?![\w]|[.,]\d)")
_VARIABLE_X = re.compile(r"(?<![A-Za-z\\])x(?![A-Za-z])")  # the question already has an x: masking would clash
# a reply's leading label: "Rephrased question:", "**Rewritten Question:**", "Question:" (the prompt's own label)
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:(?:rephrased|rewritten|reworded)(?: question)?|question)\s*:\s*(?:\*\*)?\s*", re.I
)
_SOLVED = ("\\boxed", "\\fbox")  # a reply holding these solved the question instead of rewriting it


def read_problems(path: str | Path) -> list[dict]:
    """The input questions as {original_id, problem, expected_answer}: `id` when the records have one (unique),
    else the line number. A record without `problem` or `expected_answer` is an error naming file:line."""
    rows = read_jsonl(path)
    if not rows:
        raise UserError(f"{path}: no records; give a JSONL file of problem + expected_answer (kit prepare_data gsm8k).")
    out, seen = [], {}
    for line_no, rec in rows:
        where = f"{path}:{line_no}"
        for key in ("problem", "expected_answer"):
            if key not in rec:
                raise UserError(
                    f"{where}: the record has no '{key}'; every input record needs 'problem' and 'expected_answer'."
                )
        problem, answer = rec["problem"], rec["expected_answer"]
        if not isinstance(problem, str) or not problem.strip():
            raise UserError(f"{where}: 'problem' must be a non-empty string, got {problem!r}.")
        if isinstance(answer, bool) or not isinstance(answer, (str, int, float)) or not str(answer).strip():
            raise UserError(f"{where}: 'expected_answer' must be a non-empty string or number, got {answer!r}.")
        original_id = rec.get("id", line_no)  # optional: the line number stands in for it
        if original_id in seen:
            raise UserError(f"{where}: id {original_id!r} is also on line {seen[original_id]}; ids must be unique.")
        seen[original_id] = line_no
        out.append({"original_id": original_id, "problem": problem, "expected_answer": str(answer).strip()})
    return out


def mask_number(question: str) -> tuple[str, str] | None:
    """(question with x in place of one number, that number): the first number whose value occurs only once in the
    question (commas dropped from the value). None when the question already uses x or has no such number."""
    if _VARIABLE_X.search(question):
        return None
    found = list(_NUMBER.finditer(question))
    counts = Counter(m.group().replace(",", "") for m in found)
    for m in found:
        value = m.group().replace(",", "")
        if counts[value] == 1:
            return question[: m.start()] + "x" + question[m.end() :], value
    return None


def prepare(input_file: str, out_dir: str) -> str:
    """originals.jsonl (every question) and masked.jsonl (those with a number to mask, for SV and FOBAR)."""
    originals = read_problems(input_file)
    masked = []
    for row in originals:
        found = mask_number(row["problem"])
        if found:
            question, value = found
            masked.append({"original_id": row["original_id"], "masked_question": question,
                           "answer": row["expected_answer"], "masked_value": value})  # fmt: skip
    write_jsonl(Path(out_dir) / "originals.jsonl", originals)
    write_jsonl(Path(out_dir) / "masked.jsonl", masked)
    return f"{len(originals)} questions, {len(masked)} with a number to mask (SV, FOBAR)"


def rephrasing(text: str | None) -> str:
    """The question a rephrase reply holds: stripped, a leading "Rephrased question:" label dropped; "" when the
    reply holds a \\boxed{} (the model solved the question instead: its answer would leak into the query)."""
    text = _LABEL.sub("", text or "").strip()
    return "" if any(mark in text for mark in _SOLVED) else text


def sv_question(statement: str | None) -> str | None:
    """The self-verification question from the model's statement; None when the statement has no x to ask about."""
    statement = (statement or "").strip()
    if not _VARIABLE_X.search(statement):
        return None
    return statement if statement.endswith(SV_QUESTION) else f"{statement} {SV_QUESTION}"


def sv_verdict(reply: dict, masked: dict) -> tuple[str, str | None]:
    """("keep", the SV question), or (why the statement gives none, None): a failed request, no x to ask about, or
    the value of x given away (a \\boxed{}, or "x = 3" / "x is 3" with the masked number)."""
    if "error" in reply:
        return "failed_request", None
    text = sv_question(reply["generation"])
    if text is None:
        return "no_x", None
    value = re.escape(masked["masked_value"])
    if any(mark in text for mark in _SOLVED) or re.search(
        rf"(?<![A-Za-z\\])x\s*(?:=|is)\s*\$?{value}(?!\d|[.,]\d)", text
    ):
        return "solved_instead", None
    return "keep", text


def generated(folder: str) -> list[tuple[Path, int, dict]]:
    """(file, line, record) of a generation stage's output.jsonl / output-rs{seed}.jsonl, failed requests (records
    with an `error`) included: the callers count them."""
    files = merged_outputs(folder)
    if not files:
        raise UserError(f"{folder}: no output.jsonl or output-rs*.jsonl; the generation stage before wrote nothing.")
    return [(f, n, rec) for f in files for n, rec in read_jsonl(f)]


def question(kind: str, original_id, problem: str, answer: str) -> dict:
    return {"type": TYPES[kind], "original_id": original_id, "problem": problem, "expected_answer": answer}


def rephrase_verdict(reply: dict, original: dict, seen: set) -> tuple[str, str]:
    """("keep", the rephrased question), or (why the reply gives no question, ""); seen: the (id, question) pairs
    kept so far."""
    if "error" in reply:
        return "failed_request", ""
    text = rephrasing(reply["generation"])
    key = (original["original_id"], question_key(text))
    if not text:
        return ("solved_instead" if _LABEL.sub("", reply["generation"] or "").strip() else "empty"), ""
    if key[1] == question_key(original["problem"]):
        return "same_as_original", ""
    if key in seen:
        return "duplicate", ""
    seen.add(key)
    return "keep", text


def build(prepared: str, methods: list[str], out_file: str, rephrase_dir: str | None, sv_dir: str | None) -> str:
    """The questions to solve: the originals (AnsAug), each distinct rephrasing (its answer the original's), each
    self-verification statement that asks about x, and the FOBAR questions (their answers the masked numbers).
    stats.json beside out_file counts, per type, the candidates, the questions built and the rest by reason."""
    originals = [r for _, r in read_jsonl(Path(prepared) / "originals.jsonl")]
    masked = [r for _, r in read_jsonl(Path(prepared) / "masked.jsonl")]
    by_id = {r["original_id"]: r for r in originals}
    masked_by_id = {r["original_id"]: r for r in masked}
    stats = {TYPES[m]: {"candidates": 0, "questions": 0, "questions_dropped": Counter()} for m in methods}
    out: list[dict] = []

    def add(kind: str, verdict: str, q: dict | None = None) -> None:
        counts = stats[TYPES[kind]]
        counts["candidates"] += 1
        if verdict == "keep":
            counts["questions"] += 1
            out.append(q)
        else:
            counts["questions_dropped"][verdict] += 1

    if "ansaug" in methods:
        for r in originals:
            add("ansaug", "keep", question("ansaug", r["original_id"], r["problem"], r["expected_answer"]))
    if "rephrase" in methods:
        seen = set()
        for path, line_no, rec in generated(required_dir("--rephrase_dir", rephrase_dir)):
            original = lookup(by_id, rec, f"{path}:{line_no}")
            verdict, text = rephrase_verdict(rec, original, seen)
            add("rephrase", verdict, question("rephrase", original["original_id"], text, original["expected_answer"]))
    for kind in ("sv", "fobar"):  # an original without a number to mask has neither
        if kind in methods:
            for _ in range(len(originals) - len(masked)):
                add(kind, "no_number_to_mask")
    if "sv" in methods:
        for path, line_no, rec in generated(required_dir("--sv_dir", sv_dir)):
            source = lookup(masked_by_id, rec, f"{path}:{line_no}")
            verdict, text = sv_verdict(rec, source)
            add("sv", verdict, text and question("sv", source["original_id"], text, source["masked_value"]))
    if "fobar" in methods:
        for r in masked:
            text = f"{r['masked_question'].rstrip()} {FOBAR_QUESTION.format(answer=r['answer'])}"
            add("fobar", "keep", question("fobar", r["original_id"], text, r["masked_value"]))
    write_jsonl(out_file, out)

    write_atomic(Path(out_file).parent / "stats.json", json.dumps(stats, indent=2) + "\n")
    return f"{len(out)} questions to solve: " + ", ".join(f"{stats[TYPES[m]]['questions']} {TYPES[m]}" for m in methods)


def required_dir(flag: str, value: str | None) -> str:
    if not value:
        raise UserError(f"{flag} is required for its method; pass the generation stage's folder.")
    return value


def lookup(rows_by_id: dict, rec: dict, where: str) -> dict:
    if "original_id" not in rec or rec["original_id"] not in rows_by_id:
        raise UserError(f"{where}: no input question with original_id {rec.get('original_id')!r}; rerun the recipe.")
    return rows_by_id[rec["original_id"]]


def solution_verdict(rec: dict, seen: set) -> str:
    """ "keep", or why a graded solution is not kept (seen: the (problem, generation) pairs kept so far)."""
    if "error" in rec:
        return "failed_request"
    if rec["symbolic_correct"] is True:
        return "duplicate" if sample_key(rec["problem"], rec["generation"]) in seen else "keep"
    if rec["predicted_answer"] is None:
        return "no_answer"
    return "grading_timed_out" if rec["grading_timed_out"] else "wrong_answer"


def collect(solve_dir: str, build_stats: str, out_file: str, stats_file: str) -> str:
    """metamath.jsonl: every distinct graded solution whose answer the grader found equal to its question's
    expected answer, as MetaMathQA's query/response plus kit's problem/generation. stats.json: per type, the build
    step's counts (build_stats) with the solutions, the kept ones and the rest by reason."""
    try:
        stats = json.loads(Path(build_stats).read_text())
    except (OSError, ValueError) as e:
        raise UserError(f"{build_stats}: cannot read the build step's counts ({e}); rerun the recipe.") from None
    for counts in stats.values():
        counts |= {"solutions": 0, "kept": 0, "solutions_dropped": Counter()}
    kept, seen = [], set()
    for path, line_no, rec in generated(solve_dir):
        where = f"{path}:{line_no}"
        graded = () if "error" in rec else ("generation", "predicted_answer", "symbolic_correct", "grading_timed_out")
        for key in ("type", "original_id", "problem", "expected_answer", *graded):
            if key not in rec:
                raise UserError(f"{where}: the record has no '{key}'; the solve stage grades its outputs, rerun it.")
        if rec["type"] not in stats:
            raise UserError(f"{where}: type {rec['type']!r} is not in {build_stats}; rerun the recipe.")
        counts = stats[rec["type"]]
        counts["solutions"] += 1
        verdict = solution_verdict(rec, seen)
        if verdict != "keep":
            counts["solutions_dropped"][verdict] += 1
            continue
        seen.add(sample_key(rec["problem"], rec["generation"]))
        counts["kept"] += 1
        kept.append({"query": rec["problem"], "response": rec["generation"], "type": rec["type"],
                     "problem": rec["problem"], "generation": rec["generation"],
                     "expected_answer": rec["expected_answer"], "original_id": rec["original_id"]})  # fmt: skip
    write_jsonl(out_file, kept)

    write_atomic(stats_file, json.dumps(stats, indent=2) + "\n")
    by_type = ", ".join(f"{v['kept']} {t}" for t, v in stats.items())
    return f"{len(kept)} solutions kept: {by_type} (counts by reason: {stats_file})"


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, as every kit error
        raise UserError(f"{message} (see `python -m pipeline_kit.recipes.metamath_data --help`)")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m pipeline_kit.recipes.metamath_data", description=__doc__.split("\n")[0])
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("prepare")
    p.add_argument("input_file")
    p.add_argument("out_dir")
    b = steps.add_parser("build")
    b.add_argument("prepared")
    b.add_argument("out_file")
    b.add_argument("--methods", required=True)
    b.add_argument("--rephrase_dir")
    b.add_argument("--sv_dir")
    c = steps.add_parser("collect")
    c.add_argument("solve_dir")
    c.add_argument("build_stats")
    c.add_argument("out_file")
    c.add_argument("stats_file")
    try:
        args = parser.parse_args(argv)
        if args.step == "prepare":
            line = prepare(args.input_file, args.out_dir)
        elif args.step == "build":
            line = build(args.prepared, parse_methods(args.methods), args.out_file, args.rephrase_dir, args.sv_dir)
        else:
            line = collect(args.solve_dir, args.build_stats, args.out_file, args.stats_file)
    except UserError as e:
        print(f"kit: error: {e}", file=sys.stderr)
        return 2
    print(f"kit metamath {args.step}: {line}")
    return 0


def parse_methods(text: str) -> list[str]:
    """--methods as a list in METHODS order; an unknown or empty one is an error."""
    given = [m.strip() for m in text.split(",") if m.strip()]
    for m in given:
        if m not in METHODS:
            raise UserError(f"--methods: unknown method '{m}'.{did_you_mean(m, list(METHODS))} Use a subset of "
                            f"{','.join(METHODS)}.")  # fmt: skip
    if not given:
        raise UserError(f"--methods is empty; use a subset of {','.join(METHODS)}.")
    return [m for m in METHODS if m in given]


if __name__ == "__main__":
    sys.exit(main())
