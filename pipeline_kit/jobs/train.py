"""The jobs of `kit sft` / `kit grpo`: one trainer group (torchrun over GPUs and nodes), optionally beside a
`trl vllm-serve` group for GRPO's generation (a het job on Slurm). On Slurm the job asks for SIGUSR1 before its
time limit and the trainer saves on it; `--dependent_jobs` copies resume from the newest complete checkpoint."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.jobs.options import JobOptions, JobPlan, chain
from pipeline_kit.overrides import override_key, override_text
from pipeline_kit.pipeline.model import AUTO_PORT, Command, CommandGroup, Endpoint, HardwareConfig, Job
from pipeline_kit.servers.base import HEAD_HOST

TRAIN_PYTHON_VAR = "KIT_TRAIN_PYTHON"  # a cluster config may point it at an env with the training extras
TRAINER_KEY = "trainer"  # the cluster config's container for the TRL trainer (dockerfiles/Dockerfile.train)
VLLM_NAME = "vllm_server"  # the `trl vllm-serve` command GRPO generates with
BACKENDS = ("trl", "nemo_rl")
MASTER_PORT = 29500
_OWN_KEYS = {"algorithm": "kit sft or kit grpo", "backend": "--backend", "model": "--model", "training_data": "--training_data",
             "output_dir": "--output_dir", "vllm_server": "--vllm_server_gpus"}  # fmt: skip


@dataclass
class TrainSpec:
    """What to train. `algorithm`: sft | grpo; `backend`: trl (runs here and on GPUs) | nemo_rl; `num_gpus` per node;
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
    save_before_timeout: int | None = None  # default: 120 s for trl; 900 s for nemo_rl (its start-up counts too)
    vllm_gpus: int = 0
    vllm_container: str | None = None
    overrides: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for flag, value in (("--model", self.model), ("--training_data", self.training_data)):
            if not value:
                raise UserError(f"{flag} is required.")
        if not self.output_dir:
            raise UserError("--output_dir is required: the folder for checkpoints and the final model.")
        if self.backend not in BACKENDS:
            raise UserError(f"--backend={self.backend} is not one of {', '.join(BACKENDS)}.")
        if self.num_gpus < 0 or self.num_nodes < 1 or self.vllm_gpus < 0:
            raise UserError(
                f"--num_gpus={self.num_gpus} --num_nodes={self.num_nodes} --vllm_server_gpus={self.vllm_gpus}: use "
                "0 or more GPUs and 1 or more nodes."
            )
        if self.save_before_timeout is None:
            self.save_before_timeout = 900 if self.backend == "nemo_rl" else 120
        if self.save_before_timeout < 1:
            raise UserError(f"--save_before_timeout={self.save_before_timeout}: give seconds, at least 1.")
        if self.vllm_gpus and self.algorithm != "grpo":
            raise UserError("--vllm_server_gpus is for kit grpo (it generates GRPO's completions); drop it.")
        if self.vllm_gpus and self.backend == "nemo_rl":
            raise UserError("--vllm_server_gpus is for --backend=trl; NeMo-RL generates with vLLM on its own GPUs.")
        for arg in self.overrides:
            key = override_key(arg)
            if key in _OWN_KEYS:
                raise UserError(f"++{key} is set by kit; use {_OWN_KEYS[key]} instead.")

    @property
    def processes(self) -> int:
        return max(self.num_gpus, 1) * self.num_nodes


@dataclass(frozen=True)
class TrainCommand:
    """The trainer's command line, with the vLLM server's address from `refs` when GRPO generates through one."""

    python: str
    spec: TrainSpec
    overrides: tuple[str, ...]

    def __call__(self, refs: dict[str, Endpoint]) -> str:
        args = [shlex.quote(a) for a in self.overrides]
        if VLLM_NAME in refs:
            args.append(f'"++vllm_server=http://{refs[VLLM_NAME].address}"')
        python = f'"${{{TRAIN_PYTHON_VAR}:-{self.python}}}"'
        module = "pipeline_kit.training.trl_train"
        spec = self.spec
        if spec.processes == 1:
            return f"{python} -m {module} {' '.join(args)}"
        per_node = max(spec.num_gpus, 1)
        if spec.num_nodes == 1:
            launcher = f"--standalone --nnodes=1 --nproc_per_node={per_node}"
        else:  # one torchrun per node; the head is the first node, found as a multi-node server finds its head
            launcher = (
                f'--nnodes={spec.num_nodes} --nproc_per_node={per_node} --node_rank="${{SLURM_NODEID:-0}}" '
                f'--master_addr="{HEAD_HOST}" --master_port={MASTER_PORT}'
            )
        return f"{python} -m torch.distributed.run {launcher} -m {module} {' '.join(args)}"


