"""The interface of a training backend, as the submission side asks it (jobs/train.py): the trainer's command line,
its default container, how it saves before Slurm's time limit, and the checks of its settings. A backend is named
in BACKENDS (training/__init__.py) or given by a user as `module:Class`; nothing heavy is imported here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipeline_kit import plugins
from pipeline_kit.errors import UserError
from pipeline_kit.training import BACKENDS


@dataclass(frozen=True)
class TrainerLaunch:
    """What a trainer's command is made from, as plain values (the training package knows no cluster).
    `cfg`: the parsed TrainConfig; `overrides`: the `++key=value` the job passes on; `python`: the cluster's kit
    Python; `head_host`: the first node's host (several nodes); `save_by_s`: seconds of training before a backend
    that saves by its own clock must save (None: no time limit); `vllm_server`: the address of a `trl vllm-serve`
    group, resolved when the job is rendered."""

    cfg: Any
    overrides: tuple[str, ...]
    python: str
    num_gpus: int
    num_nodes: int
    head_host: str
    run_name: str
    save_by_s: int | None = None
    vllm_server: str | None = None


class TrainingBackend:
    """A backend: subclass it, set the attributes and write `command`. `saves_on_signal`: Slurm signals SIGUSR1
    `save_before_timeout` seconds before the limit and the trainer saves on it (else it saves by its own clock,
    `TrainerLaunch.save_by_s`); `container_keys`: the cluster config's containers tried in order when --container
    is not given; `needs_container`: off executor `none`, --container is required."""

    name: str = ""
    title: str = ""  # how messages name it (NeMo-RL); default: name
    save_before_timeout: int = 120
    saves_on_signal: bool = True
    serves_vllm: bool = False  # it can generate through a `trl vllm-serve` group (--vllm_server_gpus)
    container_keys: tuple[str, ...] = ()
    needs_container: bool = False
    container_example: str = ""  # a `containers:` line of a cluster config, for the message when one is missing

    def check_config(self, cfg) -> None:
        """Settings this backend cannot honour, as a UserError (run at submission and in the job)."""

    def check_here(self, cfg, env: dict[str, str]) -> None:
        """On executor `none` (the job runs on this machine): what must be installed here. `env`: the job's
        environment variables (this process's and the cluster config's)."""

    def data_parallel(self, cfg, num_gpus: int, num_nodes: int) -> int:
        """The trainer's data-parallel processes on `num_gpus` per node (0: CPU, one process) and `num_nodes`: one
        per GPU by default (GRPO's batch is counted over them)."""
        return max(num_gpus, 1) * num_nodes

    def command(self, launch: TrainerLaunch) -> str:
        raise NotImplementedError


def load_backend(name: str) -> TrainingBackend:
    """BACKENDS' name, or a user's `module:Class` (a TrainingBackend subclass)."""
    cls = plugins.load(name, BACKENDS, "--backend", "training backends")
    if not (isinstance(cls, type) and issubclass(cls, TrainingBackend)):
        raise UserError(f"--backend={name}: {BACKENDS.get(name, name)} is not a TrainingBackend subclass.")
    return cls()
