"""The file steps of the magpie_math recipe, each run in a job as `python -m pipeline_kit.recipes.magpie_data STEP`:
  requests   one row {id, domain, system} per problem to write (the domains' system prompts: prompts/magpie/)
  filter     the written (or given) problems less empty and duplicate ones -> {id, domain, problem[, expected_answer]}
  sft        the low-temperature solutions as kit's SFT JSONL {problem, generation, id, source, domain[, expected_answer]}
  gather     the sampled responses (output-rs*.jsonl), one row per (problem, seed), with each problem's reference answer
  grade      each gathered response's `score`: 1.0 when its answer matches the reference, 0.0 when not
Every output is written atomically."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pipeline_kit.dedupe import question_key
from pipeline_kit.errors import UserError
from pipeline_kit.grading.extraction import extract_answer
from pipeline_kit.grading.grade import task_of
from pipeline_kit.grading.grader_pool import grade_tasks
from pipeline_kit.grading.output_names import OUTPUT_NAME
from pipeline_kit.jsonl import read_jsonl, write_jsonl

DOMAINS_FILE = "magpie/domains.yaml"  # under the shipped prompts/
GRADE_FIELD = "score"
REFERENCE_FIELD = "reference_answer"


def domain_prompts() -> dict[str, str]:
    import yaml

    from pipeline_kit.inference.prompts import PROMPTS_DIR

    return yaml.safe_load((PROMPTS_DIR / DOMAINS_FILE).read_text())


def check_domains(text: str) -> list[str]:
    """--domains as a list of known domains; an unknown or missing one is an error listing them."""
    known = domain_prompts()
    names = [d.strip() for d in text.split(",") if d.strip()]
    unknown = [d for d in names if d not in known]
    if unknown or not names:
        what = f"'{unknown[0]}' is not a domain" if unknown else "no domain given"
        raise UserError(f"--domains={text}: {what}; use some of {', '.join(known)} (prompts/{DOMAINS_FILE}).")
    return list(dict.fromkeys(names))


def write_rows(path: str | Path, rows: list[dict]) -> None:
    write_jsonl(path, rows)
    print(f"kit magpie_math: wrote {len(rows)} rows to {path}", file=sys.stderr)


def requests(domains: list[str], num_problems: int) -> list[dict]:
    prompts = domain_prompts()
    return [{"id": f"{d}-{k}", "domain": d, "system": prompts[d]} for d in domains for k in range(num_problems)]


def filter_problems(rows: list[tuple[int, dict]], source: str) -> list[dict]:
    """Rows with a non-empty `problem` (and no error), the first of duplicates kept. Rows of a given --input_file
    without id or domain get `input-<line>` and `input`."""
    seen: set[str] = set()
    ids: dict[str, int] = {}
    kept = []
    for line_no, row in rows:
        pid = str(row.get("id", f"input-{line_no}"))
        if pid in ids:  # later steps group responses by id: two problems under one id would be paired together
            raise UserError(
                f"{source}:{line_no}: id {pid!r} again (first on line {ids[pid]}); give each problem its own."
            )
        ids[pid] = line_no
        problem = row.get("problem")
        if problem is not None and not isinstance(problem, str):
            raise UserError(f"{source}:{line_no}: 'problem' is {type(problem).__name__}, not text; fix that line.")
        if not problem or not problem.strip() or row.get("error") or question_key(problem) in seen:
            continue
        seen.add(question_key(problem))
        out = {
            "id": row.get("id", f"input-{line_no}"),
            "domain": row.get("domain", "input"),
            "problem": problem.strip(),
        }
        if row.get("expected_answer") is not None:
            out["expected_answer"] = row["expected_answer"]
        kept.append(out)
    return kept


def sft_rows(rows: list[tuple[int, dict]]) -> list[dict]:
    """Solutions with text and no error, in kit's SFT format (what `kit sft` reads)."""
    out = []
    for _, row in rows:
        if not row.get("generation", "").strip() or row.get("error"):
            continue
        sft = {"problem": row["problem"], "generation": row["generation"], "id": row["id"], "domain": row["domain"],
               "source": f"magpie_math/{row['domain']}"}  # fmt: skip
        if row.get("expected_answer") is not None:
            sft["expected_answer"] = row["expected_answer"]
        out.append(sft)
    return out


def seed_of(path: Path) -> int:
    match = OUTPUT_NAME.fullmatch(path.name)
    if not match or match.group(1) is None:
        raise UserError(f"{path}: not a sampled output (output-rs<seed>.jsonl).")
    return int(match.group(1))


def gather(responses_dir: str, solutions_file: str) -> list[dict]:
    """One row per (problem, seed), problems in input order: the response's fields plus `seed` and the problem's
    `reference_answer` (its expected_answer when known, else the answer of its low-temperature solution)."""

    files = sorted(Path(responses_dir).glob("output-rs*.jsonl"), key=seed_of)
    if not files:
        raise UserError(f"{responses_dir}: no output-rs*.jsonl; did the responses stage finish?")
    references = {}
    for _, row in read_jsonl(solutions_file):
        known = row.get("expected_answer")
        references[row["id"]] = str(known) if known is not None else extract_answer(row.get("generation"))
    by_problem: dict[str, list[dict]] = {}
    for path in files:
        for _, row in read_jsonl(path):
            if row.get("error"):  # a failed request is no response: it must not become a pair's rejected side
                continue
            by_problem.setdefault(row["id"], []).append(
                {**row, "seed": seed_of(path), REFERENCE_FIELD: references.get(row["id"])}
            )
    return [r for rows in by_problem.values() for r in rows]


def grade(rows: list[tuple[int, dict]]) -> list[dict]:
    """Each row with `score` 1.0 (its answer equals the reference) or 0.0; None without a reference answer. Graded
    as `kit grade` grades (multiple choice, lists in any order), in the grader's process pool."""

    referenced = [(line_no, row) for line_no, row in rows if row.get(REFERENCE_FIELD) is not None]
    tasks = [
        task_of({**row, "expected_answer": str(row[REFERENCE_FIELD])}, f"line {n}", "auto") for n, row in referenced
    ]
    verdicts = {
        id(row): (task.predicted, v.correct)
        for (_, row), task, v in zip(referenced, tasks, grade_tasks(tasks), strict=True)
    }
    out = []
    for _, row in rows:
        predicted, correct = verdicts.get(id(row), (extract_answer(row.get("generation")), None))
        out.append({**row, "predicted_answer": predicted, GRADE_FIELD: None if correct is None else float(correct)})
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m pipeline_kit.recipes.magpie_data")
    steps = parser.add_subparsers(dest="step", required=True)
    p = steps.add_parser("requests")
    p.add_argument("--domains", required=True)
    p.add_argument("--num_problems", type=int, required=True)
    for name in ("filter", "sft", "grade"):
        steps.add_parser(name).add_argument("input")
    p = steps.add_parser("gather")
    p.add_argument("responses_dir")
    p.add_argument("solutions_file")
    for step in steps.choices.values():
        step.add_argument("output")
    args = parser.parse_args(argv)
    try:
        if args.step == "requests":
            rows = requests(check_domains(args.domains), args.num_problems)
        elif args.step == "gather":
            rows = gather(args.responses_dir, args.solutions_file)
        else:
            step = {"filter": lambda r: filter_problems(r, args.input), "sft": sft_rows, "grade": grade}[args.step]
            rows = step(read_jsonl(args.input))
        write_rows(args.output, rows)
    except UserError as e:
        print(f"kit magpie_math: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
