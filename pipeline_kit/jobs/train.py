"""The jobs of `kit sft` / `kit grpo` / `kit dpo`: one trainer group, whose command the backend makes (training/__init__.py's
BACKENDS: TRL's torchrun over GPUs and nodes, NeMo-RL's job in its container, or a user's module:Class), optionally
beside a `trl vllm-serve` group for GRPO's generation (a het job on Slurm). Before the Slurm time limit the trainer
saves (on SIGUSR1, or by its own clock); `--dependent_jobs` copies resume from the newest complete checkpoint."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, replace

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.jobs.input_checks import check_training_output, training_check
from pipeline_kit.jobs.options import JobOptions, JobPlan, chain
from pipeline_kit.overrides import override_key, override_text
from pipeline_kit.pipeline.model import AUTO_PORT, Command, CommandGroup, Endpoint, HardwareConfig, Job
from pipeline_kit.servers.base import HEAD_HOST
from pipeline_kit.slurm_time import slurm_seconds
from pipeline_kit.training.backends import TrainerLaunch, TrainingBackend, load_backend
from pipeline_kit.training.checkpoints import training_done
from pipeline_kit.training.config import (
    accumulation_for_generations,
    check_grpo_batch,
    check_model_dir,
    check_train_overrides,
    parse_train_overrides,
    read_training_records,
)
from pipeline_kit.training.trl_backend import TRAIN_PYTHON_VAR

VLLM_NAME = "vllm_server"  # the `trl vllm-serve` command GRPO generates with
_OWN_KEYS = {"algorithm": "kit sft, kit grpo or kit dpo", "backend": "--backend", "model": "--model", "training_data": "--training_data",
             "output_dir": "--output_dir", "vllm_server": "--vllm_server_gpus"}  # fmt: skip


@dataclass
class TrainSpec:
    """What to train. `algorithm`: sft | grpo | dpo; `backend`: trl (runs here and on GPUs) | nemo_rl | a user's
    module:Class (training/backends.py); `num_gpus` per node;
    `save_before_timeout`: seconds before the Slurm time limit at which the job is signalled to save; `vllm_gpus`:
    GPUs of a `trl vllm-serve` group that generates GRPO's completions (0: the trainer generates itself);
    `overrides`: `++key=value` for the training script. Paths are this machine's on none, else the job's."""

    algorithm: str
    model: str
    training_data: str
    output_dir: str
    backend: str = "trl"
    num_gpus: int = 0
    num_nodes: int = 1
    container: str | None = None
    save_before_timeout: int | None = None  # default: the backend's (120 s for trl; 900 s for nemo_rl)
    vllm_gpus: int = 0
    vllm_container: str | None = None
    overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for flag, value in (("--model", self.model), ("--training_data", self.training_data)):
            if not value:
                raise UserError(f"{flag} is required.")
        if not self.output_dir:
            raise UserError("--output_dir is required: the folder for checkpoints and the final model.")
        backend = load_backend(self.backend)  # an unknown name fails here, naming the known ones
        if self.num_gpus < 0 or self.num_nodes < 1 or self.vllm_gpus < 0:
            raise UserError(
                f"--num_gpus={self.num_gpus} --num_nodes={self.num_nodes} --vllm_server_gpus={self.vllm_gpus}: use "
                "0 or more GPUs and 1 or more nodes."
            )
        if self.save_before_timeout is None:
            self.save_before_timeout = backend.save_before_timeout
        if self.save_before_timeout < 1:
            raise UserError(f"--save_before_timeout={self.save_before_timeout}: give seconds, at least 1.")
        if self.vllm_gpus and self.algorithm != "grpo":
            raise UserError("--vllm_server_gpus is for kit grpo (it generates GRPO's completions); drop it.")
        if self.vllm_gpus and not backend.serves_vllm:
            raise UserError(
                f"--vllm_server_gpus is for --backend=trl; {backend.title or backend.name} generates on its own GPUs."
            )
        for arg in self.overrides:
            key = override_key(arg)
            if key in _OWN_KEYS:
                raise UserError(f"++{key} is set by kit; use {_OWN_KEYS[key]} instead.")

    @property
    def backend_impl(self) -> TrainingBackend:
        return load_backend(self.backend)


@dataclass(frozen=True)
class TrainCommand:
    """The backend's trainer command, with the vLLM server's address from `refs` when GRPO generates through one."""

    backend: TrainingBackend
    launch: TrainerLaunch

    def __call__(self, refs: dict[str, Endpoint]) -> str:
        launch = self.launch
        if VLLM_NAME in refs:
            launch = replace(launch, vllm_server=refs[VLLM_NAME].address)
        return self.backend.command(launch)


def train_jobs(cluster: ClusterConfig, spec: TrainSpec, options: JobOptions) -> list[Job]:
    """The training job (and its --dependent_jobs copies, each resuming where the previous one saved)."""

    model, data, output_dir = (_job_path(cluster, f, p) for f, p in (
        ("--model", spec.model), ("--training_data", spec.training_data), ("--output_dir", spec.output_dir)))  # fmt: skip
    if spec.num_nodes > 1 and cluster.executor != "slurm":
        raise UserError(f"--num_nodes={spec.num_nodes} needs a Slurm cluster; executor '{cluster.executor}' runs one.")
    check_train_overrides(spec.overrides)  # a typo stops here, before anything is queued
    own = [f"++algorithm={spec.algorithm}", *(f"++{k}={override_text(v)}" for k, v in (("backend", spec.backend),
           ("model", model), ("training_data", data), ("output_dir", output_dir)))]  # fmt: skip
    placeholder = ["++vllm_server=http://resolved-in-the-job:8000"] if spec.vllm_gpus else []
    cfg = parse_train_overrides([*own, *placeholder, *spec.overrides])  # rules between values
    if cfg.ref_model:  # a path like --model's: made absolute on none (the job runs in another folder)
        spec = replace(spec, overrides=tuple(a for a in spec.overrides if override_key(a) != "ref_model"))
        own.append(f"++ref_model={override_text(_job_path(cluster, '++ref_model', cfg.ref_model))}")
        cfg = parse_train_overrides([*own, *placeholder, *spec.overrides])
    backend = spec.backend_impl
    derived = grpo_batch_overrides(cfg, spec, backend)
    if derived:
        own += derived
        cfg = parse_train_overrides([*own, *placeholder, *spec.overrides])
    if cfg.algorithm == "grpo":
        check_grpo_batch(cfg, backend.data_parallel(cfg, spec.num_gpus, spec.num_nodes))
    _check_visible_inputs(cluster, cfg, options)
    seen = check_training_output(cluster, cfg)
    if cluster.executor != "none" and backend.needs_container and not spec.container:
        example = f" (e.g. {backend.container_example})" if backend.container_example else ""
        raise UserError(
            f"--backend={spec.backend} runs in {backend.title or backend.name}'s container: add --container=<key>, a "
            f"key under 'containers' in the cluster config{example}."
        )
    launch = TrainerLaunch(cfg, (*own, *spec.overrides), cluster.kit_python, spec.num_gpus, spec.num_nodes,
                           HEAD_HOST, options.expname, save_by_seconds(cluster, spec, backend, options))  # fmt: skip
    command = TrainCommand(backend, launch)
    container = trainer_container(cluster, spec)

    def plan(copy: int) -> list[JobPlan]:
        groups: list[CommandGroup] = []
        refs: dict[str, Command] = {}
        if spec.vllm_gpus:
            groups.append(vllm_group(cluster, spec, model))
            refs[VLLM_NAME] = groups[0].commands[0]
        trainer = Command(
            command,
            name="trainer",
            container=container,
            num_gpus=spec.num_gpus,
            num_nodes=spec.num_nodes,
            num_tasks=1,  # one launcher (torchrun) per node
            refs=refs,
        )
        # TRL saves on Slurm's early-warning signal; NeMo-RL saves by its own clock (checkpoint_must_save_by)
        signal = (
            {"signal": f"USR1@{spec.save_before_timeout}"}
            if cluster.executor == "slurm" and backend.saves_on_signal
            else {}
        )
        groups.insert(0, CommandGroup([trainer], hardware=HardwareConfig(sbatch_kwargs=signal), name="trainer"))
        # where kit could not see the paths, the job checks them before the trainer (and a vLLM server) starts
        checks = [training_check(cluster.kit_python, launch.overrides)] if spec.backend == "trl" and not seen else []
        inputs = [model, data, *([cfg.ref_model] if cfg.ref_model else [])]
        return [JobPlan("", groups, {"inputs": inputs, "outputs": [output_dir], "checks": checks})]

    return chain(options, plan)


def grpo_batch_overrides(cfg, spec: TrainSpec, backend: TrainingBackend) -> list[str]:
    """GRPO without ++micro_batch_size or ++gradient_accumulation_steps: the accumulation that makes a step whole
    groups of ++num_generations on this many GPUs and nodes (1 × 8 steps on one process, 1 × 1 on 8 GPUs), so
    that the defaults hold on every executor and GPU count; [] where the user chose the batch or nothing changes."""
    given = {override_key(arg) for arg in spec.overrides}
    if cfg.algorithm != "grpo" or given & {"micro_batch_size", "gradient_accumulation_steps"}:
        return []
    steps = accumulation_for_generations(cfg, backend.data_parallel(cfg, spec.num_gpus, spec.num_nodes))
    return [f"++gradient_accumulation_steps={steps}"] if steps != cfg.gradient_accumulation_steps else []


def trainer_container(cluster: ClusterConfig, spec: TrainSpec) -> str | None:
    """--container; else the first of the backend's container keys that the cluster defines (TRL: 'trainer', then
    'kit'); NeMo-RL's is named with --container (train_jobs checks it)."""
    if spec.container:
        cluster.container(spec.container)  # fails with the known keys when it is missing
        return spec.container
    return next((key for key in spec.backend_impl.container_keys if key in cluster.containers), None)


