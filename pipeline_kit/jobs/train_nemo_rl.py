"""The trainer command of `kit sft/grpo --backend=nemo_rl`: pipeline_kit.training.nemo_rl_job in NeMo-RL's container,
fed the run config that kit renders here (so a dry run shows it whole). On Slurm NeMo-RL saves by its own clock
(`checkpoint_must_save_by`: the time limit less --save_before_timeout), and --dependent_jobs resume from step_N."""

from __future__ import annotations

import shlex

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.jobs.options import JobOptions
from pipeline_kit.servers.base import HEAD_HOST

PYTHON_VAR = "KIT_NEMO_RL_PYTHON"  # the container's Python that runs kit's side (NeMo-RL's own runs under `uv run`)
HEREDOC = "KIT_NEMO_RL_CONFIG"


def save_by_seconds(cluster: ClusterConfig, spec, options: JobOptions) -> int | None:
    """Seconds of training before NeMo-RL saves and stops: the Slurm time limit less --save_before_timeout."""
    from pipeline_kit.slurm_time import slurm_seconds

    limit = cluster.time_limit(options.partition, options.time_min)
    if cluster.executor != "slurm" or not limit:
        return None
    seconds = slurm_seconds(limit) - spec.save_before_timeout
    if seconds < 60:
        raise UserError(
            f"time limit {limit} less --save_before_timeout={spec.save_before_timeout} s leaves NeMo-RL under a "
            "minute to train; raise --time_min or lower --save_before_timeout."
        )
    return seconds


def nemo_rl_command(cluster: ClusterConfig, spec, cfg, overrides: tuple[str, ...], options: JobOptions) -> str:
    import yaml

    from pipeline_kit.training.nemo_rl import run_config

    if cluster.executor != "none" and not spec.container:
        raise UserError(
            "--backend=nemo_rl runs in NeMo-RL's container: add --container=<key>, a key under 'containers' in the "
            "cluster config (e.g. nemo_rl: nvcr.io/nvidia/nemo-rl:v0.4.0)."
        )
    config = run_config(
        cfg, spec.num_gpus, spec.num_nodes, save_by_seconds(cluster, spec, options), cfg.nemo_rl_dir, options.expname
    )
    text = yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
    head = f'KIT_RAY_HEAD="{HEAD_HOST}" ' if spec.num_nodes > 1 else ""
    args = " ".join(shlex.quote(a) for a in overrides)
    line = f'{head}"${{{PYTHON_VAR}:-python3}}" -m pipeline_kit.training.nemo_rl_job {args}'
    return f"{line} <<'{HEREDOC}'\n# kit's run config for NeMo-RL (merged over `defaults`)\n{text}{HEREDOC}"
