"""`kit run_recipe NAME`: one subcommand per recipe (its own flags plus the shared job flags). The recipe's stages
are planned against their `.stage.done` keys; only the stages that are not done run, as one Pipeline."""

from __future__ import annotations

import typer

from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command, run_jobs
from pipeline_kit.recipes.registry import RECIPES, Recipe


def run_recipe(flags: JobFlags, recipe: Recipe, params) -> int:
    from pipeline_kit.recipes import stages as st

    cluster = cluster_from(flags.cluster, flags.config_dir)
    options = flags.options(recipe.name)
    plans = st.plan_stages(recipe.name, recipe.load().stages(cluster, params))
    jobs = st.recipe_jobs(cluster, plans, options)  # built (and so checked) before any folder is touched
    typer.echo(st.summary(recipe.name, plans), err=True)
    if not jobs:
        typer.echo(f"{recipe.name}: every stage is done with the same settings; nothing to submit", err=True)
        return 0
    if not flags.dry_run:
        moved = st.start(plans)
        for line in moved:
            typer.echo(line, err=True)
        if moved:  # built again: a folder moved aside has no finished units now
            jobs = st.recipe_jobs(cluster, plans, options)
    return run_jobs(flags, cluster, options.expname, jobs)


def _register_one(group: typer.Typer, recipe: Recipe) -> None:
    params_cls = recipe.load().Params

    def command(flags: JobFlags, params: params_cls) -> int:  # type: ignore[valid-type]
        raise typer.Exit(run_recipe(flags, recipe, params))

    command.__annotations__ = {"flags": JobFlags, "params": params_cls, "return": int}
    job_command(group, recipe.name, help=recipe.help)(command)


def register(app: typer.Typer) -> None:
    group = typer.Typer(help="Run a recipe: a multi-stage pipeline whose finished stages are skipped.",
                        no_args_is_help=True)  # fmt: skip
    for recipe in RECIPES.values():
        _register_one(group, recipe)
    app.add_typer(group, name="run_recipe")
