"""The jobs of a generation run: chunks × seeds of an input file through a model server. Each job is a server group
(unless the server is external) plus a client group that runs its share of the units (+ a sandbox group)."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import dataclass, replace

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.components.client import ClientCommand, client_python_check, server_args_override
from pipeline_kit.components.sandbox import SANDBOX_NAME, SandboxSpec
from pipeline_kit.components.server import SERVER_NAME, server_container, server_group
from pipeline_kit.errors import UserError
from pipeline_kit.grading.output_names import PLAN_NAME, plan_text
from pipeline_kit.inference import done_key, request_options
from pipeline_kit.inference.config import GenerateConfig, check_generate_overrides, parse_generate_config
from pipeline_kit.inference.registry import task_class
from pipeline_kit.inference.units import Unit, done_units, plan_units, split_units
from pipeline_kit.jobs.input_checks import check_generation_inputs, job_check
from pipeline_kit.jobs.options import JobOptions, JobPlan, chain
from pipeline_kit.jobs.packing_plan import check_packing_limits, packing_plan, parse_num_jobs
from pipeline_kit.overrides import config_value, override_key, override_value, take_override
from pipeline_kit.packing import MAX_WALL_RATIO, PackingPlan
from pipeline_kit.pipeline.model import AUTO_PORT, Command, CommandGroup, HardwareConfig, Job
from pipeline_kit.servers.base import ServerSpec


@dataclass
class GenerateSpec:
    """What to generate. `seeds`: sampled outputs (output-rs{seed}.jsonl), None for one greedy output.jsonl;
    `num_chunks`/`chunk_ids`: cut the input; `num_jobs`: spread the units over N jobs, one server each, or 'auto'
    (default: 1 on none/Docker, auto on Slurm: the fewest GPU-hours whose wall time on `nodes_free` free nodes is
    within `max_wall_ratio` of the fastest plan's, each job within the time limit and at most `max_jobs`; where the
    free nodes are unknown, start-up at most `max_startup_share` of each job; see jobs.packing_plan); `overrides`:
    `++key=value` for the generation script, checked here.
    `input_dir` (from `++input_dir=`): GenSelect's runs, read instead of `input_file` (++generation_type=genselect);
    `genselect`: after the seeds, a GenSelect over them into <output_dir>/genselect/ (a follow-on job).
    Paths are this machine's on executor none, else absolute paths where the job runs."""

    server: ServerSpec
    input_file: str
    output_dir: str
    input_dir: str | None = None
    seeds: list[int] | None = None
    num_chunks: int | None = None
    chunk_ids: list[int] | None = None
    rerun_done: bool = False
    postprocess_cmd: str | None = None
    num_jobs: int | str | None = None
    max_startup_share: float = 0.1
    max_jobs: int | None = None
    max_wall_ratio: float = MAX_WALL_RATIO
    nodes_free: int | None = None  # None: asked where the plan is made (jobs.packing_plan.free_nodes)
    container: str | None = None  # the client's container key (default: 'kit' if the cluster has one)
    server_container: str | None = None  # default: the cluster's container named after the server type
    server_port: int | str = AUTO_PORT
    sandbox: SandboxSpec | None = None
    overrides: tuple[str, ...] = ()
    genselect: bool = False

    def __post_init__(self) -> None:

        given, self.overrides = take_override(self.overrides, "input_dir")
        self.input_dir = given if given is not None else self.input_dir
        if self.input_dir is not None and self.input_file:
            raise UserError("give --input_file (a generation) or ++input_dir (GenSelect's runs), not both.")
        if not (self.input_file or self.input_dir) or not self.output_dir:
            raise UserError("--input_file and --output_dir are required (a JSONL file and a folder for the outputs).")
        if self.genselect and self.seeds is None:
            raise UserError("--genselect picks among sampled solutions; add --num_random_seeds=N (N of at least 2).")
        self.num_jobs = parse_num_jobs(self.num_jobs)
        check_packing_limits(self.max_startup_share, self.max_jobs, self.max_wall_ratio, self.nodes_free)
        if self.sandbox is not None:
            self.sandbox = _sandbox_with_room(self.sandbox, self.overrides)


