"""The jobs of an evaluation: per benchmark × seed × chunk, a generation through the generate builder whose final
files are graded in the same job as soon as they are complete, then one summarize job after all of them."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline_kit.benchmarks import get_benchmark
from pipeline_kit.benchmarks.prepared import check_prepared
from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.components.client import CLIENT_PYTHON_VAR, ClientCommand
from pipeline_kit.components.python_check import kit_python_check
from pipeline_kit.components.sandbox import SandboxSpec
from pipeline_kit.errors import UserError, did_you_mean
from pipeline_kit.evaluation.judge import judge_folder
from pipeline_kit.evaluation.trackers import Trackers
from pipeline_kit.grading.grade import grade_flags
from pipeline_kit.grading.output_names import output_name
from pipeline_kit.inference.config import check_generate_overrides
from pipeline_kit.jobs.generate import (
    GenerateSpec,
    UnitPlan,
    client_container,
    generate_jobs,
    generation_groups,
    genselect_spec,
    model_inputs,
    plan_generation,
    split_units,
)
from pipeline_kit.jobs.options import JobOptions, JobPlan, chain
from pipeline_kit.jobs.packing_plan import asked_jobs, check_packing_limits, packing_plan, parse_num_jobs
from pipeline_kit.overrides import override_value, route_overrides
from pipeline_kit.packing import MAX_WALL_RATIO, PackingPlan
from pipeline_kit.pipeline.model import AUTO_PORT, Command, CommandGroup, Endpoint, Job
from pipeline_kit.servers.base import ServerSpec

RESULTS = "eval-results"  # <output_dir>/eval-results/<benchmark>/output-rs{seed}.jsonl
# run by the generation script once a final file is complete ($KIT_PYTHON: the script's own interpreter)
GRADE_COMMAND = '"$KIT_PYTHON" -m pipeline_kit.grading.grade "$KIT_OUTPUT_FILE"'
SUMMARIZE_MODULES = ("pipeline_kit", "yaml", "typer")  # `kit summarize` in the job: kit's CLI
_SPEC_ITEM = re.compile(r"^([A-Za-z0-9_.-]+)(?::(\d+))?$")


@dataclass(frozen=True)
class BenchmarkRequest:
    """One entry of --benchmarks: `samples` seeds at the benchmark's sampling defaults, 0 for one greedy output."""

    name: str
    samples: int = 0


def parse_benchmarks(text: str, known: list[str]) -> list[BenchmarkRequest]:
    """`name:N[,name:N…]`; `name` or `name:0` is greedy. Spaces, duplicates and unknown names are errors."""
    if not text:
        raise UserError(
            f"--benchmarks is empty; name some, e.g. --benchmarks=math500:4,aime24 (known: {', '.join(known)})."
        )
    if any(ch.isspace() for ch in text):
        raise UserError(
            f"--benchmarks={text!r} has spaces; write name:N pairs joined by commas, e.g. math500:4,aime24."
        )
    out: list[BenchmarkRequest] = []
    for item in text.split(","):
        m = _SPEC_ITEM.match(item)
        if not m:
            raise UserError(
                f"--benchmarks entry '{item}' is not name or name:N (N a whole number of seeds, 0 for greedy)."
            )
        name, samples = m.group(1), int(m.group(2) or 0)
        if name not in known:
            raise UserError(
                f"--benchmarks: unknown benchmark '{name}'.{did_you_mean(name, known)} Known: {', '.join(known)}."
            )
        if any(r.name == name for r in out):
            raise UserError(f"--benchmarks names '{name}' twice; give each benchmark once.")
        out.append(BenchmarkRequest(name, samples))
    return out


