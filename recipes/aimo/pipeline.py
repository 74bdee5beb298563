"""AIMO: CoT SFT → TIR generation (sandbox) → TIR filter → TIR SFT → GRPO → eval, each stage skipped when done with
the same settings.

Each training stage starts from the model the one before it made; the TIR generation samples solutions with code
from the CoT-SFT model, and the filter keeps the correct ones whose code ran (pipeline_kit.recipes.tir_filter). A
ready `--tir_data` replaces those two stages. Under --output_dir: cot_sft/, tir_sft/, grpo/ (training folders with
final/), tir_generate/ (output-rs*.jsonl), tir_filter/ (tir_sft.jsonl, summary.json) and eval/; every stage folder
holds its `.stage.done` key. README.md beside this file says what each stage does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import typer

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.recipes.flags import recipe_path, required, split_args
from pipeline_kit.recipes.stages import Stage

Opt = typer.Option
STAGES = ("cot_sft", "tir_generate", "tir_filter", "tir_sft", "grpo", "eval")
MADE_TIR = ("tir_generate", "tir_filter")  # the stages that make the TIR SFT data when no --tir_data is given
TIR_PROMPT = "aimo/tir"


def continued_turns(server_type: str) -> tuple[str, ...]:
    """What a TIR generation needs of its server: after each code block the model continues its own answer, which
    `transformers serve` allows only on its text endpoint (its chat endpoint refuses `continue_final_message`)."""
    return ("++server.endpoint=text",) if server_type == "transformers" else ()


@dataclass
class Params:
    base_model: Annotated[str | None, Opt("--base_model", help="The model the first stage starts from.")] = None
    output_dir: Annotated[str | None, Opt("--output_dir", help="cot_sft/, tir_sft/, grpo/, eval/ go here.")] = None
    cot_data: Annotated[str | None, Opt("--cot_data", help="SFT JSONL of chain-of-thought solutions.")] = None
    tir_data: Annotated[
        str | None,
        Opt(
            "--tir_data", help="Ready SFT JSONL of tool-integrated solutions; unset, the recipe makes it (TIR stages)."
        ),
    ] = None
    tir_problems: Annotated[
        str | None, Opt("--tir_problems", help="problem + expected_answer to make TIR solutions for [--rl_data].")
    ] = None
    tir_samples: Annotated[int, Opt("--tir_samples", help="TIR solutions sampled per problem.")] = 4
    tir_temperature: Annotated[float, Opt("--tir_temperature", help="The TIR generation's temperature.")] = 0.7
    tir_prompt_config: Annotated[
        str, Opt("--tir_prompt_config", help="The TIR prompt: generation, TIR SFT, eval with the sandbox.")
    ] = TIR_PROMPT
    tir_generate_args: Annotated[
        str, Opt("--tir_generate_args", help="++key=value for the TIR generation, e.g. '++max_code_executions=4'.")
    ] = ""
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
    server_type: Annotated[
        str, Opt("--server_type", help="The TIR generation's and eval's server (vllm, transformers...).")
    ] = "vllm"
    server_gpus: Annotated[int, Opt("--server_gpus", help="GPUs of the TIR generation's and eval's server.")] = 0
    eval_args: Annotated[str, Opt("--eval_args", help="++key=value for every eval generation.")] = ""
    eval_with_sandbox: Annotated[
        bool, Opt("--eval_with_sandbox", help="Evaluate with code execution (TIR, --tir_prompt_config) in a sandbox.")
    ] = False
    reasoning: Annotated[
        bool,
        Opt(
            "--reasoning",
            help="A reasoning model: the eval keeps its thinking apart from the answer, the budget whatever fits the "
            "window (vllm, sglang), and GRPO rewards the answer alone.",
        ),
    ] = False
    genselect: Annotated[
        bool, Opt("--genselect", help="The eval also runs GenSelect over each benchmark's N samples (genselect@N).")
    ] = False


def reasoning_args(p: Params) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """--reasoning's ++key=value for the eval and for GRPO: a reasoning model's answer is what follows its thinking
    (inference/reasoning.py), and its long traces get what the server's window leaves (`null`; `transformers serve`
    has no such budget: there the benchmarks' own, or --eval_args')."""
    if not p.reasoning:
        return (), ()
    from pipeline_kit.inference.request_options import budget_refusal

    fits = () if budget_refusal(p.server_type, True) else ("++inference.tokens_to_generate=null",)
    return ("++parse_reasoning=true", *fits), ("++reward.parse_reasoning=true",)


def stage_range(start_from: str, stop_after: str, tir_data: bool = False) -> list[str]:
    """The stages from --start_from to --stop_after; with a ready --tir_data, without the two that make it."""
    for flag, name in (("--start_from", start_from), ("--stop_after", stop_after)):
        if name not in STAGES:
            raise UserError(f"{flag}={name} is not a stage; use one of {', '.join(STAGES)}.")
        if tir_data and name in MADE_TIR:
            raise UserError(f"{flag}={name}: with --tir_data the TIR data is given and {name} does not run; drop one.")
    first, last = STAGES.index(start_from), STAGES.index(stop_after)
    if last < first:
        raise UserError(f"--stop_after={stop_after} comes before --start_from={start_from}; swap them.")
    return [s for s in STAGES[first : last + 1] if not (tir_data and s in MADE_TIR)]


def prompt_inputs(name: str) -> list[str]:
    """A prompt config's file, whose content then is part of the stage keys that use it."""
    from pipeline_kit.inference.prompts import resolve_prompt_path

    return [str(resolve_prompt_path(name).resolve())]


