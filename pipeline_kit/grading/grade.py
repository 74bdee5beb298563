"""Grading result files in place (`kit grade`; `python -m pipeline_kit.grading.grade PATH…` in jobs): records get
predicted_answer, symbolic_correct, grading_timed_out, extract_mode and grading_key; changed files are replaced
atomically."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.grading.choices import expected_letter
from pipeline_kit.grading.extraction import extract_answer
from pipeline_kit.grading.grader_pool import grade_tasks
from pipeline_kit.grading.math_grader import DEFAULT_TIMEOUT, GRADER_VERSION, Task
from pipeline_kit.grading.modes import DEFAULT_EXTRACT, EXTRACT_MODES, check_mode
from pipeline_kit.grading.normalize import canonical, choice_letter, lists_any_order
from pipeline_kit.grading.output_names import OUTPUT_GLOB

ADDED = ("predicted_answer", "symbolic_correct", "grading_timed_out", "extract_mode", "grading_key")


@dataclass
class _File:
    """A file as read: its lines, the records to (re)grade by line index, and its identity when read."""

    path: Path
    lines: list[str]
    stat: tuple[int, int, int]
    todo: dict[int, tuple[dict, Task]] = field(default_factory=dict)
    records: int = 0
    correct: int = 0  # among the records graded already (then the todo ones are added)
    timed_out: int = 0


@dataclass
class Summary:
    path: Path
    records: int
    graded: int  # (re)graded by this run; the rest were graded already
    correct: int
    timed_out: int


def find_files(paths: list[str | Path]) -> list[Path]:
    """The files named, and every output*.jsonl under the folders named (sorted); a missing path is an error."""
    out: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(p for p in path.rglob(OUTPUT_GLOB) if p.is_file())
            if not found:
                raise UserError(f"{path}: no {OUTPUT_GLOB} files under this folder; name result files or their folder.")
            out.extend(found)
        elif path.is_file():
            out.append(path)
        else:
            raise UserError(
                f"{path}: no such file or folder; name JSONL result files or folders holding {OUTPUT_GLOB}."
            )
    return list(dict.fromkeys(out))


def grade_files(
    paths: list[str | Path],
    workers: int | None = None,
    timeout: float = DEFAULT_TIMEOUT,
    force: bool = False,
    extract: str = DEFAULT_EXTRACT,
) -> list[Summary]:
    """Grade `paths` (files or folders, see find_files) in place, answers extracted by mode `extract` (see
    modes.EXTRACT_MODES). Every file is read and checked before any is graded; answers are graded together
    (one cache, one pool); each changed file is then replaced atomically. A record keeps its verdict while its
    grading_key (extraction mode, predicted answer, expected answer, options, list order rule, grader version) is
    unchanged, unless `force`."""

    check_mode(extract)
    files = [_read(path, force, extract) for path in find_files(paths)]
    todo = [(f, i, rec, task) for f in files for i, (rec, task) in f.todo.items()]
    verdicts = grade_tasks([task for *_, task in todo], workers=workers, timeout=timeout)
    for (f, i, rec, task), verdict in zip(todo, verdicts, strict=True):
        rec["predicted_answer"] = task.predicted
        rec["symbolic_correct"] = verdict.correct
        rec["grading_timed_out"] = verdict.timed_out
        rec["extract_mode"] = extract
        rec["grading_key"] = grading_key(task, extract)
        f.lines[i] = json.dumps(rec, ensure_ascii=False) + "\n"
        f.correct += verdict.correct
        f.timed_out += verdict.timed_out
    for f in files:
        if f.todo:
            _write(f)
    return [Summary(f.path, f.records, len(f.todo), f.correct, f.timed_out) for f in files]


def task_of(record: dict, where: str, extract: str) -> Task:
    """The grading task of one record: its answer extracted from `generation` by mode `extract` (as a letter when
    the question is multiple-choice: it has `options`, or its expected answer is a letter A-J; in auto mode the
    whole generation when it is the expected answer's text, whitespace aside), the expected answer
    (in mode mcq its letter, upper-cased), the options, and whether lists may come in any order (any_order)."""
    for key in ("generation", "expected_answer"):
        if key not in record:
            raise UserError(f"{where}: the record has no '{key}'; grading needs 'generation' and 'expected_answer'.")
    expected, generation = record["expected_answer"], record["generation"]
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        expected = str(expected)
    if not isinstance(expected, str):
        raise UserError(f"{where}: expected_answer must be a string or a number, got {expected!r}; fix the data.")
    if generation is not None and not isinstance(generation, str):
        raise UserError(f"{where}: generation must be a string, got {type(generation).__name__}; regenerate it.")
    options = _options(record.get("options"), where)  # optional: only multiple-choice records have options
    multiple_choice = bool(options) or choice_letter(canonical(expected)) is not None
    if extract == "mcq":  # a letter against a letter, in any case; or through options against its option's text
        letter = expected_letter(expected)
        if letter is None and not options:
            raise UserError(
                f"{where}: extraction mode mcq grades option letters, but expected_answer {expected!r} is no letter "
                "A-J and the record has no options; grade such answers with --extract=boxed or auto."
            )
        expected = letter or expected
    predicted = extract_answer(generation, multiple_choice=multiple_choice, mode=extract)
    if extract == "auto" and generation and _same_text(generation, expected):
        predicted = generation.strip()  # the whole response is the expected answer's text ("odd $n$, where ...")
    return Task(
        predicted=predicted,
        expected=expected,
        options=options,
        any_order=any_order(record),
    )


def _same_text(generation: str, expected: str) -> bool:
    """Whether `generation` is `expected`, whitespace aside. A generation many times longer is not even split: a
    reasoning model's 100,000 characters would cost ~0.7 ms per record on a path that grades thousands a second."""
    if len(generation) > 4 * len(expected) + 64:
        return False
    return generation.split() == expected.split()


def any_order(record: dict) -> bool:
    """Whether the lists of a record's answers may come in any order: its `problem` asks for all solutions
    (normalize.lists_any_order), or its benchmark marks the answer as several answers (OlympiadBench's
    `is_multiple_answer`). Both fields are optional: without them lists are compared in order."""
    problem = record.get("problem")
    return record.get("is_multiple_answer") is True or lists_any_order(problem if isinstance(problem, str) else None)


def grading_key(task: Task, extract: str) -> str:
    """What a verdict depends on, hashed: a record whose key is unchanged is not graded again."""
    text = json.dumps([GRADER_VERSION, extract, task.predicted, task.expected, task.options, task.any_order])
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _options(raw, where: str) -> tuple[tuple[str, str], ...]:
    """`options` as (letter, text) pairs: a list (A, B, … in order) or a {letter: text} object."""
    if raw is None:
        return ()
    if isinstance(raw, list):
        raw = {chr(ord("A") + i): text for i, text in enumerate(raw)}
    if not isinstance(raw, dict) or not all(isinstance(v, (str, int, float)) for v in raw.values()):
        raise UserError(f"{where}: options must be a list of option texts or a {{letter: text}} object, got {raw!r}.")
    return tuple((str(k).strip().upper(), str(v)) for k, v in raw.items())


def _read(path: Path, force: bool, extract: str) -> _File:
    try:
        st = path.stat()
        with open(path, encoding="utf-8") as fh:
            lines = fh.readlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot be read ({e}); check the path and its permissions.") from None
    f = _File(path, lines, (st.st_ino, st.st_size, st.st_mtime_ns))
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        where = f"{path}:{i + 1}"
        try:
            record = json.loads(line)
        except ValueError as e:
            raise UserError(f"{where} is not valid JSON ({e}); fix or regenerate that file.") from None
        if not isinstance(record, dict):
            raise UserError(f"{where} is not a JSON object; every line of a result file is one record.")
        f.records += 1
        task = task_of(record, where, extract)
        graded = all(k in record for k in ADDED) and record["grading_key"] == grading_key(task, extract)
        if force or not graded:
            f.todo[i] = (record, task)
        else:
            f.correct += record["symbolic_correct"] is True
            f.timed_out += record["grading_timed_out"] is True
    if lines and not lines[-1].endswith("\n"):
        f.lines[-1] += "\n"
    return f


def _write(f: _File) -> None:
    """Replace the file atomically, unless it changed since it was read (a generation rerun wrote it meanwhile)."""

    st = f.path.stat()
    if (st.st_ino, st.st_size, st.st_mtime_ns) != f.stat:
        raise UserError(f"{f.path} changed while it was being graded (written by another job?); grade it again.")
    write_atomic(f.path, "".join(f.lines))


def report(summaries: list[Summary]) -> str:
    return "\n".join(
        f"{s.path}: {s.records} records, {s.correct} correct ({100 * s.correct / max(s.records, 1):.1f}%)"
        + (f", {s.timed_out} grading timed out" if s.timed_out else "")
        + (f"; {s.graded} graded now" if s.graded != s.records else "")
        for s in summaries
    )


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, as every kit error, not argparse's usage block
        raise UserError(f"{message} (see `python -m pipeline_kit.grading.grade --help`)")


def main(argv: list[str] | None = None) -> int:
    """`python -m pipeline_kit.grading.grade PATH… [--extract MODE] [--workers N] [--timeout S] [--force]`: what
    `kit grade` does."""
    parser = _Parser(
        prog="python -m pipeline_kit.grading.grade", description="Grade result files in place (as `kit grade`)."
    )
    parser.add_argument("paths", nargs="+", metavar="PATH", help=f"JSONL result files, or folders of {OUTPUT_GLOB}")
    parser.add_argument("--workers", type=int, default=None, help="grading processes (default: usable CPUs, max 8)")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per answer")
    parser.add_argument("--force", action="store_true", help="grade every record again")
    parser.add_argument("--extract", default=DEFAULT_EXTRACT, help=f"answer extraction: {extract_help()}")
    try:
        args = parser.parse_args(argv)
        check_flags(args.workers, args.timeout)
        print(report(grade_files(args.paths, args.workers, args.timeout, args.force, args.extract)))
    except UserError as e:
        print(f"kit: error: {e}", file=sys.stderr)
        return 2
    return 0


def extract_help() -> str:
    return "; ".join(f"{mode}: {what}" for mode, what in EXTRACT_MODES.items()) + f" (default: {DEFAULT_EXTRACT})"


# what `kit eval ++grade.KEY=VALUE` sets on its grading step, as this script's --KEY=VALUE (--extract is eval's flag)
GRADE_OVERRIDES = {"timeout": float, "workers": int}


def grade_flags(overrides: list[str]) -> list[str]:
    """`++timeout=30` (the part of `kit eval ++grade.timeout=30` routed here) -> `--timeout=30`, checked: an unknown
    key or a bad value is one line naming the override."""
    flags = []
    for arg in overrides:
        key, _, value = arg.removeprefix("++").partition("=")
        if key not in GRADE_OVERRIDES:
            raise UserError(
                f"++grade.{key}: grading has no such setting; known: "
                f"{', '.join(f'++grade.{k}' for k in GRADE_OVERRIDES)}."
            )
        try:
            typed = GRADE_OVERRIDES[key](value)
        except ValueError:
            raise UserError(f"++grade.{key}={value}: not a {GRADE_OVERRIDES[key].__name__}.") from None
        check_flags(**{"workers": None, "timeout": DEFAULT_TIMEOUT, key: typed})
        flags.append(f"--{key}={value}")
    return flags


def check_flags(workers: int | None, timeout: float) -> None:
    if workers is not None and workers < 0:
        raise UserError(f"--workers must be 0 (grade in this process) or more, got {workers}.")
    if not timeout > 0:
        raise UserError(f"--timeout must be a positive number of seconds, got {timeout}.")


if __name__ == "__main__":
    sys.exit(main())
