"""`kit report RESULTS_DIR [OTHER_DIR]`: one self-contained HTML file to read the results in a browser: the
tables and pass@k / majority@k over k, every problem with each run's answer, verdict and text, and with OTHER_DIR
the problems whose verdict flipped (pipeline_kit.evaluation.report)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer

from pipeline_kit.cli.summarize_cmd import REGRADE_HELP, Extract, pinned_data

Opt = typer.Option


def register(app: typer.Typer) -> None:
    @app.command(
        help="Write one HTML file (no server or network needed) to read results in a browser: tables, pass@k and "
        "majority@k over k, every problem's samples with filters and search; with OTHER_DIR, what changed."
    )
    def report(
        results_dir: Annotated[
            Path, typer.Argument(metavar="RESULTS_DIR", help="Results folder, laid out as kit summarize reads it.")
        ],
        other_dir: Annotated[
            Path | None,
            typer.Argument(
                metavar="OTHER_DIR",
                help="A second results folder to compare with (B): tables side by side, the problems whose verdict "
                "flipped each way.",
                show_default=False,
            ),
        ] = None,
        output: Annotated[
            Path | None,
            Opt(
                "--output",
                "-o",
                help="Where to write the report (default: RESULTS_DIR/report.html, or "
                "RESULTS_DIR/report-vs-<OTHER_DIR's name>.html).",
            ),
        ] = None,
        regrade: Annotated[bool, Opt("--regrade", help=REGRADE_HELP)] = False,
        extract: Extract = "boxed",
    ) -> None:
        from pipeline_kit.evaluation.report import build_report
        from pipeline_kit.grading.modes import check_mode

        check_mode(extract)
        warnings: list[str] = []
        path = build_report(results_dir, other_dir, output, regrade, extract, pins=pinned_data, warnings=warnings)
        for line in warnings:
            print(f"kit report: {line}", file=sys.stderr)
        print(path, flush=True)