def stages(cluster: ClusterConfig, p: Params) -> list[Stage]:
    from pipeline_kit.benchmarks import benchmark_names
    from pipeline_kit.components.sandbox import SandboxSpec
    from pipeline_kit.jobs.evaluate import EvalSpec, parse_benchmarks
    from pipeline_kit.jobs.train import TrainSpec
    from pipeline_kit.servers.base import ServerSpec

    names = stage_range(p.start_from, p.stop_after, tir_data=bool(p.tir_data))
    out = recipe_path(cluster, "--output_dir", required("--output_dir", p.output_dir, "(the recipe's folder)"))
    model = recipe_path(
        cluster, "--base_model", required("--base_model", p.base_model, f"(stage {names[0]} starts from it)")
    )
    tir_prompt = prompt_inputs(p.tir_prompt_config)  # checks the name before anything is planned
    sft_args = split_args("--sft_args", p.sft_args)
    tir_sft_data = p.tir_data or f"{out}/tir_filter/tir_sft.jsonl"
    # made here, the TIR data are trained with the prompt they were generated with; a ready --tir_data with kit's
    # default prompt, as the CoT data (--tir_sft_args='++prompt_config=...' picks another)
    made_prompt = () if p.tir_data else (f"++prompt_config={p.tir_prompt_config}",)
    tir_sft_args = (*made_prompt, *sft_args, *split_args("--tir_sft_args", p.tir_sft_args))
    eval_reasoning, grpo_reasoning = reasoning_args(p)
    training = {  # stage -> (algorithm, data flag, data, overrides, inputs beside the data)
        "cot_sft": ("sft", "--cot_data", p.cot_data, sft_args, []),
        "tir_sft": ("sft", "--tir_data", tir_sft_data, tir_sft_args, [] if p.tir_data else tir_prompt),
        "grpo": ("grpo", "--rl_data", p.rl_data, (*grpo_reasoning, *split_args("--grpo_args", p.grpo_args)), []),
    }  # fmt: skip
    result: list[Stage] = []
    external = [model]  # the first stage's model comes from outside the recipe: its content is part of the key
    for name in names:
        folder = f"{out}/{name}"
        if name in training:
            algorithm, flag, data, overrides, inputs = training[name]
            data = recipe_path(cluster, flag, required(flag, data, f"for stage {name}"))
            spec = TrainSpec(algorithm, model, data, folder, backend=p.backend, num_gpus=p.num_gpus,
                             num_nodes=p.num_nodes, overrides=overrides)  # fmt: skip
            # the filter stage's file: its content comes through that stage's key, unless this stage is the first
            made = name == "tir_sft" and not p.tir_data and name != names[0]
            result.append(Stage(name, spec, folder, [f"{folder}/final/config.json"],
                                [*external, *([] if made else [data]), *inputs]))  # fmt: skip
            model, external = f"{folder}/final", []
        elif name == "tir_generate":
            result.append(tir_generate_stage(cluster, p, model, folder, [*external, *tir_prompt]))
            external = []
        elif name == "tir_filter":
            result.append(tir_filter_stage(cluster, f"{out}/tir_generate", folder, first=name == names[0]))
        else:
            eval_args = split_args("--eval_args", p.eval_args)
            tir = (f"++prompt_config={p.tir_prompt_config}", "++code_execution=true", *continued_turns(p.server_type))
            tir = tir if p.eval_with_sandbox else ()
            spec = EvalSpec(
                server=ServerSpec(p.server_type, model, gpus=p.server_gpus).validate(),
                benchmarks=parse_benchmarks(p.benchmarks, benchmark_names()),
                output_dir=folder,
                data_dir=p.data_dir,
                sandbox=SandboxSpec() if p.eval_with_sandbox else None,
                overrides=(*tir, *eval_reasoning, *eval_args),  # the user's eval args come last: they win
                genselect=p.genselect,
            )
            result.append(Stage(name, spec, folder, [f"{folder}/metrics.json"],
                                [*external, *(tir_prompt if p.eval_with_sandbox else [])]))  # fmt: skip
    return result


