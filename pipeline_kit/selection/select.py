"""`kit select`: one solution per problem out of the sampled runs of a results folder (output-rs*.jsonl, graded in
place first, as `kit grade` does), by a vote over grader-equivalent answers. Writes the chosen records, each with
a `selection` field (method, votes for its answer, candidates), atomically."""

from __future__ import annotations

import json
import re
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.grading.grade import find_files, grade_files
from pipeline_kit.jsonl import numbered_records
from pipeline_kit.selection.genselect import decided_text
from pipeline_kit.selection.genselect_runs import read_picks
from pipeline_kit.selection.voting import Candidate, equivalent_majority, sc_tir_keeps, vote_weight, weighted

METHODS = {
    "majority": equivalent_majority,
    "weighted": weighted,
    "sc-tir": equivalent_majority,
}  # sc-tir votes over the kept samples


def run_files(input_dir: str) -> list[Path]:
    """The sampled runs (output-rs*.jsonl) under the folder, else its output*.jsonl."""

    files = find_files([input_dir])
    sampled = [f for f in files if f.name.startswith("output-rs")]
    return sampled or files


def read_runs(
    files: list[Path], weight_field: str | None, sc_tir: bool = False
) -> dict[str, list[tuple[Candidate, dict]]]:
    """Per problem id, in first-seen order: each run's candidate (index = the run's position) and record. With
    `sc_tir`, a sample SC-TIR drops keeps its record but not its answer (it cannot win)."""
    problems: dict[str, list[tuple[Candidate, dict]]] = {}
    for index, path in enumerate(files):
        with path.open() as f:
            for line_no, record in numbered_records(f, path):
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
                    weight = vote_weight(weight_field, record[weight_field])
                answer = record.get("predicted_answer")
                if sc_tir:
                    if "code_last_status" not in record:
                        raise UserError(
                            f"{where}: no code_last_status; --method=sc-tir needs runs made with code execution "
                            "(++code_execution=true), or use --method=majority."
                        )
                    answer = answer if sc_tir_keeps(record) else None
                candidate = Candidate(index, answer, weight)
                problems.setdefault(str(record["id"]), []).append((candidate, record))
    return problems


def genselect_picks(input_dir: str) -> dict[str, dict]:
    """{id: GenSelect's record} of the first finished GenSelect output in <input_dir>/genselect/ (what `kit generate
    --genselect` writes); none is an error that says how to make one."""

    folder = Path(input_dir) / "genselect"
    picks = read_picks(folder) if folder.is_dir() else {}
    if not picks:
        raise UserError(
            f"--method=genselect reads GenSelect's picks from {folder}/, which holds none; make them with a model: "
            f"kit generate --model=... --server_type=... --output_dir={folder} ++generation_type=genselect "
            f"++input_dir={input_dir}"
        )
    seed = re.compile(r"output-rs(\d+)\.jsonl")
    first = "output.jsonl" if "output.jsonl" in picks else min(picks, key=lambda n: int(seed.fullmatch(n).group(1)))
    return picks[first]


def _picked(pid: str, pairs: list, picks: dict[str, dict], names: list[str], input_dir: str) -> dict:
    if pid not in picks:
        raise UserError(f"{input_dir}/genselect/ has no pick for id {pid!r}; rerun GenSelect over the current runs.")
    run = picks[pid]["genselect"]["chosen_run"]
    record = next((r for c, r in pairs if names[c.index] == run), None)
    if record is None:
        raise UserError(f"{input_dir}/genselect/: the pick for id {pid!r} is from {run}, which is not among the runs.")
    return {**record, "genselect": picks[pid]["genselect"]}


def select(input_dir: str, method: str, output_file: str, weight_field: str | None = None) -> str:
    """Write the chosen record of every problem to `output_file`; returns a one-line summary."""

    if method not in METHODS and method != "genselect":
        raise UserError(f"--method={method} is not one of {', '.join(METHODS)}, genselect.")
    if method == "weighted" and not weight_field:
        raise UserError("--method=weighted needs --weight_field: the record field that holds each solution's score.")
    picks = genselect_picks(input_dir) if method == "genselect" else None
    files = run_files(input_dir)
    grade_files(files)
    problems = read_runs(files, weight_field if method == "weighted" else None, sc_tir=method == "sc-tir")
    chosen, correct, unanswered = [], 0, 0
    decided: dict[str, int] = {}  # GenSelect's picks by how they were made (judgment, fallback, unanimous, ...)
    for pid, pairs in problems.items():
        if picks is None:
            choice = METHODS[method]([c for c, _ in pairs])
            record = dict(pairs[0][1] if choice is None else next(r for c, r in pairs if c is choice.candidate))
            votes = choice.votes if choice else 0
        else:  # GenSelect's pick, as the graded record of the run it came from
            record = _picked(pid, pairs, picks, [f.name for f in files], input_dir)
            choice = record if record.get("predicted_answer") is not None else None
            votes = sum(c.answer is not None and c.answer == record.get("predicted_answer") for c, _ in pairs)
            how = record["genselect"].get("decided_by", "not recorded")
            decided[how] = decided.get(how, 0) + 1
        record["selection"] = {"method": method, "votes": votes, "candidates": len(pairs)}
        chosen.append(record)
        correct += bool(record.get("symbolic_correct")) and choice is not None
        unanswered += choice is None
    write_atomic(output_file, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in chosen))
    total = len(chosen)
    return (
        f"{method} over {len(files)} runs: {total} problems, {100.0 * correct / max(total, 1):.2f}% correct, "
        f"{unanswered} without an answer{f' (picks: {decided_text(decided)})' if picks is not None else ''} -> {output_file}"
    )
