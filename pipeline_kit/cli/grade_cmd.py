"""`kit grade PATH…`: extract each record's answer and grade it against expected_answer, in place
(pipeline_kit.grading.grade; jobs run the same code as `python -m pipeline_kit.grading.grade`)."""

from __future__ import annotations

from typing import Annotated

import typer

Opt = typer.Option


def register(app: typer.Typer) -> None:
    @app.command(help="Grade result files (or folders of output*.jsonl) in place: predicted_answer, symbolic_correct.")
    def grade(
        paths: Annotated[
            list[str], typer.Argument(help="JSONL files with generation + expected_answer, or folders of them.")
        ],
        workers: Annotated[
            int | None, Opt("--workers", help="Grading processes (default: usable CPUs, at most 8; 0: none).")
        ] = None,
        timeout: Annotated[
            float | None, Opt("--timeout", help="Seconds per answer (default: 10); a timeout counts as incorrect.")
        ] = None,
        force: Annotated[bool, Opt("--force", help="Grade every record again, graded or not.")] = False,
        extract: Annotated[
            str,
            Opt(
                "--extract",
                help="Answer extraction: boxed (the last \\boxed{}; none, no answer), auto (also an <answer> tag, a "
                "stated final answer, else the last expression) or mcq (the last stated option letter A-J, graded "
                "against the expected letter in any case).",
            ),
        ] = "boxed",
    ) -> None:
        from pipeline_kit.grading.grade import check_flags, grade_files, report
        from pipeline_kit.grading.math_grader import DEFAULT_TIMEOUT

        timeout = DEFAULT_TIMEOUT if timeout is None else timeout  # imported here: --help stays fast
        check_flags(workers, timeout)
        print(report(grade_files(paths, workers, timeout, force, extract)))