def tir_generate_stage(cluster: ClusterConfig, p: Params, model: str, folder: str, inputs: list[str]) -> Stage:
    """TIR solutions of the training problems by `model`, code run in the job's sandbox: output-rs{seed}.jsonl."""
    from pipeline_kit.components.sandbox import SandboxSpec
    from pipeline_kit.jobs.generate import GenerateSpec
    from pipeline_kit.servers.base import ServerSpec

    flag, problems = ("--tir_problems", p.tir_problems) if p.tir_problems else ("--rl_data", p.rl_data)
    problems = recipe_path(cluster, flag, required(flag, problems, "for stage tir_generate (the problems to solve)"))
    if p.tir_samples < 1:
        raise UserError(f"--tir_samples={p.tir_samples}: sample at least 1.")
    args = split_args("--tir_generate_args", p.tir_generate_args)
    for arg in args:
        if arg.startswith(("++prompt_config=", "++code_execution=", "++generation_key=")):
            raise UserError(f"--tir_generate_args: {arg.split('=')[0]} is set by the recipe; drop it (the prompt is "
                            "--tir_prompt_config; the solution goes to 'generation', which tir_filter reads).")  # fmt: skip
    seeds = list(range(p.tir_samples))
    spec = GenerateSpec(
        server=ServerSpec(p.server_type, model, gpus=p.server_gpus).validate(),
        input_file=problems,
        output_dir=folder,
        seeds=seeds,
        sandbox=SandboxSpec(),
        overrides=(
            f"++prompt_config={p.tir_prompt_config}",
            "++code_execution=true",
            f"++inference.temperature={p.tir_temperature}",
            # the TIR solution is this stage's `generation` (tir_filter reads it), also where the problems file
            # holds an earlier one, such as the CoT solutions of an SFT file
            "++generation_key=generation",
            *continued_turns(p.server_type),
            *args,
        ),  # fmt: skip
    )
    return Stage("tir_generate", spec, folder, [f"{folder}/output-rs{s}.jsonl" for s in seeds], [*inputs, problems])


def tir_filter_stage(cluster: ClusterConfig, generated: str, folder: str, first: bool) -> Stage:
    """The generation's correct solutions whose code ran, as tir_sft.jsonl, and the counts in summary.json. As the
    first stage (--start_from=tir_filter) the generations come from outside this run: their content is in its key."""
    import shlex

    from pipeline_kit.jobs import RunCmdSpec

    files = [f"{folder}/tir_sft.jsonl", f"{folder}/summary.json"]
    command = " ".join([cluster.kit_python, "-m", "pipeline_kit.recipes.tir_filter",
                        *(shlex.quote(a) for a in (generated, *files))])  # fmt: skip
    spec = RunCmdSpec(command, container=cluster.kit_container, inputs=(generated,), outputs=(folder, *files))
    return Stage("tir_filter", spec, folder, files, [generated] if first else [])
