"""The TRL backend as the submission side sees it: `python -m pipeline_kit.training.trl_train ++key=value ...`, under
torchrun over several GPUs or nodes, in the cluster's trainer (or kit) container; it saves on Slurm's SIGUSR1."""

from __future__ import annotations

import shlex

from pipeline_kit.errors import UserError
from pipeline_kit.training.backends import TrainerLaunch, TrainingBackend
from pipeline_kit.training.config import NEMO_RL_ONLY, changed_keys, check_training_libraries

TRAIN_PYTHON_VAR = "KIT_TRAIN_PYTHON"  # a cluster config may point it at an env with the training extras
TRAINER_MODULE = "pipeline_kit.training.trl_train"
MASTER_PORT = 29500


class TrlBackend(TrainingBackend):
    name = "trl"
    save_before_timeout = 120
    saves_on_signal = True
    serves_vllm = True
    container_keys = ("trainer", "kit")  # dockerfiles/Dockerfile.train, else kit's own image

    def check_config(self, cfg) -> None:

        changed = changed_keys(cfg, NEMO_RL_ONLY)
        if changed:
            raise UserError(f"++{changed[0]} is a NeMo-RL setting; add --backend=nemo_rl or drop it.")

    def check_here(self, cfg, env: dict[str, str]) -> None:

        if TRAIN_PYTHON_VAR not in env:
            check_training_libraries()  # the job runs this very Python

    def command(self, launch: TrainerLaunch) -> str:
        args = [shlex.quote(a) for a in launch.overrides]
        if launch.vllm_server:
            args.append(f'"++vllm_server=http://{launch.vllm_server}"')
        python = f'"${{{TRAIN_PYTHON_VAR}:-{launch.python}}}"'
        if max(launch.num_gpus, 1) * launch.num_nodes == 1:
            return f"{python} -m {TRAINER_MODULE} {' '.join(args)}"
        per_node = max(launch.num_gpus, 1)
        if launch.num_nodes == 1:
            launcher = f"--standalone --nnodes=1 --nproc_per_node={per_node}"
        else:  # one torchrun per node; the head is the first node, found as a multi-node server finds its head
            launcher = (
                f'--nnodes={launch.num_nodes} --nproc_per_node={per_node} --node_rank="${{SLURM_NODEID:-0}}" '
                f'--master_addr="{launch.head_host}" --master_port={MASTER_PORT}'
            )
        return f"{python} -m torch.distributed.run {launcher} -m {TRAINER_MODULE} {' '.join(args)}"
