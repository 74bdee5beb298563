"""MetaMath augmentation (AnsAug, rephrasing, self-verification, FOBAR): sampled solutions whose answers check out,
as MetaMathQA query/response records.

Stages (README.md beside this file has their files): prepare (run_cmd: originals and masked questions), rephrase
and sv_rewrite (generate), build (run_cmd: the AnsAug, Rephrased, SV and FOBAR questions), solve (generate, graded in
place), collect (run_cmd: metamath.jsonl). The data steps are pipeline_kit.recipes.metamath_data, run in the jobs.
A rephrasing is kept only when its solution gives the original answer, and an SV or FOBAR question only when its
solution recovers the masked number. collect/stats.json counts each type's candidates, questions, solutions and
kept records, and what was dropped, by reason."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass
from typing import Annotated

import typer

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.recipes.flags import recipe_path, required, split_args
from pipeline_kit.recipes.metamath_data import METHODS, parse_methods, read_problems
from pipeline_kit.recipes.stages import Stage

Opt = typer.Option


@dataclass
class Params:
    model: Annotated[str | None, Opt("--model", help="The model that rephrases, rewrites and solves.")] = None
    input_file: Annotated[str | None, Opt("--input_file", help="JSONL: problem + expected_answer (+ id).")] = None
    output_dir: Annotated[str | None, Opt("--output_dir", help="Stage folders and metamath.jsonl go here.")] = None
    methods: Annotated[str, Opt("--methods", help="A subset of ansaug,rephrase,sv,fobar.")] = ",".join(METHODS)
    num_samples: Annotated[int, Opt("--num_samples", help="Solutions sampled per question (each method).")] = 4
    num_rephrasings: Annotated[int, Opt("--num_rephrasings", help="Rephrasings sampled per question.")] = 2
    temperature: Annotated[float, Opt("--temperature", help="Sampling temperature of every generation.")] = 0.7
    generate_args: Annotated[
        str,
        Opt("--generate_args", help="++key=value for every generation, e.g. '++inference.tokens_to_generate=1024'."),
    ] = ""
    server_type: Annotated[str, Opt("--server_type", help="vllm, sglang, transformers, openai...")] = "vllm"
    server_gpus: Annotated[int, Opt("--server_gpus", help="GPUs of each generation stage's server.")] = 1
    server_address: Annotated[
        str | None, Opt("--server_address", help="A running endpoint (e.g. --server_type=openai) instead of a server.")
    ] = None


def stages(cluster: ClusterConfig, p: Params) -> list[Stage]:
    from pipeline_kit.jobs import RunCmdSpec
    from pipeline_kit.jobs.evaluate import GRADE_COMMAND
    from pipeline_kit.jobs.generate import GenerateSpec
    from pipeline_kit.servers.base import ServerSpec

    methods = parse_methods(p.methods)
    out = recipe_path(cluster, "--output_dir", required("--output_dir", p.output_dir, "(the recipe's folder)"))
    data = recipe_path(cluster, "--input_file", required("--input_file", p.input_file, "(problem + expected_answer)"))
    if cluster.executor == "none" or os.path.exists(data):
        read_problems(data)  # a bad record stops here, naming file:line, before anything is submitted
    for flag, count in (("--num_samples", p.num_samples), ("--num_rephrasings", p.num_rephrasings)):
        if count < 1:
            raise UserError(f"{flag}={count}: sample at least 1.")
    model = required("--model", p.model, "(the model folder, or the endpoint's model name)")
    server = ServerSpec(p.server_type, model, gpus=p.server_gpus, address=p.server_address).validate()
    if server.starts_server:
        server.model = recipe_path(cluster, "--model", model)
    models = [server.model] if server.starts_server else []  # a model folder's content is part of the keys
    overrides = (f"++inference.temperature={p.temperature}", *split_args("--generate_args", p.generate_args))
    if any(a.startswith("++prompt_config=") for a in overrides):
        raise UserError("--generate_args: ++prompt_config is set per stage (prompts/metamath/*.yaml); drop it.")
    container = cluster.kit_container

    def generation(name: str, input_file: str, seeds: list[int] | None, prompt: str, postprocess=None) -> Stage:
        folder = f"{out}/{name}"
        spec = GenerateSpec(server=server, input_file=input_file, output_dir=folder, seeds=seeds,
                            postprocess_cmd=postprocess, overrides=(f"++prompt_config=metamath/{prompt}", *overrides))  # fmt: skip
        files = [f"output-rs{s}.jsonl" for s in seeds] if seeds else ["output.jsonl"]
        return Stage(name, spec, folder, [f"{folder}/{f}" for f in files], models)

    def data_step(name: str, args: list[str], inputs: list[str], outputs: list[str], folder: str = "") -> Stage:
        """A step of metamath_data as a run_cmd stage; prepare reads the user's file, so its content is in the key."""
        folder = folder or f"{out}/{name}"
        command = " ".join([cluster.kit_python, "-m", "pipeline_kit.recipes.metamath_data", name,
                            *(shlex.quote(a) for a in args)])  # fmt: skip
        spec = RunCmdSpec(command, container=container, inputs=tuple(inputs), outputs=(folder, *outputs))
        return Stage(name, spec, folder, outputs, [data] if name == "prepare" else [])

    prepared = f"{out}/prepare"
    result = [
        data_step("prepare", [data, prepared], [data], [f"{prepared}/originals.jsonl", f"{prepared}/masked.jsonl"])
    ]
    build_args, build_inputs = [prepared, f"{out}/build/questions.jsonl", f"--methods={','.join(methods)}"], [prepared]
    if "rephrase" in methods:
        result.append(generation("rephrase", f"{prepared}/originals.jsonl", list(range(p.num_rephrasings)), "rephrase"))
        build_args.append(f"--rephrase_dir={out}/rephrase")
        build_inputs.append(f"{out}/rephrase")
    if "sv" in methods:
        result.append(generation("sv_rewrite", f"{prepared}/masked.jsonl", None, "self_verification"))
        build_args.append(f"--sv_dir={out}/sv_rewrite")
        build_inputs.append(f"{out}/sv_rewrite")
    built = [f"{out}/build/questions.jsonl", f"{out}/build/stats.json"]
    result.append(data_step("build", build_args, build_inputs, built))
    result.append(generation("solve", f"{out}/build/questions.jsonl", list(range(p.num_samples)), "solve",
                             GRADE_COMMAND))  # fmt: skip
    final = [f"{out}/metamath.jsonl", f"{out}/collect/stats.json"]
    collect_args = [f"{out}/solve", built[1], *final]
    result.append(data_step("collect", collect_args, [f"{out}/solve", f"{out}/build"], final, f"{out}/collect"))
    return result
