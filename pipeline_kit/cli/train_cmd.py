"""`kit sft`, `kit grpo` and `kit dpo`: training jobs from the train builder (pipeline_kit.jobs.train). All take the
shared job flags and the training flags below, declared once; `++key=value` goes to the training script."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from pipeline_kit.cli.job_flags import JobFlags, cluster_from, job_command, run_jobs

Opt = typer.Option


@dataclass
class TrainFlags:
    model: Annotated[str | None, Opt("--model", help="The Hugging Face model folder to start from.")] = None
    training_data: Annotated[
        str | None,
        Opt(
            "--training_data",
            help="JSONL from kit prepare_sft_data / kit prepare_rl_data; for dpo, preference pairs (prompt or "
            "problem, chosen, rejected), e.g. kit run_recipe magpie_math's.",
        ),
    ] = None
    output_dir: Annotated[
        str | None, Opt("--output_dir", help="Checkpoints, TensorBoard logs and the final model (<output_dir>/final).")
    ] = None
    backend: Annotated[
        str,
        Opt(
            "--backend",
            help="trl (runs anywhere, CPU too) | nemo_rl (in its container; ++strategy=fsdp|megatron) | your own "
            "module:Class (a pipeline_kit.training.backends.TrainingBackend).",
        ),
    ] = "trl"
    num_gpus: Annotated[int, Opt("--num_gpus", help="GPUs per node (0: CPU).")] = 0
    num_nodes: Annotated[int, Opt("--num_nodes", help="Nodes (Slurm); torchrun spans them.")] = 1
    container: Annotated[str | None, Opt("--container", help="Container key of the trainer.")] = None
    save_before_timeout: Annotated[
        int | None,
        Opt("--save_before_timeout", help="Slurm: seconds before the time limit to save [120; nemo_rl: 900]."),
    ] = None

    def spec(self, algorithm: str, extra_args: tuple[str, ...], **more):
        from pipeline_kit.jobs.train import TrainSpec

        return TrainSpec(
            algorithm,
            self.model or "",
            self.training_data or "",
            self.output_dir or "",
            backend=self.backend,
            num_gpus=self.num_gpus,
            num_nodes=self.num_nodes,
            container=self.container,
            save_before_timeout=self.save_before_timeout,
            overrides=extra_args,
            **more,
        )


def _run(flags: JobFlags, spec) -> int:
    from pipeline_kit.jobs.train import train_jobs

    cluster = cluster_from(flags.cluster, flags.config_dir)
    options = flags.options(spec.algorithm)
    return run_jobs(flags, cluster, options.expname, train_jobs(cluster, spec, options))


def override_keys() -> str:
    """The closing lines of `kit sft/grpo/dpo --help`: every ++key of the TRL training script."""
    from pipeline_kit.overrides import dotted_keys
    from pipeline_kit.training.config import TrainConfig

    keys = ", ".join(dotted_keys(TrainConfig))
    return (
        f"++key=value overrides (the training script's config): {keys}. --backend=nemo_rl renders the same keys into "
        "NeMo-RL's run config (docs/training/nemo-rl.md); an unknown key is an error before anything is queued."
    )


def register(app: typer.Typer) -> None:
    epilog = override_keys()

    @job_command(app, "sft", help="Supervised fine-tuning (TRL SFTTrainer; loss on the answers only).", epilog=epilog)
    def sft(flags: JobFlags, train: TrainFlags) -> int:
        raise typer.Exit(_run(flags, train.spec("sft", flags.extra_args)))

    @job_command(app, "grpo", help="GRPO with kit's grader as the reward (TRL GRPOTrainer).", epilog=epilog)
    def grpo(
        flags: JobFlags,
        train: TrainFlags,
        vllm_server_gpus: Annotated[
            int, Opt("--vllm_server_gpus", help="GPUs of a `trl vllm-serve` group that generates (0: the trainer).")
        ] = 0,
        vllm_server_container: Annotated[
            str | None, Opt("--vllm_server_container", help="Container key of the vLLM server (needs trl + vllm).")
        ] = None,
    ) -> int:
        spec = train.spec("grpo", flags.extra_args, vllm_gpus=vllm_server_gpus, vllm_container=vllm_server_container)
        raise typer.Exit(_run(flags, spec))

    @job_command(
        app,
        "dpo",
        help="DPO on preference pairs (TRL DPOTrainer; ++beta, ++loss_type, ++ref_model [default: --model, frozen]).",
        epilog=epilog,
    )
    def dpo(flags: JobFlags, train: TrainFlags) -> int:
        raise typer.Exit(_run(flags, train.spec("dpo", flags.extra_args)))