@dataclass
class EvalSpec:
    """An evaluation: `benchmarks` through one server type; results under <output_dir>/eval-results/<name>/.
    `data_dir`: where `kit prepare_data` put the benchmarks (as the job sees it); `num_jobs`: pack all the units
    of all benchmarks into N jobs, or 'auto' (default: 1 on none/Docker, auto on Slurm: as generation's, each
    benchmark its own jobs where that is one unit per job); `overrides`: `++key=value`
    for every generation, after each benchmark's own defaults; `extract`: the answer extraction mode of every
    benchmark's grading (None: each benchmark's own, Benchmark.extract_mode); `genselect`: after the generation, a
    GenSelect over each benchmark's samples into <benchmark>/genselect/ (summarize's genselect@N); `trackers`:
    where the summarize job logs the metrics (W&B, MLflow; its flags are given only when set)."""

    server: ServerSpec
    benchmarks: list[BenchmarkRequest]
    output_dir: str
    data_dir: str | None = None
    extra_datasets: str | None = None
    num_chunks: int | None = None
    num_jobs: int | str | None = None
    max_startup_share: float = 0.1
    max_jobs: int | None = None
    max_wall_ratio: float = MAX_WALL_RATIO
    nodes_free: int | None = None  # None: asked where the plan is made (jobs.packing_plan.free_nodes)
    rerun_done: bool = False
    extract: str | None = None
    container: str | None = None
    server_container: str | None = None
    server_port: int | str = AUTO_PORT
    sandbox: SandboxSpec | None = None
    overrides: tuple[str, ...] = ()
    judge: ServerSpec | None = None  # an LLM judge: a dependent stage with its own server writes judge_correct
    judge_overrides: tuple[str, ...] = ("++prompt_config=judge/math", "++inference.temperature=0.0")
    genselect: bool = False
    trackers: Trackers = Trackers()

    def __post_init__(self) -> None:
        self.routed_overrides()  # a bad ++grade.KEY fails here, before anything is planned
        few = [f"{r.name}:{r.samples}" for r in self.benchmarks if r.samples < 2] if self.genselect else []
        if few:
            raise UserError(
                f"--genselect picks among each benchmark's samples; --benchmarks gives {', '.join(few)}: ask for at "
                "least 2 (e.g. aime24:8)."
            )
        self.num_jobs = parse_num_jobs(self.num_jobs)
        check_packing_limits(self.max_startup_share, self.max_jobs, self.max_wall_ratio, self.nodes_free)

    def routed_overrides(self) -> tuple[tuple[str, ...], list[str]]:
        """(generation's overrides, the grading step's flags): `++grade.KEY=VALUE` goes to grading as --KEY=VALUE
        (pipeline_kit.grading.grade.GRADE_OVERRIDES), the rest to generation; each part checked."""
        checkers = {"generate": check_generate_overrides, "grade": grade_flags}
        routed = route_overrides(self.overrides, checkers, "generate")
        return tuple(routed["generate"]), grade_flags(routed["grade"])

    def generate_spec(self, request: BenchmarkRequest) -> GenerateSpec:
        """The generate builder's spec for one benchmark: its data file, folder, seeds and default settings."""

        bench = get_benchmark(request.name, self.extra_datasets)
        sampled = request.samples > 0
        sandbox = self.sandbox or (SandboxSpec() if bench.requires_sandbox else None)
        generation, grading = self.routed_overrides()
        overrides = (*bench.generation_overrides(sampled), *generation)
        extract = self.extract or bench.extract_mode(overrides)
        return GenerateSpec(
            server=self.server,
            input_file=str(bench.data_file(self.data_dir)),
            output_dir=f"{self.output_dir.rstrip('/')}/{RESULTS}/{request.name}",
            seeds=list(range(request.samples)) if sampled else None,
            num_chunks=self.num_chunks,
            rerun_done=self.rerun_done,
            postprocess_cmd=" ".join([GRADE_COMMAND, f"--extract={extract}", *map(shlex.quote, grading)]),
            container=self.container,
            server_container=self.server_container,
            server_port=self.server_port,
            sandbox=sandbox,
            overrides=overrides,
        )


@dataclass(frozen=True)
class ClientSequence:
    """The clients of several benchmarks in one job, one after the other; the job fails if any of them did."""

    clients: tuple

    def __call__(self, refs: dict[str, Endpoint]) -> str:
        lines = ["kit_eval_rc=0", *(f"{{ {client(refs)}\n}} || kit_eval_rc=$?" for client in self.clients)]
        return "\n".join([*lines, "exit $kit_eval_rc"])


def eval_jobs(cluster: ClusterConfig, spec: EvalSpec, options: JobOptions) -> list[Job]:
    """Generation jobs (per benchmark, or packed into --num_jobs), then a summarize job after all of them."""

    specs = _generate_specs(cluster, spec)
    plans = [plan_generation(cluster, s) for s in specs]
    num_jobs = asked_jobs(cluster, spec.num_jobs)
    if num_jobs is None:  # auto: packed across benchmarks, unless that is one unit per job
        packing = _eval_packing(cluster, spec, specs, plans, options)
        num_jobs = packing.jobs if packing.jobs < packing.units else None
    if num_jobs is None:  # each benchmark its own jobs (one per unit), named after it
        generation = [
            job
            for r, s, p in zip(spec.benchmarks, specs, plans, strict=True)
            for job in generate_jobs(
                cluster,
                replace(s, num_jobs=max(len(p.todo), 1)),
                replace(options, expname=f"{options.expname}-{r.name}"),
                p,
            )
        ]
    else:
        generation = _packed_jobs(cluster, specs, plans, num_jobs, options)
    # a benchmark's missing data file (seen at submission where kit can see it, else where the job starts) says how
    # to make it, as on none (_generate_specs)
    hints = {
        p.input_file: f"it is the data of benchmark '{r.name}': {_prepare_hint(spec, r.name)}"
        for r, p in zip(spec.benchmarks, plans, strict=True)
    }
    for job in generation:
        job.input_hints.update({path: hints[path] for path in job.inputs if path in hints})
    judging = _judge_jobs(cluster, spec, specs, num_jobs, replace(options, after=generation)) if spec.judge else []
    picking = _genselect_jobs(cluster, specs, plans, options, generation) if spec.genselect else []
    # the summary reads the picks where there are any: a GenSelect skipped after a failed generation leaves none
    return (
        generation
        + judging
        + picking
        + _summarize_jobs(cluster, spec, specs[0], options, generation + judging, picking)
    )


