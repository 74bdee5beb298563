"""The recipe registry (`pipeline_kit.recipes.RECIPES` and registry.py): the bundled recipes are the top-level
recipes/<name>/pipeline.py files, a user's own recipe runs as a file or a module, and an unknown name is one line
with suggestions."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from conftest import plan_lines

from pipeline_kit.errors import UserError
from pipeline_kit.recipes import RECIPES
from pipeline_kit.recipes.registry import bundled_path, load_recipe

REPO = Path(__file__).resolve().parents[1]

# a recipe as a user writes one: flags, and one run_cmd stage that writes a file
USER_RECIPE = textwrap.dedent(
    '''
    """Say hello into a file, once."""

    from dataclasses import dataclass
    from typing import Annotated

    import typer

    from pipeline_kit.recipes.flags import recipe_path, required
    from pipeline_kit.recipes.stages import Stage


    @dataclass
    class Params:
        output_dir: Annotated[str | None, typer.Option("--output_dir", help="Where hello/ goes.")] = None
        greeting: Annotated[str, typer.Option("--greeting", help="What to say.")] = "hello"


    def stages(cluster, p: Params) -> list[Stage]:
        from pipeline_kit.jobs import RunCmdSpec

        out = recipe_path(cluster, "--output_dir", required("--output_dir", p.output_dir, "(the recipe's folder)"))
        folder = f"{out}/hello"
        spec = RunCmdSpec(f"mkdir -p {folder} && echo {p.greeting} > {folder}/said.txt", outputs=(folder,))
        return [Stage("hello", spec, folder, [f"{folder}/said.txt"])]
    '''
)


def test_every_bundled_recipe_is_a_top_level_folder_with_a_pipeline_and_a_readme():
    assert set(RECIPES) == {"aimo", "metamath", "magpie_math"}
    for name, rel in RECIPES.items():
        path = bundled_path(name)
        assert path == REPO / "recipes" / rel and path.is_file(), path
        assert (path.parent / "README.md").is_file(), name
        recipe = load_recipe(name)
        assert recipe.name == name and recipe.help and hasattr(recipe.module, "Params"), name
    assert (REPO / "recipes" / "quickstart" / "README.md").is_file()


@pytest.mark.parametrize(
    ("ref", "needle"),
    [
        ("aimoo", "unknown recipe 'aimoo'. Did you mean 'aimo'? Known: aimo, magpie_math, metamath;"),
        ("no/such/pipeline.py", "recipe file no/such/pipeline.py does not exist"),
        ("no_such_pkg.recipe", "recipe module no_such_pkg.recipe cannot be imported"),
    ],
)
def test_an_unknown_recipe_is_one_line_with_suggestions(kit, ref, needle):
    with pytest.raises(UserError, match="recipe"):
        load_recipe(ref)
    res = kit("run_recipe", ref, "--dry_run")
    assert res.returncode == 2, res.stdout + res.stderr
    assert needle in res.stderr and len(res.stderr.strip().splitlines()) == 1, res.stderr


def test_a_file_without_stages_is_refused(tmp_path):
    (tmp_path / "empty.py").write_text('"""Nothing."""\n')
    with pytest.raises(UserError, match=r"defines no Params or stages"):
        load_recipe(str(tmp_path / "empty.py"))


def test_a_users_pipeline_file_runs_and_is_named_after_its_folder(kit, tmp_path):
    folder = tmp_path / "hello_recipe"
    folder.mkdir()
    (folder / "pipeline.py").write_text(USER_RECIPE)
    out = tmp_path / "out"
    res = kit("run_recipe", str(folder / "pipeline.py"), "--help")
    assert res.returncode == 0 and "--greeting" in res.stdout and "Say hello into a file" in res.stdout, res.stderr
    res = kit("run_recipe", str(folder / "pipeline.py"), f"--output_dir={out}", "--greeting=hi")
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "hello_recipe") == {"hello": "run"}
    assert (out / "hello" / "said.txt").read_text() == "hi\n" and (out / "hello" / ".stage.done").is_file()
    res = kit("run_recipe", str(folder / "pipeline.py"), f"--output_dir={out}", "--greeting=hi")
    assert res.returncode == 0 and plan_lines(res.stderr, "hello_recipe") == {"hello": "skip"}, res.stderr


def test_a_users_module_runs_by_its_dotted_name(kit, tmp_path):
    package = tmp_path / "my_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "greet.py").write_text(USER_RECIPE)
    res = kit("run_recipe", "my_pkg.greet", f"--output_dir={tmp_path / 'out'}", "--dry_run",
              env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert plan_lines(res.stderr, "greet") == {"hello": "run"} and "==== job greet-hello" in res.stdout
