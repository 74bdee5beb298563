"""`kit eval`: parses its flags into an EvalSpec; `pipeline_kit.jobs.evaluate` builds the jobs from the generate
builder (generation + grading per benchmark, then one summarize job)."""

from __future__ import annotations

from typing import Annotated

import typer

from pipeline_kit.cli.generate_cmd import PLAN_HELP
from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command, run_jobs
from pipeline_kit.cli.packing_flags import PackingFlags, PlanFlags, echo_plan
from pipeline_kit.cli.sandbox_flags import SandboxFlags
from pipeline_kit.cli.server_flags import ServerFlags
from pipeline_kit.cli.tracker_flags import TrackerFlags

HELP = "Evaluate a model on benchmarks (--benchmarks=math500:8,aime24:16): generate, grade, summarize."


def register(app: typer.Typer, plan_app: typer.Typer | None = None) -> None:
    def eval_(
        flags: JobFlags,
        server: ServerFlags,
        sandbox: SandboxFlags,
        packing: PackingFlags,
        trackers: TrackerFlags,
        benchmarks: Annotated[
            str, typer.Option("--benchmarks", help="name:N,... (N seeds at the benchmark's sampling; 0: greedy).")
        ] = "",
        output_dir: Annotated[
            str, typer.Option("--output_dir", help="Results go to OUTPUT_DIR/eval-results/<benchmark>/.")
        ] = "",
        data_dir: Annotated[
            str | None, typer.Option("--data_dir", help="Where `kit prepare_data` put the benchmarks.")
        ] = None,
        extra_datasets: Annotated[
            str | None, typer.Option("--extra_datasets", help="A folder of your own benchmark modules.")
        ] = None,
        num_chunks: Annotated[
            int | None, typer.Option("--num_chunks", help="Cut each benchmark into N chunks.")
        ] = None,
        rerun_done: Annotated[bool, typer.Option("--rerun_done", help="Redo units whose .done exists.")] = False,
        extract: Annotated[
            str | None,
            typer.Option(
                "--extract",
                help="Answer extraction for grading: boxed (the last \\boxed{}; none, no answer), auto (also a "
                "stated final answer, else the last expression) or mcq (the last stated option letter). Default: each "
                "benchmark's EXTRACT.",
            ),
        ] = None,
        container: Annotated[
            str | None, typer.Option("--container", help="Container key for the client (default: 'kit' if defined).")
        ] = None,
        genselect: Annotated[
            bool,
            typer.Option(
                "--genselect",
                help="Then GenSelect over each benchmark's samples (N of at least 2): genselect@N in the summary.",
            ),
        ] = False,
        judge_model: Annotated[
            str | None, typer.Option("--judge_model", help="An LLM judge: a later stage writes judge_correct.")
        ] = None,
        judge_server_type: Annotated[
            str, typer.Option("--judge_server_type", help="The judge's server type (like --server_type).")
        ] = "vllm",
        judge_server_address: Annotated[
            str | None, typer.Option("--judge_server_address", help="Use a running judge server at this URL.")
        ] = None,
        judge_server_gpus: Annotated[int, typer.Option("--judge_server_gpus", help="GPUs for the judge server.")] = 0,
        judge_server_args: Annotated[
            str, typer.Option("--judge_server_args", help="Extra arguments for the judge server's command.")
        ] = "",
    ) -> int:
        from pipeline_kit.benchmarks import benchmark_names
        from pipeline_kit.errors import UserError
        from pipeline_kit.jobs.evaluate import EvalSpec, eval_jobs, eval_packing, parse_benchmarks, summary_log

        packing.checked()
        if not output_dir:
            raise UserError("--output_dir is required: results go to OUTPUT_DIR/eval-results/<benchmark>/.")
        if extract is not None:
            from pipeline_kit.grading.modes import check_mode

            check_mode(extract)
        spec = EvalSpec(
            server=server.spec(),
            benchmarks=parse_benchmarks(benchmarks, benchmark_names(extra_datasets)),
            output_dir=output_dir,
            data_dir=data_dir,
            extra_datasets=extra_datasets,
            num_chunks=num_chunks,
            num_jobs=packing.num_jobs,
            max_startup_share=packing.max_startup_share,
            max_jobs=packing.max_jobs,
            max_wall_ratio=packing.max_wall_ratio,
            nodes_free=packing.nodes_free,
            rerun_done=rerun_done,
            extract=extract,
            container=container,
            server_container=server.server_container,
            server_port=server.port(),
            sandbox=sandbox.job_spec(),
            overrides=flags.extra_args,
            judge=judge_spec(
                judge_model, judge_server_type, judge_server_address, judge_server_gpus, judge_server_args
            ),
            genselect=genselect,
            trackers=trackers.trackers(imports=False),  # the summarize job's Python imports them (checked there)
        )
        cluster = cluster_from(flags.cluster, flags.config_dir)
        options = flags.options("eval")
        if flags.plan is not None or flags.dry_run:
            echo_plan(eval_packing(cluster, spec, options))
            if flags.plan is not None:
                raise typer.Exit(0)
        jobs = eval_jobs(cluster, spec, options)
        raise typer.Exit(run_jobs(flags, cluster, options.expname, jobs, result_log=summary_log(jobs)))

    job_command(app, "eval", help=HELP)(eval_)
    if plan_app is not None:
        job_command(plan_app, "eval", help=f"What `kit eval` would cost: {PLAN_HELP}", plan_flags=PlanFlags)(eval_)


def judge_spec(model: str | None, server_type: str, address: str | None, gpus: int, args: str):
    """The judge's ServerSpec, or None without --judge_model (the other --judge_* flags then have no use)."""
    from pipeline_kit.errors import UserError
    from pipeline_kit.servers.base import ServerSpec

    if model is None:
        if address is not None or gpus or args:
            raise UserError("--judge_server_* flags need --judge_model (the judge's model folder or name).")
        return None
    spec = ServerSpec(server_type, model, gpus=gpus, server_args=args, address=address)
    try:
        return spec.validate()
    except UserError as e:
        raise UserError(str(e).replace("--server_", "--judge_server_").replace("--model", "--judge_model")) from None