def _generate_specs(cluster: ClusterConfig, spec: EvalSpec) -> list[GenerateSpec]:
    """Each benchmark's generation; on none a missing data file says how to make it. A data file this machine can
    read must still hold the rows `kit prepare_data` wrote (its .meta.json), or nothing is queued."""
    specs = [spec.generate_spec(r) for r in spec.benchmarks]
    for r, gen in zip(spec.benchmarks, specs, strict=True):
        if os.path.exists(gen.input_file):
            check_prepared(r.name, Path(gen.input_file))
        elif cluster.executor == "none":  # the data paths are this machine's: say how to make a missing one
            raise UserError(f"benchmark '{r.name}' has no data at {gen.input_file}; {_prepare_hint(spec, r.name)}.")
    return specs


def _prepare_hint(spec: EvalSpec, name: str) -> str:
    where = f" --data_dir={spec.data_dir}" if spec.data_dir else ""
    return f"run `kit prepare_data {name}{where}` first"


def eval_packing(cluster: ClusterConfig, spec: EvalSpec, options: JobOptions):
    """The packing of the evaluation's generation units into jobs (what `kit plan eval` and a dry run show)."""
    specs = _generate_specs(cluster, spec)
    return _eval_packing(cluster, spec, specs, [plan_generation(cluster, s) for s in specs], options)


def _eval_packing(
    cluster: ClusterConfig, spec: EvalSpec, specs: list[GenerateSpec], plans: list[UnitPlan], options: JobOptions
) -> PackingPlan:
    work = [(p.input_file, s.num_chunks, len(p.todo), s.overrides) for s, p in zip(specs, plans, strict=True)]
    return packing_plan(
        cluster, spec.server, work, options, spec.num_jobs, spec.max_startup_share, spec.max_jobs,
        spec.nodes_free, spec.max_wall_ratio,
    )  # fmt: skip


def judge_specs(spec: EvalSpec, generated: list[GenerateSpec]) -> list[GenerateSpec]:
    """One greedy judge generation per results file: it reads output[-rs{seed}].jsonl (graded) and writes its
    verdicts to <bench>/judge[-rs{seed}]/output.jsonl, which summarize reads as judge_correct."""
    out = []
    for gen in generated:
        for seed in gen.seeds if gen.seeds is not None else [None]:
            results = f"{gen.output_dir}/{output_name(seed)}"
            out.append(
                replace(
                    gen,
                    server=spec.judge,
                    input_file=results,
                    output_dir=str(judge_folder(Path(results))),
                    seeds=None,
                    postprocess_cmd=None,
                    server_container=None,
                    sandbox=None,
                    # the judge's file is its own: its verdict replaces the judged `generation` it reads
                    overrides=("++generation_key=generation", *spec.judge_overrides),
                )
            )
    return out


def _judge_jobs(
    cluster: ClusterConfig, spec: EvalSpec, generated: list[GenerateSpec], num_jobs: int | None, options: JobOptions
) -> list[Job]:
    """The judge stage, after the generation jobs: packed like the generation (one judge server per job)."""
    specs = judge_specs(spec, generated)
    plans = [plan_generation(cluster, s) for s in specs]
    judge_options = replace(options, expname=f"{options.expname}-judge", dependent_jobs=0)
    return _packed_jobs(cluster, specs, plans, num_jobs or len(generated), judge_options)


def _genselect_jobs(
    cluster: ClusterConfig, specs: list[GenerateSpec], plans: list[UnitPlan], options: JobOptions, generation: list[Job]
) -> list[Job]:
    """One job with one server that runs each benchmark's GenSelect (kit generate --genselect's stage, its picks left
    ungraded: summarize grades them by the sampled record they name), after every generation job succeeded: a pick
    among N samples needs all N (the last copy of each --dependent_jobs chain is the one that must succeed)."""
    picks = [replace(genselect_spec(s), postprocess_cmd=None) for s in specs]
    # the samples of a benchmark still to generate are written by this run: their .done keys are checked in the job
    picking = [plan_generation(cluster, p, input_final=not plan.todo) for p, plan in zip(picks, plans, strict=True)]
    last = [job for job in generation if not any(job in other.after for other in generation)]
    stage = replace(
        options, expname=f"{options.expname}-genselect", after=last, dependent_jobs=0, dependency_type="afterok"
    )
    return _packed_jobs(cluster, picks, picking, 1, stage)