def _sandbox_with_room(sandbox: SandboxSpec, overrides: tuple[str, ...]) -> SandboxSpec:
    """TIR keeps a sandbox session per sample in flight (inference/tir.py). A sandbox holding --max_sessions ends
    the least recently used idle one for the next: a sample between two code rounds, which then replays its cells
    (and a cell with random or time-dependent output tells the model something other than before). So a TIR job's
    sandbox gets --max_sessions of at least ++max_concurrent_requests."""
    code_execution, _ = take_override(overrides, "code_execution")
    if (code_execution or "").lower() != "true":
        return sandbox
    given, _ = take_override(overrides, "max_concurrent_requests")
    in_flight = int(given) if given and given.isdigit() else GenerateConfig.max_concurrent_requests
    return sandbox.with_sessions(in_flight, "++max_concurrent_requests")


@dataclass
class UnitPlan:
    """The units of a spec on a cluster: all of them, and those still to run (finished ones are left out where
    kit can see the outputs; a finished one made with other settings is an error)."""

    units: list[Unit]
    todo: list[Unit]
    input_file: str  # GenSelect: the folder of its runs
    output_dir: str
    overrides: tuple[str, ...] = ()
    checked: bool = False  # the input and output folder were checked at submission (else: in the job, first)

    def job_checks(self, python: str, overrides: tuple[str, ...]) -> list[str]:
        """Job.checks of a job that runs units of this plan with the script's `overrides`."""
        return [] if self.checked else [job_check(python, (*self.overrides, *overrides))]

    @property
    def done_count(self) -> int:
        return len(self.units) - len(self.todo)

    def plan_file(self) -> dict[str, str]:
        """Job.plan_files of a job that runs units of this plan: the merged outputs it plans, done or not."""
        outputs = {u.merged_file("").name for u in self.units}
        return {f"{self.output_dir.rstrip('/')}/{PLAN_NAME}": plan_text(sorted(outputs))}


def plan_generation(cluster: ClusterConfig, spec: GenerateSpec, input_final: bool = True) -> UnitPlan:
    """`input_final=False`: an earlier stage of the same run still writes the input, so no unit is taken as done
    here (the job checks the .done keys when it starts)."""

    spec.server.validate()
    check_generate_overrides(spec.overrides)  # a typo stops here, before anything is queued
    _check_request_options(spec)
    _check_prompt_config(cluster, spec)
    units = plan_units(spec.seeds, spec.num_chunks, spec.chunk_ids)
    flag, given = ("++input_dir", spec.input_dir) if spec.input_dir is not None else ("--input_file", spec.input_file)
    input_path, output_dir = _job_paths(cluster.executor, {flag: given, "--output_dir": spec.output_dir})
    own = [f"++{flag.lstrip('-+')}={override_value(input_path)}", f"++output_dir={override_value(output_dir)}"]
    own += [f"++num_chunks={spec.num_chunks}"] if spec.num_chunks is not None else []
    own += [f"++server.server_type={override_value(spec.server.server_type)}"]
    typed = any(override_key(a) == "generation_type" for a in spec.overrides)
    if spec.input_dir is not None or typed:
        _script_config(spec, own)  # checked whole: ++generation_type goes with its input (++input_dir for GenSelect)
    checked = input_final and check_generation_inputs(  # else the job checks them before its server starts
        cluster, _task(spec), spec.input_file, spec.output_dir, input_path, output_dir, spec.overrides
    )
    if spec.input_dir is None and not typed and input_final and os.path.isfile(input_path):
        _check_output_key(spec, input_path)
    if spec.input_dir is not None and input_final and cluster.executor == "none":
        # lazy: the grader under it (0.1 s of imports) is for GenSelect only, not every plan
        from pipeline_kit.selection.genselect_runs import run_files

        run_files(input_path)  # no runs there: say so now rather than in the job
    todo = units
    if not spec.rerun_done and input_final and _outputs_visible(cluster):
        done = done_units(units, output_dir)
        if done and os.path.exists(input_path):  # else an earlier stage writes the input: the job checks the keys
            key = _script_key(spec, own)  # hashed once, not once per unit
            finished = {u for u in done if _finished(u, key, output_dir)} - _merge_pending(
                done, output_dir, spec.num_chunks
            )
            todo = [u for u in units if u not in finished]
    return UnitPlan(units, todo, input_path, output_dir, tuple(own), checked)