def train_jobs(cluster: ClusterConfig, spec: TrainSpec, options: JobOptions) -> list[Job]:
    """The training job (and its --dependent_jobs copies, each resuming where the previous one saved)."""
    from pipeline_kit.training.config import check_train_overrides, parse_train_overrides

    model, data, output_dir = (_job_path(cluster, f, p) for f, p in (
        ("--model", spec.model), ("--training_data", spec.training_data), ("--output_dir", spec.output_dir)))  # fmt: skip
    if spec.num_nodes > 1 and cluster.executor != "slurm":
        raise UserError(f"--num_nodes={spec.num_nodes} needs a Slurm cluster; executor '{cluster.executor}' runs one.")
    check_train_overrides(spec.overrides)  # a typo stops here, before anything is queued
    own = [f"++algorithm={spec.algorithm}", f"++backend={spec.backend}", *(f"++{k}={override_text(v)}" for k, v in
           (("model", model), ("training_data", data), ("output_dir", output_dir)))]  # fmt: skip
    placeholder = ["++vllm_server=http://resolved-in-the-job:8000"] if spec.vllm_gpus else []
    cfg = parse_train_overrides([*own, *placeholder, *spec.overrides])  # rules between values (batch vs generations)
    _check_visible_inputs(cluster, cfg, options)
    overrides = (*own, *spec.overrides)
    if spec.backend == "nemo_rl":
        from pipeline_kit.jobs.train_nemo_rl import nemo_rl_command

        command = nemo_rl_command(cluster, spec, cfg, overrides, options)
    else:
        command = TrainCommand(cluster.kit_python, spec, overrides)

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
            if cluster.executor == "slurm" and spec.backend == "trl"
            else {}
        )
        groups.insert(0, CommandGroup([trainer], hardware=HardwareConfig(sbatch_kwargs=signal), name="trainer"))
        return [JobPlan("", groups, {"inputs": [model, data], "outputs": [output_dir]})]

    return chain(options, plan)


def trainer_container(cluster: ClusterConfig, spec: TrainSpec) -> str | None:
    """--container; else, for the TRL backend, the cluster's 'trainer' container, else its 'kit' one, if defined."""
    if spec.container:
        cluster.container(spec.container)  # fails with the known keys when it is missing
        return spec.container
    if spec.backend != "trl":
        return None  # NeMo-RL names its container itself (--container, checked by nemo_rl_command)
    return next((key for key in (TRAINER_KEY, "kit") if key in cluster.containers), None)


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
    from pipeline_kit.training.config import check_model_dir, check_training_libraries, read_training_records

    model, data = cfg.model, cfg.training_data
    if (
        cluster.executor == "none"
        and cfg.backend == "trl"
        and TRAIN_PYTHON_VAR not in {**os.environ, **cluster.env_vars}
    ):
        check_training_libraries()  # the job runs this very Python
    if cluster.executor == "none" and cfg.backend == "nemo_rl" and not os.path.isdir(cfg.nemo_rl_dir):
        raise UserError(
            f"++nemo_rl_dir={cfg.nemo_rl_dir} is no folder here; point it at a NeMo-RL checkout, or run in its container."
        )
    if cluster.executor not in ("none", "slurm") or cluster.ssh_tunnel is not None:
        return
    if cfg.backend == "trl":
        from pipeline_kit.training.checkpoints import training_done

        done = training_done(cfg.output_dir, cfg.max_steps)
        if done:  # the job would say so in its log and succeed
            print(f"kit: warning: this job trains nothing: {done}.", file=sys.stderr)
    must = cluster.executor == "none" and not (options.after or options.run_after)
    if os.path.exists(model) or must:
        check_model_dir(model, "--model")
    if os.path.exists(data) or must:
        read_training_records(data, cfg.algorithm, "--training_data")
