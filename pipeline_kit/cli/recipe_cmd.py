"""`kit run_recipe NAME`: one subcommand per recipe in RECIPES (its own flags plus the shared job flags), and a user's
own recipe as `kit run_recipe path/to/pipeline.py` or `kit run_recipe my_pkg.my_module`. The recipe's stages are
planned against their `.stage.done` keys; only the stages that are not done run, as one Pipeline."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

from pipeline_kit import output_lock
from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command, run_jobs
from pipeline_kit.recipes import RECIPES
from pipeline_kit.recipes.registry import Recipe, load_recipe


def run_recipe(flags: JobFlags, recipe: Recipe, params) -> int:
    from pipeline_kit.recipes import stages as st

    cluster = cluster_from(flags.cluster, flags.config_dir)
    options = flags.options(recipe.name)
    plans = st.plan_stages(recipe.name, recipe.module.stages(cluster, params))
    jobs = st.recipe_jobs(cluster, plans, options)  # built (and so checked) before any folder is touched
    typer.echo(st.summary(recipe.name, plans), err=True)
    if not jobs:
        typer.echo(f"{recipe.name}: every stage is done with the same settings; nothing to submit", err=True)
        return 0
    if flags.dry_run:
        return run_jobs(flags, cluster, options.expname, jobs)
    # the stage folders are locked before any is moved aside: a run that writes one now keeps it
    folders = [p.stage.folder for p in plans if p.action != "skip"]
    locks = output_lock.acquire(folders, options.expname, cluster=cluster.name)
    try:
        moved = st.start(plans)
        for line in moved:
            typer.echo(line, err=True)
        if moved:  # built again: a folder moved aside has no finished units now
            jobs = st.recipe_jobs(cluster, plans, options)
        return run_jobs(flags, cluster, options.expname, jobs)
    finally:
        locks.release()  # (the run's Slurm jobs keep what they hold)


def _register_one(group: typer.Typer, command_name: str, recipe: Recipe) -> None:
    params_cls = recipe.module.Params

    def command(flags: JobFlags, params: params_cls) -> int:  # type: ignore[valid-type]
        raise typer.Exit(run_recipe(flags, recipe, params))

    command.__annotations__ = {"flags": JobFlags, "params": params_cls, "return": int}
    job_command(group, command_name, help=recipe.help)(command)


class RecipeGroup(TyperGroup):
    """The bundled recipes as subcommands, each loaded when it is asked for (a recipe's pipeline file is imported
    then: loading all three took 0.2 s of every kit command); any other NAME is a user's recipe (a file or module,
    loaded by import), or an unknown name (one line naming the close ones)."""

    def list_commands(self, ctx) -> list[str]:
        return list(RECIPES)

    def get_command(self, ctx, cmd_name: str):
        recipe = load_recipe(cmd_name)  # an unknown name raises UserError with suggestions
        single = typer.Typer(add_completion=False, rich_markup_mode=None)  # plain help, as the app's
        _register_one(single, cmd_name, recipe)
        return typer.main.get_command(single)


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        cls=RecipeGroup,
        help="Run a recipe: a multi-stage pipeline whose finished stages are skipped. NAME is a bundled recipe "
        "(below), or your own: a pipeline file (path/to/pipeline.py) or module (my_pkg.my_module).",
        no_args_is_help=True,
    )
    app.add_typer(group, name="run_recipe")
