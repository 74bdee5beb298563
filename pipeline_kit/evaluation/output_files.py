"""Reading the output files of `kit summarize`: kit's own, and those of other tools that use the same field names
(NeMo-Skills' `ns eval` writes eval-results/<benchmark>/output-rs{seed}.jsonl records with them).

What a record gives (nothing else is required):
- Its verdict, one of: kit's (`symbolic_correct` beside the `grading_key` that kit's grader adds); the file's own
  labels (`symbolic_correct`, or `is_correct` as older NeMo-Skills wrote it) with the `predicted_answer` they judge;
  or none: then kit's grader grades the file in place first, as `kit grade` does, from `generation` and
  `expected_answer`. With regrade, every record that kit's grader did not grade is graded by it in memory, and the
  files are left as they are (another tool's labels are not overwritten).
- A judge's verdict, optional: `judge_correct`, else the verdicts of kit eval's judge stage beside the file (matched
  by `id`), else the judge's text in `judgement` (NeMo-Skills' field; "Judgement: Yes" or "... No"). A judge's
  text with no verdict is unparsed: not correct in judge_correct, counted apart (judge_unparsed), never a "no".
- Statistics, optional: `num_generated_tokens` and `generation_time`; a file without them shows `-`.
- What matches a problem across the sampled files of a benchmark: `id` when every record of every file has one,
  else the `problem` text when every record has one and none repeats within a file, else the line order (the files
  must then hold the same problems in the same order).

Missing fields that are needed are gathered over all files first and named together in one error."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_kit.data_fingerprint import Fingerprint, row_digest
from pipeline_kit.errors import UserError
from pipeline_kit.evaluation.judge import parse_verdict, verdicts_for
from pipeline_kit.evaluation.metrics import Run
from pipeline_kit.evaluation.reasoning_stats import ReasoningTally
from pipeline_kit.evaluation.selection_modes import EXTRA_FIELDS
from pipeline_kit.grading.grade import task_of
from pipeline_kit.grading.grader_pool import grade_tasks
from pipeline_kit.jsonl import read_jsonl

LABELS = ("symbolic_correct", "is_correct")  # another tool's verdict fields, the first present is used
KIT, REGRADED = "kit", "regraded"  # verdict sources besides a label field
SOURCE_NAMES = {
    KIT: "kit",
    "symbolic_correct": "file labels (symbolic_correct)",
    "is_correct": "file labels (is_correct)",
    REGRADED: "kit (--regrade)",
}
HOW_TO_ADD = {
    "generation": "add the model's response as 'generation' (kit's grader extracts the answer from it)",
    "expected_answer": "add each problem's reference answer as 'expected_answer'",
    "predicted_answer": "add the answer that the labels judge as 'predicted_answer' (majority@k votes on it), "
    "or pass --regrade to have kit extract and grade it from 'generation'",
}
AUDIT_CLASSES = {
    "generation_error": "generation failed (an error field: a refused request or a prompt over the context length)",
    "extraction_failed": "extraction failed (no predicted_answer)",
    "grading_timed_out": "grading timed out",
    "judge_disagrees": "grader and judge disagree",
    "judge_unparsed": "judge wrote no verdict (counted as not correct)",
    "max_tokens_clamped": "max_tokens clamped to the context window (clamped_max_tokens)",
}
GRADE, REGRADE = "grade in place", "regrade in memory"  # what _read returns for a file that needs kit's grader


@dataclass
class ReadFile:
    """One output file as read: its run (in file order), each record's `id` and `problem` (None where it has none),
    where its verdicts came from, whether a judge ran, and the audit hits."""

    path: Path
    ids: list
    problems: list
    run: Run
    has_judge: bool
    sources: dict[str, int]  # verdict source (KIT, a LABELS field, REGRADED) -> records
    data: Fingerprint  # of the rows (id, problem, expected_answer) it ran on
    audit: dict[str, list] = field(default_factory=dict)  # audit class -> names of its samples (id, else "line N")
    missing: dict[str, list] = field(default_factory=dict)  # needed field -> [records without it, first line]
    extract_modes: dict[str, int] = field(default_factory=dict)  # answer extraction of kit's verdicts -> records
    reasoning: ReasoningTally = field(default_factory=ReasoningTally)  # split samples' thinking and answer tokens
    judge_only: list = field(default_factory=list)  # of the judge_disagrees samples, those the judge said yes to


def _kit_graded(rec: dict) -> bool:
    return "grading_key" in rec and "symbolic_correct" in rec


def _read(path: Path, regrade: bool = False, regraded: dict | None = None, extract: str = "boxed") -> ReadFile | str:
    """The file at `path`, or GRADE (a record has no verdict) or, with `regrade`, REGRADE (a record's verdict is
    not kit's). `regraded`: line number -> (predicted answer, correct, timed out) from kit's grader (answers
    extracted by mode `extract`), for the records kit had not graded."""
    modes: dict[str, int] = {}
    ids: list = []
    problems: list = []
    rows: list[bytes] = []  # each record's row digest: the fingerprint of the data the file ran on
    seen: dict = {}
    answers: list = []
    symbolic: list[bool] = []
    judge: list[bool] = []
    judge_only: list = []
    tokens: float | None = 0.0
    seconds: float | None = 0.0
    has_judge: bool | None = None
    counts = dict.fromkeys(SOURCE_NAMES, 0)  # verdict source -> records
    audit: dict[str, list] = {key: [] for key in AUDIT_CLASSES}
    missing: dict[str, list] = {}
    extras: dict[str, list] = {}  # EXTRA_FIELDS present in the file: one value per record (None where missing)
    thinking = ReasoningTally()
    loads = json.loads
    verdicts = verdicts_for(path)  # eval's judge stage writes its verdicts beside the file
    with open(path, encoding="utf-8") as f:
        for lineno, line in enumerate(f, 1):
            if line.isspace():  # (isspace stops at the first character; strip would copy the line)
                continue
            try:
                rec = loads(line)
            except ValueError as e:
                raise UserError(f"{path}:{lineno} is not valid JSON ({e}); fix or regenerate that file.") from None
            if not isinstance(rec, dict):
                raise UserError(f"{path}:{lineno} is not a JSON object; every line of an output file is one record.")
            if regraded is None or lineno not in regraded:
                if "symbolic_correct" in rec:
                    correct = rec["symbolic_correct"]
                    source = KIT if "grading_key" in rec else "symbolic_correct"  # (what _kit_graded says)
                elif "is_correct" in rec:
                    correct = rec["is_correct"]
                    source = "is_correct"
                else:
                    return REGRADE if regrade else GRADE
                if regrade and source is not KIT:
                    return REGRADE
                try:
                    answer = rec["predicted_answer"]
                except KeyError:
                    _note(missing, "predicted_answer", lineno)
                    answer = None
                timed_out = rec.get("grading_timed_out") is True  # optional: only kit's grader writes it
            else:
                answer, correct, timed_out = regraded[lineno]
                source = REGRADED
            counts[source] += 1
            if source in (KIT, REGRADED):  # extract_mode: kit's grader writes it (files graded before it: none)
                mode = extract if source == REGRADED else rec.get("extract_mode", "not recorded")
                modes[mode] = modes.get(mode, 0) + 1
            # optional statistics: the file's sum, or None once a record lacks one
            n_tokens, n_seconds = rec.get("num_generated_tokens"), rec.get("generation_time")
            try:
                tokens = None if n_tokens is None or tokens is None else tokens + n_tokens
                seconds = None if n_seconds is None or seconds is None else seconds + n_seconds
            except TypeError:
                raise UserError(
                    f"{path}:{lineno}: num_generated_tokens and generation_time must be numbers, got {n_tokens!r} and "
                    f"{n_seconds!r}; fix them or drop them (they are optional)."
                ) from None
            pid = rec.get("id")  # optional: without ids, files are matched by problem text or line order
            if pid is not None:
                if isinstance(pid, (dict, list)):
                    raise UserError(f"{path}:{lineno}: id must be a string or a number, got {pid!r}.")
                if pid in seen:
                    raise UserError(
                        f"{path}:{lineno} repeats id {pid!r} (first on line {seen[pid]}); each problem once per file."
                    )
                seen[pid] = lineno
            name = f"line {lineno}" if pid is None else pid
            if type(correct) is not bool:
                label = "symbolic_correct" if source in (KIT, REGRADED) else source
                raise UserError(
                    f"{path}:{lineno}: {label} must be true or false, got {correct!r}; fix it, or pass --regrade to grade "
                    "with kit's grader."
                )
            if isinstance(answer, (dict, list)):
                answer = json.dumps(answer, sort_keys=True)
            unparsed = False  # the judge's text holds no verdict
            if "judge_correct" not in rec:
                if verdicts is not None:
                    if pid is None:
                        raise UserError(
                            f"{path}:{lineno} has no id, which the judge's verdicts beside this file are matched by; give "
                            "every record an id or move the judge folder away."
                        )
                    if str(pid) not in verdicts:
                        raise UserError(
                            f"{path}:{lineno}: the judge's output has no verdict for id {pid!r}; rerun the judge stage."
                        )
                    parsed = verdicts[str(pid)]
                elif "judgement" in rec:  # another tool's judge output, e.g. NeMo-Skills'
                    if not isinstance(rec["judgement"], str):
                        raise UserError(
                            f"{path}:{lineno}: judgement must be the judge's text, got {rec['judgement']!r}."
                        )
                    parsed = parse_verdict(rec["judgement"])
                if verdicts is not None or "judgement" in rec:
                    unparsed = parsed is None
                    rec["judge_correct"] = parsed is True  # unparsed: not correct, and counted apart below
            judged = "judge_correct" in rec
            if has_judge is None:
                has_judge = judged
            elif judged != has_judge:
                state = "has" if judged else "lacks"
                raise UserError(
                    f"{path}:{lineno} {state} judge_correct unlike the file's first record; re-run the judge."
                )
            for extra in EXTRA_FIELDS:
                if extra in rec or extra in extras:
                    extras.setdefault(extra, [None] * len(ids)).append(rec.get(extra))
            ids.append(pid)
            problems.append(rec.get("problem"))  # optional: a key only for files without ids
            rows.append(row_digest(pid, rec.get("problem"), rec.get("expected_answer")))
            answers.append(answer)
            symbolic.append(correct)
            if rec.get("error"):  # optional: only a sample whose request failed has one
                audit["generation_error"].append(name)
            thinking.add(rec)
            if rec.get("clamped_max_tokens") is not None:  # optional: only a request fitted to the window has one
                audit["max_tokens_clamped"].append(name)
            if answer is None:
                audit["extraction_failed"].append(name)
            if timed_out:
                audit["grading_timed_out"].append(name)
            if judged:
                verdict = rec["judge_correct"]
                if type(verdict) is not bool:
                    raise UserError(f"{path}:{lineno}: judge_correct must be true or false, got {verdict!r}.")
                judge.append(verdict)
                if unparsed:  # neither a yes nor a no: not a disagreement either
                    audit["judge_unparsed"].append(name)
                elif verdict != correct:
                    audit["judge_disagrees"].append(name)
                    if verdict:
                        judge_only.append(name)
    if not ids:
        raise UserError(f"{path} holds no records; regenerate it or move it out of the results folder.")
    columns = {"symbolic_correct": symbolic}
    if has_judge:
        columns["judge_correct"] = judge
        columns["both_correct"] = [s and j for s, j in zip(symbolic, judge, strict=True)]
        columns["any_correct"] = [s or j for s, j in zip(symbolic, judge, strict=True)]
    run = Run(name=path.name, correct=columns, answers=answers, tokens=tokens, seconds=seconds, extras=extras)
    sources = {source: count for source, count in counts.items() if count}
    data = Fingerprint.of_digests(rows)
    read = ReadFile(path, ids, problems, run, bool(has_judge), sources, data, audit, missing, modes, thinking)
    read.judge_only = judge_only
    return read


def _note(missing: dict[str, list], name: str, lineno: int) -> None:
    entry = missing.setdefault(name, [0, lineno])
    entry[0] += 1


# ---------------------------------------------------------------------------------------------------- kit's grader


def _grading_inputs(path: Path, build_tasks: bool, extract: str) -> tuple[dict[str, list], dict]:
    """(the fields kit's grader needs that records lack, as in ReadFile.missing; line number -> grading task of each
    record kit did not grade, when `build_tasks` and nothing is missing)."""

    missing: dict[str, list] = {}
    todo = []
    for lineno, rec in read_jsonl(path):
        if _kit_graded(rec):
            continue
        complete = True
        for name in ("generation", "expected_answer"):
            if name not in rec:
                _note(missing, name, lineno)
                complete = False
        if complete:
            todo.append((lineno, rec))
    if not build_tasks or missing:
        return missing, {}

    return missing, {lineno: task_of(rec, f"{path}:{lineno}", extract) for lineno, rec in todo}


def _grade_in_place(paths: list[Path], extract: str) -> None:
    """Grade files whose records lack a verdict, in place, with the grader of `kit grade`."""
    try:
        from pipeline_kit.grading.grade import grade_files  # lazy: a missing grader library is one line here
    except ImportError as e:
        raise UserError(
            f"{paths[0]} is not graded yet (a record has no symbolic_correct) and the grader could not be loaded "
            f"({e}); run `kit grade` on it first."
        ) from None
    grade_files(paths, extract=extract)


def _grade_in_memory(tasks: dict[Path, dict]) -> dict[Path, dict]:
    """path -> line number -> (predicted answer, correct, timed out), from kit's grader; nothing is written."""

    flat = [(path, lineno, task) for path, by_line in tasks.items() for lineno, task in by_line.items()]
    verdicts = grade_tasks([task for *_, task in flat])
    out: dict[Path, dict] = {path: {} for path in tasks}
    for (path, lineno, task), verdict in zip(flat, verdicts, strict=True):
        out[path][lineno] = (task.predicted, verdict.correct, verdict.timed_out)
    return out


def _check_missing(found: list[tuple[Path, dict[str, list]]]) -> None:
    """One error naming every needed field that records lack, where, and how to add it."""
    by_field: dict[str, list] = {}  # field -> [records, files, first "path:line"]
    for path, missing in found:
        for name, (count, lineno) in missing.items():
            entry = by_field.setdefault(name, [0, 0, f"{path}:{lineno}"])
            entry[0] += count
            entry[1] += 1
    if not by_field:
        return
    parts = [
        f"no '{name}' in {records} record{'s' if records != 1 else ''} of {files} file{'s' if files != 1 else ''} "
        f"(first: {first}): {HOW_TO_ADD[name]}"
        for name in HOW_TO_ADD
        if name in by_field
        for records, files, first in [by_field[name]]
    ]
    raise UserError(
        "the output files lack fields that kit summarize needs (records without a verdict are graded by kit, which "
        "reads 'generation' and 'expected_answer'; records with their own labels need 'predicted_answer'): "
        + "; ".join(parts)
        + "."
    )


def read_all(paths: list[Path], regrade: bool = False, extract: str = "boxed") -> dict[Path, ReadFile]:
    """Every file, read; files with records that have no verdict are graded in place first (all in one call); with
    `regrade`, records whose verdict is not kit's are graded in memory instead; kit's grader extracts answers by mode
    `extract`. Missing fields are one error."""
    done: dict[Path, ReadFile] = {}
    todo: dict[Path, str] = {}
    for path in paths:
        read = _read(path, regrade)
        if isinstance(read, str):
            todo[path] = read
        else:
            done[path] = read
    found = [(f.path, f.missing) for f in done.values() if f.missing]
    tasks: dict[Path, dict] = {}
    for path, how in todo.items():
        missing, tasks[path] = _grading_inputs(path, how == REGRADE, extract)
        if missing:
            found.append((path, missing))
    _check_missing(found)
    in_place = [path for path, how in todo.items() if how == GRADE]
    if in_place:
        _grade_in_place(in_place, extract)
    to_regrade = {path: tasks[path] for path, how in todo.items() if how == REGRADE}
    regraded = _grade_in_memory(to_regrade) if to_regrade else {}
    for path in todo:
        read = _read(path, regrade, regraded.get(path), extract)
        if isinstance(read, str):
            raise UserError(f"{path} still has records without symbolic_correct after grading; run `kit grade`.")
        done[path] = read
    return {path: done[path] for path in paths}


def extraction_of(files: list[ReadFile]) -> str | None:
    """How kit's grader extracted the answers of `files` (extract_mode per record), for the summary; None when no
    verdict is kit's."""
    modes: dict[str, int] = {}
    for f in files:
        for mode, count in f.extract_modes.items():
            modes[mode] = modes.get(mode, 0) + count
    if not modes:
        return None
    if len(modes) == 1:
        return next(iter(modes))
    return ", ".join(f"{mode} ({count} records)" for mode, count in modes.items())


# audit classes worth a line under the table without --audit: (verb for one sample, for several, what they did)
NOTED = {
    # failed requests: so that such a run is not taken for a weak model
    "generation_error": (
        "has",
        "have",
        "an error instead of a generation (counted as no answer); --audit names them, and rerunning the generation "
        "requests refused ones again",
    ),
    # a prompt plus tokens_to_generate over the context window: samples cut short by the window, not the budget
    "max_tokens_clamped": (
        "was",
        "were",
        "generated with max_tokens clamped to what the context window left the prompt (clamped_max_tokens); "
        "--audit names them",
    ),
}


def audit_notes(files: list[ReadFile]) -> list[str]:
    """A line for each class of NOTED that holds samples of `files`."""
    notes = []
    for key, (one, several, what) in NOTED.items():
        count = sum(len(f.audit[key]) for f in files)
        if count:
            notes.append(f"{count} sample{' ' + one if count == 1 else 's ' + several} {what}")
    return notes


def graded_by(files: list[ReadFile]) -> str:
    """Where the verdicts of `files` came from, for the summary: one source, or each with its number of files."""
    per_file = [" + ".join(SOURCE_NAMES[s] for s in f.sources) for f in files]
    kinds = dict.fromkeys(per_file)
    if len(kinds) == 1:
        return per_file[0]
    counts = {kind: per_file.count(kind) for kind in kinds}
    return ", ".join(f"{kind} ({count} file{'s' if count != 1 else ''})" for kind, count in counts.items())


# ---------------------------------------------------------------------------------------------------- matching seeds


def match(files: list[ReadFile]) -> tuple[list[Run], str]:
    """(the runs of sampled files, reordered to the first file's problem order; how they were matched: "id",
    "problem text" or "line order"). Matched files must hold the same problems."""
    if all(None not in f.ids for f in files):
        return _matched(files, [f.ids for f in files], "id"), "id"
    if all(_unique_texts(f.problems) for f in files):
        return _matched(files, [f.problems for f in files], "problem"), "problem text (records have no id)"
    first = files[0]
    other = next((f for f in files if f.run.num_problems != first.run.num_problems), None)
    if other is not None:
        raise UserError(
            f"{first.path} has {first.run.num_problems} records and {other.path} {other.run.num_problems}: without an id in every record (or a problem text that no record of "
            "a file repeats) the output-rs*.jsonl of a benchmark are matched by line order, which needs the same "
            "problems in the same order in each; add ids, or finish or move away the incomplete seed."
        )
    return [f.run for f in files], "line order (records have no id, and problem texts are missing or repeat)"


def _unique_texts(values: list) -> bool:
    return all(isinstance(v, str) for v in values) and len(set(values)) == len(values)


def _matched(files: list[ReadFile], keys: list[list], kind: str) -> list[Run]:
    ref, ref_keys = files[0], keys[0]
    position = {key: i for i, key in enumerate(ref_keys)}
    runs = [ref.run]
    for other, other_keys in zip(files[1:], keys[1:], strict=True):
        other_set = set(other_keys)
        missing = next((key for key in ref_keys if key not in other_set), None)
        extra = next((key for key in other_keys if key not in position), None)
        if missing is not None or extra is not None:
            has, lacks, key = (ref, other, missing) if missing is not None else (other, ref, extra)
            shown = key if kind == "id" or len(str(key)) <= 60 else f"{str(key)[:57]}..."
            raise UserError(
                f"{has.path} and {lacks.path} hold different problems: {kind} {shown!r} is in {has.path.name} but "
                f"not in {lacks.path.name} ({has.run.num_problems} and {lacks.run.num_problems} records); all "
                "output-rs*.jsonl of a benchmark must answer the same problems: finish or re-run the incomplete "
                "seed, or move it away."
            )
        runs.append(_reorder(other.run, [position[key] for key in other_keys]))
    return runs


def _reorder(run: Run, order: list[int]) -> Run:
    """`run` with the value at file position i moved to problem position order[i]."""
    if order == list(range(len(order))):
        return run

    def place(values: list) -> list:
        out = [None] * len(values)
        for value, dst in zip(values, order, strict=True):
            out[dst] = value
        return out

    correct = {col: place(values) for col, values in run.correct.items()}
    extras = {name: place(values) for name, values in run.extras.items()}
    return Run(run.name, correct, place(run.answers), run.tokens, run.seconds, extras)
