"""GPU-hours and wall time of a generation run packed four ways (one job, `--num_jobs=auto`, the fastest plan, one
unit per job) at scales this machine cannot run: pipeline_kit.packing's cost model with given figures, and its FIFO
queue model (N free nodes; jobs start first come, first served as nodes free up; wall time = queue wait +
makespan). `kit plan simulate` prints the same table.

    python perf/simulate_packing.py                      # the 70B case: 100 chunks x 8 seeds, 8 GPUs
    python perf/simulate_packing.py --queue_wait_min 5   # the same after a 5-minute queue wait
    python perf/simulate_packing.py --startup_min 2 --tokens_per_s 3000 --nodes_free 16,64

Prints a Markdown table (perf/README.md holds the default run's)."""

from __future__ import annotations

import argparse

from pipeline_kit.packing import MAX_WALL_RATIO, PackingLimits, simulation_table
from pipeline_kit.packing_figures import given_figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--startup_min", type=float, default=6.0, help="server start-up, minutes")
    p.add_argument("--tokens_per_s", type=float, default=1200.0, help="one server's tokens/s")
    p.add_argument("--problems_per_unit", type=int, default=50)
    p.add_argument("--tokens_per_problem", type=int, default=4000)
    p.add_argument("--gpus", type=int, default=8, help="GPUs per job (one node)")
    p.add_argument("--units", type=int, default=800, help="units (chunks x seeds)")
    p.add_argument("--nodes_free", default="8,32,128,800", help="comma-separated free-node counts")
    p.add_argument("--queue_wait_min", type=float, default=0.0, help="submission to the first job's start, minutes")
    p.add_argument("--max_wall_ratio", type=float, default=MAX_WALL_RATIO)
    p.add_argument("--time_limit_h", type=float, default=4.0, help="the partition's time limit, hours (0: none)")
    args = p.parse_args()
    figures = given_figures(
        args.startup_min, args.tokens_per_s, args.problems_per_unit, args.tokens_per_problem, args.gpus,
        args.queue_wait_min,
    )  # fmt: skip
    limits = PackingLimits(time_limit_s=args.time_limit_h * 3600 or None, max_wall_ratio=args.max_wall_ratio)
    print("\n".join(simulation_table(args.units, figures, limits, [int(n) for n in args.nodes_free.split(",")])))


if __name__ == "__main__":
    main()
