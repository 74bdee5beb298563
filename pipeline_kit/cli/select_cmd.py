"""`kit select`: one solution per problem from the sampled runs of a results folder (pipeline_kit.selection)."""

from __future__ import annotations

from typing import Annotated

import typer

Opt = typer.Option


def register(app: typer.Typer) -> None:
    @app.command(help="Pick one solution per problem from sampled runs: a vote over grader-equivalent answers.")
    def select(
        input_dir: Annotated[str, Opt("--input_dir", help="A benchmark's results folder (output-rs*.jsonl).")],
        output_file: Annotated[str, Opt("--output_file", help="JSONL of the chosen records.")],
        method: Annotated[
            str, Opt("--method", help="majority | weighted | sc-tir | genselect (reads <input_dir>/genselect/).")
        ] = "majority",
        weight_field: Annotated[
            str | None, Opt("--weight_field", help="weighted: the record field with each solution's score.")
        ] = None,
    ) -> None:
        from pipeline_kit.selection.select import select as run

        print(run(input_dir, method, output_file, weight_field))
