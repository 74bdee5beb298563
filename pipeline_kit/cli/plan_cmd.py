"""`kit plan`: the sub-app whose `generate` and `eval` are those commands' own functions registered again (they print
their plan and submit nothing; see generate_cmd/eval_cmd), and `kit plan simulate` over given figures."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline_kit.cli.packing_flags import MAX_WALL_RATIO, MaxWallRatio

plan_app = typer.Typer(
    name="plan",
    help="What a generate or eval run would cost before it is submitted: jobs, GPU-hours, wall time.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@plan_app.command(
    "simulate",
    help="GPU-hours and wall time of one job, --num_jobs=auto, the fastest plan and one unit per job, for given "
    "figures at several numbers of free nodes (queue wait + a first-come-first-served queue), as a Markdown table.",
)
def simulate(
    units: Annotated[int, typer.Option("--units", help="Units (chunks x seeds).")] = 800,
    startup_min: Annotated[float, typer.Option("--startup_min", help="Server start-up, minutes.")] = 6.0,
    tokens_per_s: Annotated[float, typer.Option("--tokens_per_s", help="One server's tokens/s.")] = 1200.0,
    problems_per_unit: Annotated[int, typer.Option("--problems_per_unit", help="Problems per unit.")] = 50,
    tokens_per_problem: Annotated[int, typer.Option("--tokens_per_problem", help="Tokens per problem.")] = 4000,
    gpus: Annotated[int, typer.Option("--gpus", help="GPUs per job (one node).")] = 8,
    nodes_free: Annotated[
        str, typer.Option("--nodes_free", help="Free-node counts, e.g. 8,32,128,800.")
    ] = "8,32,128,800",
    queue_wait_min: Annotated[
        float, typer.Option("--queue_wait_min", help="From submission to the first job's start, minutes.")
    ] = 0.0,
    max_wall_ratio: MaxWallRatio = MAX_WALL_RATIO,
    time_limit_h: Annotated[float, typer.Option("--time_limit_h", help="The time limit, hours (0: none).")] = 4.0,
) -> None:
    from pipeline_kit.errors import UserError
    from pipeline_kit.jobs.packing_plan import check_packing_limits
    from pipeline_kit.packing import PackingLimits, simulation_table
    from pipeline_kit.packing_figures import given_figures

    check_packing_limits(0.1, None, max_wall_ratio)
    numbers = {"--units": units, "--tokens_per_s": tokens_per_s, "--problems_per_unit": problems_per_unit}
    numbers.update({"--tokens_per_problem": tokens_per_problem})
    for flag, value in numbers.items():
        if value <= 0:
            raise UserError(f"{flag}={value} must be more than 0.")
    if queue_wait_min < 0:
        raise UserError(f"--queue_wait_min={queue_wait_min} must be at least 0.")
    try:
        free = [int(n) for n in nodes_free.split(",")]
    except ValueError:
        raise UserError(f"--nodes_free={nodes_free} is not whole numbers joined by commas, e.g. 8,32,128.") from None
    if min(free) < 1:
        raise UserError(f"--nodes_free={nodes_free}: each count must be at least 1.")
    figures = given_figures(startup_min, tokens_per_s, problems_per_unit, tokens_per_problem, gpus, queue_wait_min)
    limits = PackingLimits(time_limit_s=time_limit_h * 3600 or None, max_wall_ratio=max_wall_ratio)
    typer.echo("\n".join(simulation_table(units, figures, limits, free)))