def save_by_seconds(cluster: ClusterConfig, spec: TrainSpec, backend: TrainingBackend, options: JobOptions):
    """For a backend that saves by its own clock: seconds of training before it saves and stops, the Slurm time
    limit less --save_before_timeout (None off Slurm, without a limit, or for a backend that saves on SIGUSR1)."""

    limit = cluster.time_limit(options.partition, options.time_min)
    if backend.saves_on_signal or cluster.executor != "slurm" or not limit:
        return None
    seconds = slurm_seconds(limit) - spec.save_before_timeout
    if seconds < 60:
        raise UserError(
            f"time limit {limit} less --save_before_timeout={spec.save_before_timeout} s leaves "
            f"{backend.title or backend.name} under a minute to train; raise --time_min or lower --save_before_timeout."
        )
    return seconds


def vllm_group(cluster: ClusterConfig, spec: TrainSpec, model: str) -> CommandGroup:
    """TRL's server mode: `trl vllm-serve` on its own GPUs; the trainer sends it prompts and its new weights."""
    python = f'"${{{TRAIN_PYTHON_VAR}:-{cluster.kit_python}}}"'
    line = (
        f"{python} -m trl.scripts.vllm_serve --model {shlex.quote(model)} --host 0.0.0.0 --port $KIT_PORT "
        f"--tensor_parallel_size {max(spec.vllm_gpus, 1)}"
    )
    command = Command(
        line, name=VLLM_NAME, container=spec.vllm_container, num_gpus=spec.vllm_gpus, port=AUTO_PORT, service=True
    )
    return CommandGroup([command], name=VLLM_NAME)