def _check_request_options(spec: GenerateSpec) -> None:
    """A request option the server type cannot honour is refused now, as the client would refuse it in the job."""
    keys = [f"++{k}" for k in map(override_key, spec.overrides) if k.startswith("chat_template_kwargs.")]
    keys += ["++inference.reasoning_effort"] if take_override(spec.overrides, "inference.reasoning_effort")[0] else []
    endpoint = take_override(spec.overrides, "server.endpoint")[0] or "chat"
    refused = request_options.refusal(spec.server.server_type, endpoint, keys)
    budget = take_override(spec.overrides, "inference.tokens_to_generate")[0]
    refused = refused or request_options.budget_refusal(spec.server.server_type, budget == "null")
    if refused:
        raise UserError(refused)


def _check_output_key(spec: GenerateSpec, input_path: str) -> None:
    """An input whose first record already holds `generation` needs ++generation_key (see inference.generate's
    output_key), said now rather than when the job starts."""
    from pipeline_kit.inference.generate_task import output_key

    key, _ = take_override(spec.overrides, "generation_key")
    with open(input_path) as f:
        first = f.readline()
    try:
        record = json.loads(first)
    except ValueError:
        return  # the job names the bad line
    rows = [(1, record)] if isinstance(record, dict) else []
    output_key(GenerateConfig(input_file=spec.input_file, generation_key=key), rows)


def _check_prompt_config(cluster: ClusterConfig, spec: GenerateSpec) -> None:
    """Load the prompt config the job will load (its few-shot examples checked with it), so that a bad one stops
    here: a shipped name, or a file this machine has (on none it must be here; elsewhere a path that is not here
    may be the cluster's, and the job checks it)."""
    from pipeline_kit.inference.prompts import PROMPTS_DIR, load_prompt_config

    task = _task(spec)
    if task.prompt_key is None:  # e.g. Magpie: it writes problems from the chat template alone
        return
    name, _ = take_override(spec.overrides, task.prompt_key)
    name = name or str(config_value(GenerateConfig(), task.prompt_key))
    if cluster.executor == "none" or os.path.isfile(name) or (PROMPTS_DIR / f"{name}.yaml").is_file():
        load_prompt_config(name)


def _task(spec: GenerateSpec):
    """The class of the spec's ++generation_type (tasks.GenerationTask): what its units read and are keyed by."""

    generation_type, _ = take_override(spec.overrides, "generation_type")
    return task_class(generation_type or GenerateConfig.generation_type)


def _script_config(spec: GenerateSpec, own: list[str]):
    """The generation script's config as the job will see it (the server's address is only known there)."""

    placeholder = f"++server.base_url={override_value(spec.server.address or 'http://resolved-in-the-job/v1')}"
    server = [f"++server.model={override_value(spec.server.name)}", *server_args_override(spec.server)]
    return parse_generate_config([*own, placeholder, *server, *spec.overrides])


def _script_key(spec: GenerateSpec, own: list[str]) -> dict[str, object]:
    """The .done key of the script's config (the server's address is not part of it), before the per-unit fields."""

    cfg = _script_config(spec, own)
    task = _task(spec)
    return done_key.key_fields(cfg, task, task.input_digest(cfg))


def _merge_pending(done: list[Unit], output_dir: str, num_chunks: int | None) -> set[Unit]:
    """Per seed whose chunks are all done while their merge is not (a job stopped while it wrote the merge, a full
    disk for one): its last chunk, so that a job runs and merges them (inference.generate's prepare)."""
    chunks: dict[int | None, list[Unit]] = {}
    for u in done:
        if u.chunk_id is not None and done_key.done_marker(u.output_file(output_dir)).exists():
            chunks.setdefault(u.seed, []).append(u)
    return {
        max(mine, key=lambda u: u.chunk_id)
        for mine in chunks.values()
        if len(mine) == num_chunks and not done_key.done_marker(mine[0].merged_file(output_dir)).exists()
    }


