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

from pipeline_kit.errors import UserError, did_you_mean
from pipeline_kit.jsonl import read_jsonl, write_jsonl

METHODS = ("ansaug", "rephrase", "sv", "fobar")  # --methods, in the order the questions are built
TYPES = {"ansaug": "AnsAug", "rephrase": "Rephrased", "sv": "SV", "fobar": "FOBAR"}  # MetaMathQA's names
SV_QUESTION = "What is the value of unknown variable x?"
FOBAR_QUESTION = "If we know the answer to the above question is {answer}, what is the value of unknown variable x?"

# a number standing on its own: 7, 1,200, 3.5 (not the 2 of "x2" or of "v2.0"'s parts)
_NUMBER = re.compile(r"(?<![\w.])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w]|\.\d)|(?<![\w.,])\d+(?:\.\d+)?(?![\w]|[.,]\d)")
_VARIABLE_X = re.compile(r"(?<![A-Za-z\\])x(?![A-Za-z])")  # the question already has an x: masking would clash
_OUTPUT = re.compile(r"output(?:-rs\d+)?\.jsonl")  # a generation stage's merged outputs
_LABEL = re.compile(r"^\s*(?:\*\*)?(?:rephrased|rewritten)(?: question)?\s*:\s*(?:\*\*)?\s*", re.I)


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
    return "" if "\\boxed" in text or "\\fbox" in text else text


def sv_question(statement: str | None) -> str | None:
    """The self-verification question from the model's statement; None when the statement has no x to ask about."""
    statement = (statement or "").strip()
    if not _VARIABLE_X.search(statement):
        return None
    return statement if statement.endswith(SV_QUESTION) else f"{statement} {SV_QUESTION}"


def generated(folder: str) -> list[tuple[Path, int, dict]]:
    """(file, line, record) of a generation stage's output.jsonl / output-rs{seed}.jsonl, less failed requests."""
    files = sorted(f for f in Path(folder).glob("output*.jsonl") if _OUTPUT.fullmatch(f.name))
    if not files:
        raise UserError(f"{folder}: no output.jsonl or output-rs*.jsonl; the generation stage before wrote nothing.")
    return [(f, n, rec) for f in files for n, rec in read_jsonl(f) if "error" not in rec]


def question(kind: str, original_id, problem: str, answer: str) -> dict:
    return {"type": TYPES[kind], "original_id": original_id, "problem": problem, "expected_answer": answer}


def build(prepared: str, methods: list[str], out_file: str, rephrase_dir: str | None, sv_dir: str | None) -> str:
    """The questions to solve: the originals (AnsAug), each distinct rephrasing (its answer the original's), each
    self-verification statement that asks about x, and the FOBAR questions (their answers the masked numbers)."""
    originals = [r for _, r in read_jsonl(Path(prepared) / "originals.jsonl")]
    masked = [r for _, r in read_jsonl(Path(prepared) / "masked.jsonl")]
    by_id = {r["original_id"]: r for r in originals}
    masked_by_id = {r["original_id"]: r for r in masked}
    out: list[dict] = []
    if "ansaug" in methods:
        out += [question("ansaug", r["original_id"], r["problem"], r["expected_answer"]) for r in originals]
    if "rephrase" in methods:
        seen = {(r["original_id"], " ".join(r["problem"].split())) for r in originals}
        for path, line_no, rec in generated(required_dir("--rephrase_dir", rephrase_dir)):
            original = lookup(by_id, rec, f"{path}:{line_no}")
            text = rephrasing(rec.get("generation"))  # a failed request has no generation: nothing to keep
            key = (original["original_id"], " ".join(text.split()))
            if text and key not in seen:
                seen.add(key)
                out.append(question("rephrase", original["original_id"], text, original["expected_answer"]))
    if "sv" in methods:
        for path, line_no, rec in generated(required_dir("--sv_dir", sv_dir)):
            source = lookup(masked_by_id, rec, f"{path}:{line_no}")
            text = sv_question(rec.get("generation"))
            if text:
                out.append(question("sv", source["original_id"], text, source["masked_value"]))
    if "fobar" in methods:
        for r in masked:
            text = f"{r['masked_question'].rstrip()} {FOBAR_QUESTION.format(answer=r['answer'])}"
            out.append(question("fobar", r["original_id"], text, r["masked_value"]))
    write_jsonl(out_file, out)
    counts = Counter(q["type"] for q in out)
    return f"{len(out)} questions to solve: " + ", ".join(f"{counts[TYPES[m]]} {TYPES[m]}" for m in methods)


def required_dir(flag: str, value: str | None) -> str:
    if not value:
        raise UserError(f"{flag} is required for its method; pass the generation stage's folder.")
    return value


def lookup(rows_by_id: dict, rec: dict, where: str) -> dict:
    if "original_id" not in rec or rec["original_id"] not in rows_by_id:
        raise UserError(f"{where}: no input question with original_id {rec.get('original_id')!r}; rerun the recipe.")
    return rows_by_id[rec["original_id"]]


def collect(solve_dir: str, out_file: str, stats_file: str) -> str:
    """metamath.jsonl: every distinct graded solution whose answer the grader found equal to its question's
    expected answer, as MetaMathQA's query/response plus kit's problem/generation; stats.json counts by type."""
    kept, seen = [], set()
    stats = {t: {"questions": 0, "solutions": 0, "kept": 0} for t in TYPES.values()}
    questions = set()
    for path, line_no, rec in generated(solve_dir):
        where = f"{path}:{line_no}"
        for key in ("type", "original_id", "problem", "expected_answer", "generation", "symbolic_correct"):
            if key not in rec:
                raise UserError(f"{where}: the record has no '{key}'; the solve stage grades its outputs, rerun it.")
        counts = stats[rec["type"]]
        counts["solutions"] += 1
        if (rec["type"], rec["problem"]) not in questions:
            questions.add((rec["type"], rec["problem"]))
            counts["questions"] += 1
        if rec["symbolic_correct"] is not True or (rec["problem"], rec["generation"]) in seen:
            continue
        seen.add((rec["problem"], rec["generation"]))
        counts["kept"] += 1
        kept.append({"query": rec["problem"], "response": rec["generation"], "type": rec["type"],
                     "problem": rec["problem"], "generation": rec["generation"],
                     "expected_answer": rec["expected_answer"], "original_id": rec["original_id"]})  # fmt: skip
    write_jsonl(out_file, kept)
    from pipeline_kit.atomic import write_atomic

    write_atomic(stats_file, json.dumps(stats, indent=2) + "\n")
    by_type = ", ".join(f"{v['kept']} {t}" for t, v in stats.items() if v["solutions"])
    return f"{len(kept)} solutions kept" + (f": {by_type}" if by_type else "")


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
    c.add_argument("out_file")
    c.add_argument("stats_file")
    try:
        args = parser.parse_args(argv)
        if args.step == "prepare":
            line = prepare(args.input_file, args.out_dir)
        elif args.step == "build":
            line = build(args.prepared, parse_methods(args.methods), args.out_file, args.rephrase_dir, args.sv_dir)
        else:
            line = collect(args.solve_dir, args.out_file, args.stats_file)
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
