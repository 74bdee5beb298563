"""`kit generate`: parses its flags into a GenerateSpec; `pipeline_kit.jobs.generate` builds the jobs (a server
group, unless the server is external, plus a client group that runs its share of the units)."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command, run_jobs
from pipeline_kit.cli.packing_flags import PackingFlags, PlanFlags, echo_plan
from pipeline_kit.cli.sandbox_flags import SandboxFlags
from pipeline_kit.cli.server_flags import ServerFlags
from pipeline_kit.errors import UserError

HELP = "Generate with an LLM over a JSONL file: chunks × random seeds, resumable."


def register(app: typer.Typer, plan_app: typer.Typer | None = None) -> None:
    def generate(
        flags: JobFlags,
        server: ServerFlags,
        sandbox: SandboxFlags,
        packing: PackingFlags,
        input_file: Annotated[str, typer.Option("--input_file", help="Input JSONL (a path where the job runs).")] = "",
        output_dir: Annotated[str, typer.Option("--output_dir", help="Folder for output[-rs{seed}].jsonl.")] = "",
        num_chunks: Annotated[int | None, typer.Option("--num_chunks", help="Cut the input into N chunks.")] = None,
        chunk_ids: Annotated[str | None, typer.Option("--chunk_ids", help="Only these chunks, e.g. 0,3,5-7.")] = None,
        num_random_seeds: Annotated[
            int | None, typer.Option("--num_random_seeds", help="N sampled outputs: seeds starting_seed..+N-1.")
        ] = None,
        random_seeds: Annotated[
            str | None, typer.Option("--random_seeds", help="Exactly these seeds, e.g. 0,4-7.")
        ] = None,
        starting_seed: Annotated[int, typer.Option("--starting_seed", help="First seed for --num_random_seeds.")] = 0,
        rerun_done: Annotated[bool, typer.Option("--rerun_done", help="Redo units whose .done exists.")] = False,
        postprocess_cmd: Annotated[
            str | None,
            typer.Option("--postprocess_cmd", help="Shell command run on each final file ($KIT_OUTPUT_FILE)."),
        ] = None,
        container: Annotated[
            str | None, typer.Option("--container", help="Container key for the client (default: 'kit' if defined).")
        ] = None,
        genselect: Annotated[
            bool,
            typer.Option("--genselect", help="Then GenSelect over the seeds' solutions into <output_dir>/genselect/."),
        ] = False,
    ) -> int:
        from pipeline_kit.inference.units import parse_id_list
        from pipeline_kit.jobs import GenerateSpec, generate_jobs, plan_generation
        from pipeline_kit.jobs.generate import generation_packing, nothing_to_generate

        packing.checked()
        if num_random_seeds is not None and random_seeds is not None:
            raise UserError("give --num_random_seeds or --random_seeds, not both.")
        if num_random_seeds is not None and num_random_seeds < 1:
            raise UserError(f"--num_random_seeds must be at least 1, got {num_random_seeds}.")
        seeds = (
            parse_id_list(random_seeds, "--random_seeds")
            if random_seeds is not None
            else list(range(starting_seed, starting_seed + num_random_seeds))
            if num_random_seeds is not None
            else None
        )
        spec = GenerateSpec(
            server=server.spec(),
            input_file=input_file,
            output_dir=output_dir,
            seeds=seeds,
            num_chunks=num_chunks,
            chunk_ids=parse_id_list(chunk_ids, "--chunk_ids") if chunk_ids is not None else None,
            rerun_done=rerun_done,
            postprocess_cmd=postprocess_cmd,
            num_jobs=packing.num_jobs,
            max_startup_share=packing.max_startup_share,
            max_jobs=packing.max_jobs,
            max_wall_ratio=packing.max_wall_ratio,
            nodes_free=packing.nodes_free,
            container=container,
            server_container=server.server_container,
            server_port=server.port(),
            sandbox=sandbox.job_spec(),
            overrides=flags.extra_args,
            genselect=genselect,
        )
        cluster = cluster_from(flags.cluster, flags.config_dir)
        options = flags.options("generate")
        plan = plan_generation(cluster, spec)
        if plan.done_count:
            typer.echo(
                f"kit generate: {plan.done_count} of {len(plan.units)} units are done already (--rerun_done redoes them)"
            )
        if flags.plan is not None or flags.dry_run:
            echo_plan(generation_packing(cluster, spec, plan, options), plan.done_count)
            if flags.plan is not None:
                raise typer.Exit(0)
        if not plan.todo and nothing_waits_on_it(flags, cluster, spec):
            typer.echo(nothing_to_generate(plan), err=True)
            raise typer.Exit(0)
        jobs = generate_jobs(cluster, spec, options, plan)
        raise typer.Exit(run_jobs(flags, cluster, options.expname, jobs))

    job_command(app, "generate", help=HELP)(generate)
    if plan_app is not None:
        job_command(plan_app, "generate", help=f"What `kit generate` would cost: {PLAN_HELP}", plan_flags=PlanFlags)(
            generate
        )


PLAN_HELP = (
    "units, jobs, units per job, start-up and generation GPU-hours, wall time on the free nodes, the fastest plan, "
    "and the GPU-hours saved against one unit per job, from measured figures (or a stated estimate). Takes the same "
    "flags; submits nothing."
)


def nothing_waits_on_it(flags: JobFlags, cluster, spec) -> bool:
    """Whether a run whose units are all done may submit nothing (it only says so, without importing nemo-run or
    starting a job): not on Slurm, where a later submission's --run_after may name it, nor when a job of its own
    (a GenSelect stage, --dependent_jobs, --run_after) or a dry run must still be shown."""
    return cluster.executor != "slurm" and not (
        spec.genselect or flags.dependent_jobs or flags.run_after or flags.dry_run
    )