def _finished(unit: Unit, key: dict[str, object], output_dir: str) -> bool:
    """Done (the caller checked) and made with the same settings; done with other settings is an error that names
    what changed."""

    key = done_key.for_unit(key, unit.chunk_id, unit.seed)
    own = unit.output_file(output_dir)
    output, key = (
        (own, key)
        if done_key.done_marker(own).exists()
        else (unit.merged_file(output_dir), done_key.merged_fields(key))
    )
    done_key.check_done(output, key, "--rerun_done")
    return True


def generate_jobs(
    cluster: ClusterConfig, spec: GenerateSpec, options: JobOptions, plan: UnitPlan | None = None
) -> list[Job]:
    """The jobs of `spec` (and of its --dependent_jobs copies), then with `spec.genselect` the GenSelect stage's.
    When every unit is done already, one job that only says so, so that dependents and --run_after still have
    something to wait on."""
    plan = plan or plan_generation(cluster, spec)
    jobs = _unit_jobs(cluster, spec, options, plan)
    if not spec.genselect:
        return jobs
    picking = genselect_spec(spec)
    # after the last copy of the chain (each copy is one job, after the one before), and only if it succeeded
    stage = replace(
        options, expname=f"{options.expname}-genselect", after=jobs[-1:], dependent_jobs=0, dependency_type="afterok"
    )
    return jobs + _unit_jobs(cluster, picking, stage, plan_generation(cluster, picking, input_final=not plan.todo))


def genselect_spec(spec: GenerateSpec) -> GenerateSpec:
    """The GenSelect stage of --genselect: one greedy unit over the seeds' runs, into <output_dir>/genselect/, with
    the same server and settings (++genselect.* among them)."""
    return replace(
        spec,
        input_file="",
        input_dir=spec.output_dir,
        output_dir=f"{spec.output_dir.rstrip('/')}/genselect",
        seeds=None,
        num_chunks=None,
        chunk_ids=None,
        num_jobs=None,
        sandbox=None,
        genselect=False,
        overrides=(*spec.overrides, "++generation_type=genselect"),
    )


def nothing_to_generate(plan: UnitPlan) -> str:
    return f"kit generate: all {len(plan.units)} units in {plan.output_dir} are done; nothing to generate"


def _unit_jobs(cluster: ClusterConfig, spec: GenerateSpec, options: JobOptions, plan: UnitPlan) -> list[Job]:

    io = {
        "inputs": [plan.input_file, *model_inputs(spec.server)],
        "outputs": [plan.output_dir],
        "plan_files": plan.plan_file(),
    }
    if not plan.todo:
        done = Command(
            f"echo {shlex.quote(nothing_to_generate(plan))}", name="done", container=client_container(cluster, spec)
        )
        only = JobPlan("", [CommandGroup([done], name="done")], io)
        return chain(replace(options, dependent_jobs=0), lambda copy: [only])

    def plan_copy(copy: int) -> list[JobPlan]:
        todo = plan.todo  # later copies of a --dependent_jobs chain run the same units and resume what is left
        shares = split_units(todo, packing.jobs)
        overrides = list(plan.overrides)
        # only the first job of a --dependent_jobs chain redoes; the next ones resume what it left
        overrides += ["++rerun_done=true"] if spec.rerun_done and copy == 0 else []
        overrides += [f"++postprocess_cmd={override_value(spec.postprocess_cmd)}"] if spec.postprocess_cmd else []
        labels = tuple(tuple(u.label for u in share) for share in shares)
        client = ClientCommand(cluster.kit_python, spec.server, (*overrides, *spec.overrides), labels)
        groups = generation_groups(cluster, spec, client, array=len(shares) > 1)
        fields = {**io, **({"array_size": len(shares)} if len(shares) > 1 else {})}
        fields["checks"] = plan.job_checks(cluster.kit_python, spec.overrides)
        return [JobPlan("", groups, fields)]

    packing = generation_packing(cluster, spec, plan, options)
    return chain(options, plan_copy)


def generation_packing(cluster: ClusterConfig, spec: GenerateSpec, plan: UnitPlan, options: JobOptions) -> PackingPlan:
    """How the units still to run are packed into jobs (`spec.num_jobs`: N, auto, or the executor's default)."""
    work = [(plan.input_file, spec.num_chunks, len(plan.todo), spec.overrides)]
    return packing_plan(
        cluster, spec.server, work, options, spec.num_jobs, spec.max_startup_share, spec.max_jobs,
        spec.nodes_free, spec.max_wall_ratio,
    )  # fmt: skip