def _packed_jobs(
    cluster: ClusterConfig, specs: list[GenerateSpec], plans: list[UnitPlan], num_jobs: int, options: JobOptions
) -> list[Job]:
    """All units of all benchmarks spread over `num_jobs` jobs (an array when several), each running its share of
    every benchmark with one server."""

    todo = [(i, unit) for i, plan in enumerate(plans) for unit in plan.todo]
    if not todo:
        message = f"kit eval: every unit of {', '.join(p.output_dir for p in plans)} is done; nothing to generate"
        groups = [CommandGroup([Command(f"echo {shlex.quote(message)}", name="done")], name="done")]
        return chain(replace(options, dependent_jobs=0), lambda copy: [JobPlan("", groups)])
    shares = split_units(todo, min(num_jobs, len(todo)))

    def plan_copy(copy: int) -> list[JobPlan]:
        clients = []
        for i, (gen, plan) in enumerate(zip(specs, plans, strict=True)):
            per_element = tuple(tuple(u.label for k, u in share if k == i) for share in shares)
            if not any(per_element):
                continue
            extra = ["++rerun_done=true"] if gen.rerun_done and copy == 0 else []
            extra += [f"++postprocess_cmd={override_value(gen.postprocess_cmd)}"] if gen.postprocess_cmd else []
            overrides = (*plan.overrides, *extra, *gen.overrides)
            clients.append(ClientCommand(cluster.kit_python, gen.server, overrides, per_element))
        base = next((s for s in specs if s.sandbox), specs[0])  # one benchmark that needs the sandbox brings it
        groups = generation_groups(cluster, base, ClientSequence(tuple(clients)), array=len(shares) > 1)
        io = {
            "inputs": [*(p.input_file for p in plans), *model_inputs(specs[0].server)],
            "outputs": [p.output_dir for p in plans],
            "plan_files": {path: text for p in plans for path, text in p.plan_file().items()},
        }
        io["checks"] = [
            c
            for gen, plan in zip(specs, plans, strict=True)
            for c in plan.job_checks(cluster.kit_python, gen.overrides)
        ]
        return [JobPlan("", groups, {**io, **({"array_size": len(shares)} if len(shares) > 1 else {})})]

    return chain(options, plan_copy)


def _summarize_jobs(
    cluster: ClusterConfig,
    spec: EvalSpec,
    first: GenerateSpec,
    options: JobOptions,
    generation: list[Job],
    optional: list[Job],
) -> list[Job]:
    """`kit summarize` of the results folder once every generation job and every `optional` one has ended (whatever
    its state: a failed benchmark still leaves the others' tables); `optional` jobs' outputs need not exist."""

    results = spec.output_dir.rstrip("/")  # summarize finds <results>/eval-results/<bench>/ and writes metrics.json
    python = f'"${{{CLIENT_PYTHON_VAR}:-{cluster.kit_python}}}"'
    line = shlex.join(["summarize", results, *spec.trackers.summarize_args()])
    line = f"{python} -m pipeline_kit.cli.main {line}"
    extras = spec.trackers.extras()  # wandb, mlflow: imported by the job, so checked in its Python
    install = f"pipeline-kit[{','.join(extras)}]" if extras else "pipeline-kit"
    modules = (*SUMMARIZE_MODULES, *extras)
    check = kit_python_check(cluster, CLIENT_PYTHON_VAR, modules, "the summary's Python", install)
    command = Command(line, name="summarize", container=client_container(cluster, first), python_check=check)
    after = generation + optional
    summarize_options = replace(options, expname=f"{options.expname}-summarize", after=after, dependent_jobs=0)
    fields = {
        "inputs": [job_output for job in generation for job_output in job.outputs],
        "outputs": [results],  # metrics.json: so the results folder is locked too (another run's summary)
        "skip_when_parents_failed": True,  # nothing to summarize when every benchmark's job failed
    }
    return chain(summarize_options, lambda copy: [JobPlan("", [CommandGroup([command], name="summarize")], fields)])


def summary_log(jobs: list[Job]) -> str:
    """The summarize job's log, relative to the run's log folder: it holds the tables."""
    job = jobs[-1]
    return f"{job.name}/{job.groups[0].commands[0].name}.log"
