"""`kit COMMAND` registers only COMMAND's module (cli/app.py: COMMAND_MODULES): the table must name every command
the full app has, with the module that defines it, and a command must run the same with or without the others."""

from __future__ import annotations

import subprocess
import sys

from pipeline_kit.cli import app as cli_app


def test_the_table_names_every_command_with_its_module():
    full = cli_app.click_command()
    owners = {}
    for name, command in full.commands.items():
        if name == "plan":
            continue
        owner = command.callback.__module__ if command.callback else type(command).__module__  # run_recipe: a group
        owners[name] = owner.rsplit(".", 1)[1]
    table = {name: module for module, names in cli_app.COMMAND_MODULES.items() for name in names}
    assert owners == table
    plan = {n: c.callback.__module__.rsplit(".", 1)[1] for n, c in full.commands["plan"].commands.items()}
    assert plan == {"simulate": "plan_cmd", "generate": "generate_cmd", "eval": "eval_cmd"}
    assert set(cli_app.PLAN_MODULES) == {m for m in plan.values() if m != "plan_cmd"}


def test_a_command_imports_only_its_own_module():
    assert cli_app.modules_for(["generate", "--cluster=x"]) == ["generate_cmd"]
    assert cli_app.modules_for(["plan", "eval", "--benchmarks=gsm8k"]) == ["eval_cmd"]
    assert cli_app.modules_for(["plan", "simulate"]) == []
    assert cli_app.modules_for(["generat"]) == list(cli_app.COMMAND_MODULES)  # click's error lists them all
    assert cli_app.modules_for(["sft", "--help"]) == list(cli_app.COMMAND_MODULES)
    probe = (
        "import sys; from pipeline_kit.cli.main import main; rc = main(['cancel', '--cluster=nope']); "
        "print(rc, sorted(m.rsplit('.', 1)[1] for m in sys.modules if m.startswith('pipeline_kit.cli.') "
        "and m.endswith(('_cmd', '_cmds'))))"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True).stdout.split(" ", 1)
    assert out[0] == "2"  # no such cluster config: a one-line error
    assert out[1].strip() == "['experiment_cmds', 'plan_cmd']"


def test_an_unknown_command_still_gets_the_suggestion(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "pipeline_kit.cli.main", "generat"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "generate" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
