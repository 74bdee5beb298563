"""GPU-hours and wall time of a generation run packed three ways (one job, `--num_jobs=auto`, one unit per job) at
scales this machine cannot run: pipeline_kit.packing's cost model with given figures, and its FIFO queue model
(N free nodes; jobs start first come, first served as nodes free up; wall time = makespan).

    python perf/simulate_packing.py                      # the 70B case: 100 chunks x 8 seeds, 8 GPUs
    python perf/simulate_packing.py --startup_min 2 --tokens_per_s 3000 --nodes_free 16,64

Prints a Markdown table (perf/README.md holds the default run's)."""

from __future__ import annotations

import argparse

from pipeline_kit.packing import CostFigures, PackingLimits, plan_packing


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--startup_min", type=float, default=6.0, help="server start-up, minutes")
    p.add_argument("--tokens_per_s", type=float, default=1200.0, help="one server's tokens/s")
    p.add_argument("--problems_per_unit", type=int, default=50)
    p.add_argument("--tokens_per_problem", type=int, default=4000)
    p.add_argument("--gpus", type=int, default=8, help="GPUs per job (one node)")
    p.add_argument("--units", type=int, default=800, help="units (chunks x seeds)")
    p.add_argument("--nodes_free", default="8,32,128,800", help="comma-separated free-node counts")
    p.add_argument("--max_startup_share", type=float, default=0.1)
    p.add_argument("--time_limit_h", type=float, default=4.0, help="the partition's time limit, hours (0: none)")
    args = p.parse_args()

    figures = CostFigures(
        startup_s=args.startup_min * 60,
        seconds_per_sample=args.tokens_per_problem / args.tokens_per_s,
        samples_per_unit=args.problems_per_unit,
        gpus=args.gpus,
        nodes=1,
        source="given",
    )
    limits = PackingLimits(args.max_startup_share, None, args.time_limit_h * 3600 or None)
    auto = plan_packing(args.units, figures, limits)
    print(
        f"{args.units} units of {args.problems_per_unit} problems x {args.tokens_per_problem} tokens at "
        f"{args.tokens_per_s:.0f} tokens/s ({figures.unit_s:.0f} s per unit), start-up {args.startup_min:g} min, "
        f"{args.gpus} GPUs per job, time limit {args.time_limit_h:g} h; auto: {auto.units_per_job} units per job "
        f"({auto.reason.removeprefix('auto: ')})\n"
    )
    print(
        "| free nodes | packing | jobs | units/job | GPU-hours (start-up + generation) | wall time | vs one unit per job |"
    )
    print("|---|---|---|---|---|---|---|")
    for free in (int(n) for n in args.nodes_free.split(",")):
        baseline = plan_packing(args.units, figures, limits, jobs=args.units, nodes_free=free)
        base_hours, base_wall = _hours(baseline), baseline.wall_s()
        for name, plan in (
            ("1 job", plan_packing(args.units, figures, limits, jobs=1, nodes_free=free)),
            ("auto", plan_packing(args.units, figures, limits, nodes_free=free)),
            (f"{args.units} jobs", baseline),
        ):
            hours, wall = _hours(plan), plan.wall_s()
            longest = max(plan.durations())
            over = " (over the time limit)" if limits.time_limit_s and longest > limits.time_limit_s else ""
            print(
                f"| {free} | {name} | {plan.jobs} | {plan.units_per_job} | {hours:,.0f} "
                f"({plan.startup_hours():,.0f} + {plan.generation_hours():,.0f}) | {wall / 3600:.2f} h{over} | "
                f"{hours / base_hours - 1:+.0%} GPU-hours, {wall / base_wall:.2f}x wall |"
            )


def _hours(plan) -> float:
    return plan.startup_hours() + plan.generation_hours()


if __name__ == "__main__":
    main()
