"""The typer app: every command module registers itself here."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline_kit.cli import (
    eval_cmd,
    experiment_cmds,
    generate_cmd,
    grade_cmd,
    prepare_data_cmd,
    prepare_training_data_cmd,
    recipe_cmd,
    report_cmd,
    run_cmd,
    select_cmd,
    setup_cmd,
    start_sandbox_cmd,
    start_server_cmd,
    summarize_cmd,
    train_cmd,
)
from pipeline_kit.cli.plan_cmd import plan_app
from pipeline_kit.cli.version import version_line

app = typer.Typer(
    name="kit",
    help="pipeline_kit: from data to a trained model to a benchmark table, locally, in Docker or on Slurm.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,  # click's plain help: it wraps option names and help at any width, rich cuts them
)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Print kit's version and where it is installed.")
    ] = False,
) -> None:
    if version:  # `kit --version` alone is answered before typer loads (cli/main.py); this is for `kit -V cmd`
        print(version_line())
        raise typer.Exit(0)


app.add_typer(plan_app)

run_cmd.register(app)
generate_cmd.register(app, plan_app)
eval_cmd.register(app, plan_app)
start_server_cmd.register(app)
start_sandbox_cmd.register(app)
experiment_cmds.register(app)
setup_cmd.register(app)
prepare_data_cmd.register(app)
summarize_cmd.register(app)
report_cmd.register(app)
grade_cmd.register(app)
prepare_training_data_cmd.register(app)
train_cmd.register(app)
select_cmd.register(app)
recipe_cmd.register(app)


def click_command():
    return typer.main.get_command(app)