def _job_paths(executor: str, paths: dict[str, str]) -> list[str]:
    """`paths` by flag, as the job sees them: on none taken from here (jobs run in the packaged code folder);
    elsewhere they must be absolute."""
    if executor == "none":
        return [os.path.abspath(path) for path in paths.values()]
    for flag, path in paths.items():
        if not os.path.isabs(path):
            raise UserError(
                f"{flag}={path} is relative; on executor '{executor}' give the absolute path where the job runs."
            )
    return list(paths.values())


def model_inputs(server: ServerSpec) -> list[str]:
    """The model folder a server kit starts reads, as a job input when it is a path (not a model name): on none a
    missing one is an error at submission unless a job of the pipeline or of --run_after writes it
    (launch.run); elsewhere the job's own check says it when the job starts."""
    return [server.model] if server.address is None and os.path.isabs(server.model) else []


def _outputs_visible(cluster: ClusterConfig) -> bool:
    """Whether the output folder is this machine's (so finished units can be left out of the plan)."""
    return cluster.executor == "none" or (cluster.executor == "slurm" and cluster.ssh_tunnel is None)


def client_container(cluster: ClusterConfig, spec: GenerateSpec) -> str | None:
    """--container; else on Docker the server's (a Docker job runs in one container); else 'kit' if defined."""

    if spec.container:
        cluster.container(spec.container)  # fails with the known keys when it is missing
        return spec.container
    if cluster.executor == "local" and spec.server.starts_server:
        served = server_container(spec.server, cluster, spec.server_container)
        if served is not None:
            return served
    return cluster.kit_container


def generation_groups(cluster: ClusterConfig, spec: GenerateSpec, client: object, array: bool) -> list[CommandGroup]:
    """One job: server group + client group (+ sandbox group): a het job on Slurm. An array job (several shares of
    the units) cannot be heterogeneous on Slurm, so each element runs everything side by side in one group."""

    client_key = client_container(cluster, spec)
    check = client_python_check(cluster)
    sandboxed = spec.sandbox.group(cluster) if spec.sandbox else None
    refs = {SANDBOX_NAME: sandboxed.commands[0]} if sandboxed else {}
    if array and sandboxed and sandboxed.container != client_key:
        raise UserError(
            f"several jobs run the sandbox beside the client in one container, but they differ ({sandboxed.container} "
            f"vs {client_key}); pass --num_jobs=1 or the same --container and --sandbox_container."
        )
    if not spec.server.starts_server:
        client_cmd = Command(client, name="client", container=client_key, refs=refs, python_check=check)
        if array and sandboxed:
            return [CommandGroup([*sandboxed.commands, client_cmd], name="generate", needs_namespaces=True)]
        return [CommandGroup([client_cmd], name="client"), *([sandboxed] if sandboxed else [])]
    served = server_group(
        spec.server, cluster, server_container(spec.server, cluster, spec.server_container), spec.server_port
    )
    refs[SERVER_NAME] = served.commands[0]
    client_cmd = Command(client, name="client", container=client_key, refs=refs, python_check=check)
    if array:
        if spec.server.nodes > 1:
            raise UserError(
                f"--server_nodes={spec.server.nodes} needs one job for all units (--num_jobs=1): several jobs run as "
                "a Slurm array, whose elements cannot hold a multi-node server beside its client."
            )
        if served.container != client_key:
            raise UserError(
                f"several jobs run server and client in one container, but they differ ({served.container} vs "
                f"{client_key}); pass --num_jobs=1 or the same --container and --server_container."
            )
        sandbox_cmds = sandboxed.commands if sandboxed else []
        return [
            CommandGroup(
                [*served.commands, *sandbox_cmds, client_cmd], name="generate", needs_namespaces=bool(sandboxed)
            )
        ]
    hardware = HardwareConfig(partition=cluster.cpu_partition) if cluster.executor == "slurm" else HardwareConfig()
    return [served, CommandGroup([client_cmd], hardware=hardware, name="client"), *([sandboxed] if sandboxed else [])]
