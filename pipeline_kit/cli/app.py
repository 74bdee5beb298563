"""The typer app: every command module registers itself here."""

from __future__ import annotations

from typing import Annotated

import typer

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

app.add_typer(plan_app)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", help="Print kit's version and where it is installed.")
    ] = False,
) -> None:
    if version:  # `kit --version` alone is answered before typer loads (cli/main.py); this is for `kit -V cmd`
        print(version_line())
        raise typer.Exit(0)


# every command module, in the order of `kit --help`, with the top-level commands it registers (`plan`: the `kit plan`
# group, whose subcommands generate_cmd and eval_cmd register too); tests/test_cli_lazy.py checks it against the app
COMMAND_MODULES = {
    "run_cmd": ("run_cmd",),
    "generate_cmd": ("generate",),
    "eval_cmd": ("eval",),
    "start_server_cmd": ("start_server",),
    "start_sandbox_cmd": ("start_sandbox",),
    "experiment_cmds": ("status", "logs", "cancel"),
    "setup_cmd": ("setup",),
    "prepare_data_cmd": ("prepare_data",),
    "summarize_cmd": ("summarize",),
    "report_cmd": ("report",),
    "grade_cmd": ("grade",),
    "prepare_training_data_cmd": ("prepare_sft_data", "prepare_rl_data"),
    "train_cmd": ("sft", "grpo", "dpo"),
    "select_cmd": ("select",),
    "recipe_cmd": ("run_recipe",),
}
PLAN_MODULES = ("generate_cmd", "eval_cmd")  # they register `kit plan generate` and `kit plan eval`
_registered: set[str] = set()


def _register(names: list[str]) -> None:
    import importlib

    for name in names:
        if name in _registered:
            continue
        module = importlib.import_module(f"pipeline_kit.cli.{name}")
        module.register(app, plan_app) if name in PLAN_MODULES else module.register(app)
        _registered.add(name)


def modules_for(argv: list[str]) -> list[str]:
    """The command modules `kit ARGV` needs: the one that registers its command (for `kit plan X`, X's), or every
    one (no command, an unknown one: click's error lists the others, help shows them all)."""
    first = next((a for a in argv if not a.startswith("-")), None)
    if first == "plan":
        rest = argv[argv.index("plan") + 1 :]
        sub = next((a for a in rest if not a.startswith("-")), None)
        owner = {"generate": "generate_cmd", "eval": "eval_cmd", "simulate": None}.get(sub, "all")
        return list(COMMAND_MODULES) if owner == "all" else [owner] if owner else []
    owner = next((m for m, names in COMMAND_MODULES.items() if first in names), None)
    return [owner] if owner and "--help" not in argv else list(COMMAND_MODULES)


def click_command(argv: list[str] | None = None):
    """The click command of the app with what `kit ARGV` needs registered (all of it when argv is None): a command
    pays for its own module's imports and flags, not for every other command's."""
    _register(list(COMMAND_MODULES) if argv is None else modules_for(argv))
    return typer.main.get_command(app)
