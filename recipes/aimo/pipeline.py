"""AIMO: CoT SFT → TIR SFT → GRPO → eval, each stage skipped when done with the same settings.

Each stage starts from the model the one before it made. Under --output_dir: cot_sft/, tir_sft/, grpo/ (each a
training folder with final/) and eval/ (eval-results/<benchmark>/ and metrics.json); every stage folder holds its
`.stage.done` key. README.md beside this file says what each stage does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.recipes.flags import recipe_path, required, split_args
from pipeline_kit.recipes.stages import Stage

Opt = typer.Option
STAGES = ("cot_sft", "tir_sft", "grpo", "eval")


@dataclass
class Params:
    base_model: Annotated[str | None, Opt("--base_model", help="The model the first stage starts from.")] = None
    output_dir: Annotated[str | None, Opt("--output_dir", help="cot_sft/, tir_sft/, grpo/, eval/ go here.")] = None
    cot_data: Annotated[str | None, Opt("--cot_data", help="SFT JSONL of chain-of-thought solutions.")] = None
    tir_data: Annotated[str | None, Opt("--tir_data", help="SFT JSONL of tool-integrated (code) solutions.")] = None
    rl_data: Annotated[str | None, Opt("--rl_data", help="GRPO JSONL: problem + expected_answer.")] = None
    benchmarks: Annotated[str, Opt("--benchmarks", help="The eval stage's benchmarks, name:N,...")] = "aime24:4"
    data_dir: Annotated[str | None, Opt("--data_dir", help="Where `kit prepare_data` put them.")] = None
    start_from: Annotated[str, Opt("--start_from", help=f"First stage to run ({', '.join(STAGES)}).")] = STAGES[0]
    stop_after: Annotated[str, Opt("--stop_after", help="Last stage to run.")] = STAGES[-1]
    backend: Annotated[str, Opt("--backend", help="Training backend: trl | nemo_rl | module:Class.")] = "trl"
    num_gpus: Annotated[int, Opt("--num_gpus", help="GPUs per training node (0: CPU).")] = 0
    num_nodes: Annotated[int, Opt("--num_nodes", help="Training nodes.")] = 1
    sft_args: Annotated[str, Opt("--sft_args", help="++key=value for both SFT stages, e.g. '++num_epochs=2'.")] = ""
    tir_sft_args: Annotated[str, Opt("--tir_sft_args", help="++key=value for the TIR SFT stage only.")] = ""
    grpo_args: Annotated[str, Opt("--grpo_args", help="++key=value for the GRPO stage.")] = ""
    server_type: Annotated[str, Opt("--server_type", help="The eval stage's server (vllm, transformers...).")] = "vllm"
    server_gpus: Annotated[int, Opt("--server_gpus", help="GPUs of the eval server.")] = 0
    eval_args: Annotated[str, Opt("--eval_args", help="++key=value for every eval generation.")] = ""
    eval_with_sandbox: Annotated[
        bool, Opt("--eval_with_sandbox", help="Evaluate with code execution (TIR) in a sandbox.")
    ] = False


def stage_range(start_from: str, stop_after: str) -> list[str]:
    for flag, name in (("--start_from", start_from), ("--stop_after", stop_after)):
        if name not in STAGES:
            raise UserError(f"{flag}={name} is not a stage; use one of {', '.join(STAGES)}.")
    first, last = STAGES.index(start_from), STAGES.index(stop_after)
    if last < first:
        raise UserError(f"--stop_after={stop_after} comes before --start_from={start_from}; swap them.")
    return list(STAGES[first : last + 1])


def stages(cluster: ClusterConfig, p: Params) -> list[Stage]:
    from pipeline_kit.benchmarks import benchmark_names
    from pipeline_kit.components.sandbox import SandboxSpec
    from pipeline_kit.jobs.evaluate import EvalSpec, parse_benchmarks
    from pipeline_kit.jobs.train import TrainSpec
    from pipeline_kit.servers.base import ServerSpec

    names = stage_range(p.start_from, p.stop_after)
    out = recipe_path(cluster, "--output_dir", required("--output_dir", p.output_dir, "(the recipe's folder)"))
    model = recipe_path(
        cluster, "--base_model", required("--base_model", p.base_model, f"(stage {names[0]} starts from it)")
    )
    sft_args = split_args("--sft_args", p.sft_args)
    training = {  # stage -> (algorithm, data flag, data, overrides)
        "cot_sft": ("sft", "--cot_data", p.cot_data, sft_args),
        "tir_sft": ("sft", "--tir_data", p.tir_data, (*sft_args, *split_args("--tir_sft_args", p.tir_sft_args))),
        "grpo": ("grpo", "--rl_data", p.rl_data, split_args("--grpo_args", p.grpo_args)),
    }  # fmt: skip
    result: list[Stage] = []
    external = [model]  # the first stage's model comes from outside the recipe: its content is part of the key
    for name in names:
        folder = f"{out}/{name}"
        if name in training:
            algorithm, flag, data, overrides = training[name]
            data = recipe_path(cluster, flag, required(flag, data, f"for stage {name}"))
            spec = TrainSpec(algorithm, model, data, folder, backend=p.backend, num_gpus=p.num_gpus,
                             num_nodes=p.num_nodes, overrides=overrides)  # fmt: skip
            result.append(Stage(name, spec, folder, [f"{folder}/final/config.json"], [*external, data]))
            model, external = f"{folder}/final", []
        else:
            eval_args = split_args("--eval_args", p.eval_args)
            spec = EvalSpec(
                server=ServerSpec(p.server_type, model, gpus=p.server_gpus).validate(),
                benchmarks=parse_benchmarks(p.benchmarks, benchmark_names()),
                output_dir=folder,
                data_dir=p.data_dir,
                sandbox=SandboxSpec() if p.eval_with_sandbox else None,
                overrides=(*eval_args, *(["++code_execution=true"] if p.eval_with_sandbox else [])),
            )
            result.append(Stage(name, spec, folder, [f"{folder}/metrics.json"], external))
    return result
