"""`kit select`: one solution per problem out of the sampled runs of a results folder (output-rs*.jsonl, graded in
place first, as `kit grade` does), by a vote over grader-equivalent answers. Writes the chosen records, each with
a `selection` field (method, votes for its answer, candidates), atomically."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.selection.voting import Candidate, majority, weighted

METHODS = {"majority": majority, "weighted": weighted}


def run_files(input_dir: str) -> list[Path]:
    """The sampled runs (output-rs*.jsonl) under the folder, else its output*.jsonl."""
    from pipeline_kit.evaluation.grade import find_files

    files = find_files([input_dir])
    sampled = [f for f in files if f.name.startswith("output-rs")]
    return sampled or files


def read_runs(files: list[Path], weight_field: str | None) -> dict[str, list[tuple[Candidate, dict]]]:
    """Per problem id, in first-seen order: each run's candidate (index = the run's position) and record."""
    problems: dict[str, list[tuple[Candidate, dict]]] = {}
    for index, path in enumerate(files):
        with path.open() as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                record = json.loads(line)
                where = f"{path}:{line_no}"
                if "id" not in record:
                    raise UserError(f"{where}: the record has no 'id'; runs are matched by id (kit eval writes it).")
                weight = 1.0
                if weight_field:
                    if not isinstance(record.get(weight_field), int | float):
                        raise UserError(
                            f"{where}: no number in '{weight_field}' for --method=weighted; score the runs first, "
                            "or name the field with --weight_field, or use --method=majority."
                        )
                    weight = float(record[weight_field])
                candidate = Candidate(index, record.get("predicted_answer"), weight)
                problems.setdefault(str(record["id"]), []).append((candidate, record))
    return problems


def select(input_dir: str, method: str, output_file: str, weight_field: str | None = None) -> str:
    """Write the chosen record of every problem to `output_file`; returns a one-line summary."""
    from pipeline_kit.evaluation.grade import grade_files

    if method == "genselect":
        raise UserError(
            "--method=genselect asks a model, so it runs as a generation: kit generate --model=... --server_type=... "
            f"--output_dir=DIR ++generation_type=genselect ++input_dir={input_dir}; DIR/output.jsonl holds the picks."
        )
    if method not in METHODS:
        raise UserError(f"--method={method} is not one of {', '.join(METHODS)}, genselect.")
    if method == "weighted" and not weight_field:
        raise UserError("--method=weighted needs --weight_field: the record field that holds each solution's score.")
    files = run_files(input_dir)
    grade_files(files)
    problems = read_runs(files, weight_field if method == "weighted" else None)
    chosen, correct, unanswered = [], 0, 0
    for pairs in problems.values():
        choice = METHODS[method]([c for c, _ in pairs])
        record = dict(pairs[0][1] if choice is None else next(r for c, r in pairs if c is choice.candidate))
        votes = choice.votes if choice else 0
        record["selection"] = {"method": method, "votes": votes, "candidates": len(pairs)}
        chosen.append(record)
        correct += bool(record.get("symbolic_correct")) and choice is not None
        unanswered += choice is None
    write_atomic(output_file, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chosen))
    total = len(chosen)
    return (
        f"{method} over {len(files)} runs: {total} problems, {100.0 * correct / max(total, 1):.2f}% correct, "
        f"{unanswered} without an answer -> {output_file}"
    )