def _job_path(cluster: ClusterConfig, flag: str, path: str) -> str:
    """On none, paths are this machine's (made absolute: the job runs in the packed code folder); elsewhere they
    must be absolute paths where the job runs."""
    if cluster.executor == "none":
        return os.path.abspath(path)
    if not os.path.isabs(path):
        raise UserError(
            f"{flag}={path} is relative; on executor '{cluster.executor}' give the absolute path where the job runs."
        )
    return path


def _check_visible_inputs(cluster: ClusterConfig, cfg, options: JobOptions) -> None:
    """The model folder and every training record, checked now where kit sees them: on none (a missing one is an
    error unless an earlier stage makes it); on Slurm without a tunnel when the path exists here. Otherwise the job
    checks them when it starts."""

    model, data = cfg.model, cfg.training_data
    if cluster.executor == "none":  # the job runs on this machine
        load_backend(cfg.backend).check_here(cfg, {**os.environ, **cluster.env_vars})
    if cluster.executor not in ("none", "slurm") or cluster.ssh_tunnel is not None:
        return
    if cfg.backend == "trl":
        done = training_done(cfg.output_dir, cfg.max_steps)
        if done:  # the job would say so in its log and succeed
            print(f"kit: warning: this job trains nothing: {done}.", file=sys.stderr)
    must = cluster.executor == "none" and not (options.after or options.run_after)
    for path, flag in ((model, "--model"), (cfg.ref_model, "++ref_model")):
        if path and (os.path.exists(path) or must):
            check_model_dir(path, flag)
    if os.path.exists(data) or must:
        read_training_records(data, cfg.algorithm, "--training_data")
