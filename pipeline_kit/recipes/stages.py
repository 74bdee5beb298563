"""A recipe's stages: each is one builder spec (generate, eval, sft/grpo, run_cmd) with a content key. A stage whose
`.stage.done` holds the same key is skipped; a changed key moves its old folder aside and reruns it, and since every
key includes the keys of the stages before it, the later stages rerun too."""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import time
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.content_digest import path_digest
from pipeline_kit.errors import UserError
from pipeline_kit.jobs.options import JobOptions
from pipeline_kit.pipeline.model import Command, CommandGroup, Job

DONE = ".stage.done"  # written by the stage's last job once its outputs exist: {"key": ..., "digest": ...}
STARTED = ".stage.key"  # written at submission: the key the stage's folder is being made with


@dataclass
class Stage:
    """One stage: `spec` is what its builder takes (GenerateSpec, EvalSpec, TrainSpec, RunCmdSpec); `folder` holds
    all it writes; `outputs` must exist for it to count as done; `inputs`: files from outside the recipe whose
    content is part of the key (a stage's own settings are its spec)."""

    name: str
    spec: object
    folder: str
    outputs: list[str]
    inputs: list[str] = field(default_factory=list)


@dataclass
class StagePlan:
    """What a submission does with each stage: 'skip' (done with this key), 'run' or 'rerun' (its old folder moves
    aside), and why."""

    stage: Stage
    key: str
    action: str
    reason: str


NOT_IN_KEY = (
    "num_jobs",
    "max_startup_share",
    "max_jobs",
    "max_wall_ratio",
    "nodes_free",
    "server_port",
    "save_before_timeout",
)  # how a stage is run, not what it makes


def spec_fields(spec: object) -> dict[str, object]:
    """The spec's fields as JSON values, less those that cannot change the stage's outputs."""
    fields = {k: v for k, v in asdict(spec).items() if k not in NOT_IN_KEY} if is_dataclass(spec) else spec
    return json.loads(json.dumps(fields, default=str, sort_keys=True))


def input_digest(path: str) -> str:
    """A file's or a folder's content digest (pipeline_kit.content_digest, the one the .done keys use: a model folder
    rewritten in place is a new key); '-' when it is not visible here (a path where the jobs run)."""
    return path_digest(path, "stage input ") or "-"


def stage_key(recipe: str, stage: Stage, upstream: str) -> str:
    body = {
        "recipe": recipe,
        "stage": stage.name,
        "spec": spec_fields(stage.spec),
        "inputs": {p: input_digest(p) for p in stage.inputs},
        "upstream": upstream,
    }
    return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def recorded(folder: str, name: str) -> str | None:
    try:
        return json.loads((Path(folder) / name).read_text())["key"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def plan_stages(recipe: str, stages: list[Stage]) -> list[StagePlan]:
    """Each stage's key (chained through the ones before it) and what to do with it. Once a stage runs, every later
    stage runs too: its input is being remade."""
    plans: list[StagePlan] = []
    upstream, remade = "", False
    for stage in stages:
        key = stage_key(recipe, stage, upstream)
        done, started = recorded(stage.folder, DONE), recorded(stage.folder, STARTED)
        if done == key and not remade:
            plans.append(StagePlan(stage, key, "skip", "done with the same settings"))
        elif (done or started) not in (None, key) and Path(stage.folder).exists():
            why = "an earlier stage changed" if remade else "its settings changed"
            plans.append(StagePlan(stage, key, "rerun", why))
        else:
            plans.append(StagePlan(stage, key, "run", "not done yet" if not started else "resuming"))
        remade = remade or plans[-1].action != "skip"
        upstream = key
    return plans


def move_aside(folder: str) -> str:
    """The stage's old folder, renamed to <folder>.replaced-<time> (kept, never deleted)."""
    target = f"{folder.rstrip('/')}.replaced-{time.strftime('%Y%m%d-%H%M%S')}"
    os.replace(folder, target)
    return target


def start(plans: list[StagePlan]) -> list[str]:
    """Before submission: move the folders of stages that rerun aside, and record the key each running stage's
    folder is made with. Returns what was moved, as lines to print."""
    lines = []
    for p in plans:
        if p.action == "skip":
            continue
        if p.action == "rerun":
            lines.append(f"stage {p.stage.name}: {p.reason}; its old folder moved to {move_aside(p.stage.folder)}")
        write_atomic(Path(p.stage.folder) / STARTED, json.dumps({"key": p.key}) + "\n")
    return lines


def build_jobs(cluster: ClusterConfig, spec: object, options: JobOptions) -> list[Job]:
    """The jobs of one stage's spec, from the builder the CLI uses for it."""
    # lazy: stage_done (run inside a job) imports this module, and a job never loads the job builders
    from pipeline_kit.jobs import RunCmdSpec, run_cmd_jobs
    from pipeline_kit.jobs.evaluate import EvalSpec, eval_jobs
    from pipeline_kit.jobs.generate import GenerateSpec, generate_jobs
    from pipeline_kit.jobs.train import TrainSpec, train_jobs

    builders = {GenerateSpec: generate_jobs, EvalSpec: eval_jobs, TrainSpec: train_jobs, RunCmdSpec: run_cmd_jobs}
    return builders[type(spec)](cluster, spec, options)


def fresh_spec(plan: StagePlan) -> object:
    """The spec a stage is built with: one that reruns has its old folder moved aside, so a builder that checks
    finished outputs (generate, eval: their .done keys) must not refuse them as made with other settings."""
    spec = plan.stage.spec
    if plan.action == "rerun" and is_dataclass(spec) and "rerun_done" in {f.name for f in fields(spec)}:
        return replace(spec, rerun_done=True)
    return spec


def done_job(cluster: ClusterConfig, plan: StagePlan, after: list[Job], options: JobOptions) -> Job:
    """After the stage's jobs succeed: check its outputs and write `.stage.done` with its key."""
    args = [plan.stage.folder, plan.key, *plan.stage.outputs]
    line = f"{cluster.kit_python} -m pipeline_kit.recipes.stage_done {' '.join(shlex.quote(a) for a in args)}"
    group = CommandGroup([Command(line, name="done", container=cluster.kit_container)])
    options.apply_to(group)
    return Job(
        name=f"{options.expname}-{plan.stage.name}-done",
        groups=[group],
        after=after,  # the stage's own jobs, which wait for any --run_after
        dependency_type="afterok",
        inputs=[],
        outputs=[plan.stage.folder],
    )


def recipe_jobs(cluster: ClusterConfig, plans: list[StagePlan], options: JobOptions) -> list[Job]:
    """The jobs of every stage that runs, each stage after the one before it (afterok: a failed stage stops the
    rest), each followed by its done job."""
    jobs: list[Job] = []
    after: list[Job] = []
    for p in plans:
        if p.action == "skip":
            continue
        stage_options = replace(
            options, expname=f"{options.expname}-{p.stage.name}", after=after, dependency_type="afterok"
        )
        if after:
            stage_options = replace(stage_options, run_after=[])
        built = build_jobs(cluster, fresh_spec(p), stage_options)
        marker = done_job(cluster, p, built, options)
        jobs += [*built, marker]
        after = [marker]
    return jobs


def summary(recipe: str, plans: list[StagePlan]) -> str:
    return "\n".join(f"{recipe}: stage {p.stage.name}: {p.action} ({p.reason})" for p in plans)


def check_outputs(folder: str, outputs: list[str]) -> None:
    missing = [o for o in outputs if not Path(o).exists()]
    if missing:
        raise UserError(
            f"stage folder {folder}: its jobs ended but {', '.join(missing)} is missing; see the stage's logs."
        )
