"""Magpie-style math data: problems → SFT solutions → sampled responses → scores → DPO pairs → DPO.

From a chat model alone (Magpie's pre-query trick): requests → problems → filter → solutions (solutions/sft.jsonl,
kit's SFT format) → responses → gather → scores (a reward model or the grader) → pairs
(pairs/preference_pairs.jsonl, DPO's format) → dpo (the model trained on its own pairs: dpo/final). README.md beside
this file has every stage's file. With --input_file the requests and problems stages are skipped; --stop_after
ends the run earlier. The data steps are pipeline_kit.recipes.magpie_data and preference_pairs, run in the jobs."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Annotated

import typer

from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.recipes.flags import recipe_path, required, split_args
from pipeline_kit.recipes.stages import Stage

Opt = typer.Option
SCORERS = {"reward": "reward_model_score", "grader": "score"}  # scorer -> the score field it writes
SOLUTION_PROMPT = "generic/math"
STAGES = ("requests", "problems", "filter", "solutions", "responses", "gather", "scores", "pairs", "dpo")


@dataclass
class Params:
    model: Annotated[str | None, Opt("--model", help="The chat model that writes problems and solutions.")] = None
    output_dir: Annotated[str | None, Opt("--output_dir", help="Every stage's folder goes here.")] = None
    domains: Annotated[str, Opt("--domains", help="Problem domains (prompts/magpie/domains.yaml), a,b,...")] = (
        "algebra,number_theory"
    )
    num_problems: Annotated[int, Opt("--num_problems", help="Problems written per domain (before dedup).")] = 1000
    input_file: Annotated[
        str | None, Opt("--input_file", help="Problems (JSONL: problem[, expected_answer]) instead of writing them.")
    ] = None
    problem_temperature: Annotated[float, Opt("--problem_temperature", help="Writing problems.")] = 1.0
    problem_tokens: Annotated[int, Opt("--problem_tokens", help="Most tokens of a written problem.")] = 512
    solution_temperature: Annotated[float, Opt("--solution_temperature", help="The SFT solution.")] = 0.0
    num_responses: Annotated[int, Opt("--num_responses", help="Sampled responses per problem (at least 2).")] = 8
    response_temperature: Annotated[float, Opt("--response_temperature", help="The sampled responses.")] = 1.0
    tokens_to_generate: Annotated[int, Opt("--tokens_to_generate", help="Most tokens of a solution.")] = 2048
    scorer: Annotated[str, Opt("--scorer", help="reward (a reward model) | grader (answer vs reference).")] = "grader"
    reward_model: Annotated[str | None, Opt("--reward_model", help="The reward model (--scorer=reward).")] = None
    reward_server_type: Annotated[
        str | None, Opt("--reward_server_type", help="Its server [default: --server_type].")
    ] = None
    min_score_gap: Annotated[float, Opt("--min_score_gap", help="Least best-minus-worst score of a pair.")] = 0.5
    server_type: Annotated[str, Opt("--server_type", help="The model's server (vllm, transformers...).")] = "vllm"
    server_gpus: Annotated[int, Opt("--server_gpus", help="GPUs of each server.")] = 0
    generate_args: Annotated[
        str, Opt("--generate_args", help="++key=value for every generation, e.g. '++max_concurrent_requests=64'.")
    ] = ""
    dpo_args: Annotated[
        str, Opt("--dpo_args", help="++key=value for the DPO stage (kit dpo's), e.g. '++beta=0.1 ++num_epochs=2'.")
    ] = ""
    backend: Annotated[str, Opt("--backend", help="The DPO stage's backend: trl | nemo_rl | module:Class.")] = "trl"
    num_gpus: Annotated[int, Opt("--num_gpus", help="GPUs per node of the DPO stage (0: CPU).")] = 0
    num_nodes: Annotated[int, Opt("--num_nodes", help="Nodes of the DPO stage.")] = 1
    stop_after: Annotated[str, Opt("--stop_after", help=f"The last stage to run ({', '.join(STAGES)}).")] = STAGES[-1]


def check(p: Params) -> None:
    if p.scorer not in SCORERS:
        raise UserError(f"--scorer={p.scorer} is not a scorer; use reward (with --reward_model) or grader.")
    if p.scorer == "reward" and not p.reward_model:
        raise UserError(
            "--scorer=reward needs --reward_model (a *ForSequenceClassification folder); or --scorer=grader."
        )
    if p.num_responses < 2:
        raise UserError(f"--num_responses={p.num_responses}: a pair needs at least 2 responses per problem.")
    if p.num_problems < 1:
        raise UserError(f"--num_problems={p.num_problems}: ask for at least 1 problem per domain.")
    if p.stop_after not in STAGES:
        raise UserError(f"--stop_after={p.stop_after} is not a stage; use one of {', '.join(STAGES)}.")
    if p.input_file is not None and p.stop_after in STAGES[:2]:
        raise UserError(f"--stop_after={p.stop_after}: with --input_file that stage does not run; drop one.")


def stages(cluster: ClusterConfig, p: Params) -> list[Stage]:
    from pipeline_kit.jobs import GenerateSpec, RunCmdSpec
    from pipeline_kit.jobs.train import TrainSpec
    from pipeline_kit.overrides import override_text
    from pipeline_kit.recipes.magpie_data import check_domains
    from pipeline_kit.servers.base import ServerSpec

    check(p)
    out = recipe_path(cluster, "--output_dir", required("--output_dir", p.output_dir, "(the recipe's folder)"))
    model = recipe_path(cluster, "--model", required("--model", p.model, "(it writes problems and solutions)"))
    extra = split_args("--generate_args", p.generate_args)
    server = ServerSpec(p.server_type, model, gpus=p.server_gpus).validate()
    py = f"{cluster.kit_python} -m pipeline_kit.recipes"
    folder = {name: f"{out}/{name}" for name in STAGES}
    q = shlex.quote
    result: list[Stage] = []

    def run_cmd(name: str, command: str, output: str, reads: tuple[str, ...] = (), outside: list[str] = ()) -> None:
        """`outside`: files from outside the recipe that it reads (their content is part of the key)."""
        spec = RunCmdSpec(command, container=cluster.kit_container, inputs=reads, outputs=(folder[name],))
        result.append(Stage(name, spec, folder[name], [output], list(outside)))

    def generate(name: str, input_file: str, outputs: list[str], overrides: tuple[str, ...], **kw) -> None:
        served = kw.pop("server", server)
        spec = GenerateSpec(server=served, input_file=input_file, output_dir=folder[name],
                            overrides=(*overrides, *extra), **kw)  # fmt: skip
        result.append(Stage(name, spec, folder[name], outputs, [served.model]))  # the model's files are in the key

    if p.input_file is None:
        domains = ",".join(check_domains(p.domains))
        requests_file = f"{folder['requests']}/requests.jsonl"
        run_cmd("requests", f"{py}.magpie_data requests --domains={q(domains)} --num_problems={p.num_problems} "
                            f"{q(requests_file)}", requests_file)  # fmt: skip
        generate("problems", requests_file, [f"{folder['problems']}/output.jsonl"],
                 ("++generation_type=magpie", "++server.endpoint=text", f"++server.chat_template={override_text(model)}",
                  f"++inference.temperature={p.problem_temperature}",
                  f"++inference.tokens_to_generate={p.problem_tokens}"))  # fmt: skip
        written = f"{folder['problems']}/output.jsonl"
    else:
        written = recipe_path(cluster, "--input_file", p.input_file)
    problems = f"{folder['filter']}/problems.jsonl"
    run_cmd("filter", f"{py}.magpie_data filter {q(written)} {q(problems)}", problems, (written,),
            [written] if p.input_file is not None else [])  # fmt: skip
    solutions, sft = f"{folder['solutions']}/output.jsonl", f"{folder['solutions']}/sft.jsonl"
    generate("solutions", problems, [solutions, sft],
             (f"++prompt_config={SOLUTION_PROMPT}", f"++inference.temperature={p.solution_temperature}",
              f"++inference.tokens_to_generate={p.tokens_to_generate}"),
             postprocess_cmd=f'"$KIT_PYTHON" -m pipeline_kit.recipes.magpie_data sft "$KIT_OUTPUT_FILE" {q(sft)}')  # fmt: skip
    generate("responses", problems, [f"{folder['responses']}/output-rs{k}.jsonl" for k in range(p.num_responses)],
             (f"++prompt_config={SOLUTION_PROMPT}", f"++inference.temperature={p.response_temperature}",
              f"++inference.tokens_to_generate={p.tokens_to_generate}"),
             seeds=list(range(p.num_responses)))  # fmt: skip
    gathered = f"{folder['gather']}/responses.jsonl"
    run_cmd("gather", f"{py}.magpie_data gather {q(folder['responses'])} {q(solutions)} {q(gathered)}", gathered,
            (folder["responses"], solutions))  # fmt: skip
    scored = f"{folder['scores']}/output.jsonl"
    if p.scorer == "reward":
        rm = recipe_path(cluster, "--reward_model", p.reward_model)
        rm_server = ServerSpec(p.reward_server_type or p.server_type, rm, gpus=p.server_gpus).validate()
        generate("scores", gathered, [scored], ("++generation_type=reward", f"++prompt_config={SOLUTION_PROMPT}"),
                 server=rm_server)  # fmt: skip
    else:
        run_cmd("scores", f"{py}.magpie_data grade {q(gathered)} {q(scored)}", scored, (gathered,))
    pairs = f"{folder['pairs']}/preference_pairs.jsonl"
    run_cmd("pairs", f"{py}.preference_pairs {q(scored)} {q(pairs)} --score_field={SCORERS[p.scorer]} "
                     f"--min_score_gap={p.min_score_gap} --prompt_config={SOLUTION_PROMPT}", pairs, (scored,))  # fmt: skip
    # the model that wrote the pairs learns from them (its content is already in the key, through solutions')
    dpo = TrainSpec("dpo", model, pairs, folder["dpo"], backend=p.backend, num_gpus=p.num_gpus,
                    num_nodes=p.num_nodes, overrides=split_args("--dpo_args", p.dpo_args))  # fmt: skip
    result.append(Stage("dpo", dpo, folder["dpo"], [f"{folder['dpo']}/final/config.json"]))
    return result[: [s.name for s in result].index(p.stop_after) + 1]
