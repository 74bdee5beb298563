"""Typed config of the generation script, filled from `++key=value` overrides (pipeline_kit.overrides, the one
grammar). An unknown key, a wrong type or a missing required value is one clear error naming the key."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pipeline_kit.errors import UserError
from pipeline_kit.inference.registry import DEFAULT_GENERATION_TYPE, task_class
from pipeline_kit.inference.request_options import budget_refusal
from pipeline_kit.overrides import MISSING, check_overrides, config_value, parse_overrides, take_override

REASONING_EFFORTS = ("low", "medium", "high")


@dataclass
class ServerConfig:
    base_url: str = MISSING  # the OpenAI-compatible root, e.g. http://127.0.0.1:8000/v1
    model: str = MISSING  # the name the server serves the model under
    server_type: str | None = None  # vllm, sglang, ... (set by kit generate; part of the .done key)
    api_key_env: str | None = None  # env var holding the API key (external endpoints)
    endpoint: str = "chat"  # chat | text (text applies the chat template here, on the client)
    chat_template: str | None = None  # model folder or .jinja file for endpoint=text [default: model]
    ready_timeout: float = 600.0  # seconds to wait for the server kit started to answer /v1/models
    external_ready_timeout: float = 20.0  # the same for a server kit did not start (--server_address): it is up or not
    server_log: str | None = None  # the server's log, whose tail is shown when it is not ready or dies
    # seconds without any request reaching the server (connections refused or reset) after which it counts as gone
    # and the job stops (inference/retry.py); an answer of any status, a 500 or 429 too, shows it is there
    gone_after: float = 10.0
    # the --server_args of the server kit started (set by kit generate): part of the .done key (done_key.py)
    server_args: str = ""
    # the server's GPUs per node and nodes (set by kit generate): recorded with the job's measurements, so that
    # figures compare like with like; not part of the .done key (they cannot change the output)
    gpus: int = 0
    nodes: int = 1


@dataclass
class InferenceConfig:
    temperature: float = 0.0
    top_p: float = 0.95
    top_k: int = -1  # off unless > 0
    min_p: float = 0.0  # off unless > 0
    repetition_penalty: float = 1.0  # off at 1.0
    reasoning_effort: str | None = None  # low | medium | high: gpt-oss-style models (request_options.py)
    # max_tokens of each request; one whose prompt leaves less room in the server's context window is fitted to
    # what fits and counted (context_window.py); null: whatever fits (no max_tokens sent)
    tokens_to_generate: int | None = 2048
    random_seed: int | None = None  # set per output file by kit generate (output-rs{seed}.jsonl)
    stop_phrases: list[str] = field(default_factory=list)
    logprobs: bool = False  # ask for the tokens' log-probabilities; each sample gets `mean_logprob` (weighted votes)


@dataclass
class GenSelectConfig:
    """GenSelect (++generation_type=genselect): the model compares up to `window` candidate solutions per request
    and names the best; windows' winners meet again until one is left. Candidates are shuffled by the unit's seed."""

    window: int = 8  # candidates per request (at least 2)
    prompt_config: str = "generic/genselect"  # its user template gets {solutions}, {num_solutions}, {max_index}


@dataclass
class GenerateConfig:
    generation_type: str = DEFAULT_GENERATION_TYPE  # a name of inference/registry.py, or package.module:Class
    input_file: str | None = None  # the problems (required unless generation_type=genselect)
    input_dir: str | None = None  # genselect: the folder of sampled runs (output-rs*.jsonl) to pick from
    output_file: str | None = None  # one unit's output ...
    output_dir: str | None = None  # ... or a plan's folder: output[-rs{seed}][_chunk_{k}].jsonl for every unit
    units: list[str] | None = None  # with output_dir: greedy, rs3, chunk_2, rs3_chunk_2 ... [default: every chunk]
    prompt_config: str = "generic/default"
    server: ServerConfig = field(default_factory=ServerConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    # more arguments of the model's chat template (Qwen3: ++chat_template_kwargs.enable_thinking=false), as the
    # server's chat endpoint passes them, or kit's own rendering on the text endpoint
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)
    max_samples: int = -1  # only the first N records of the input (before it is cut into chunks); -1: all
    # a reasoning model's thinking apart from its answer (reasoning.py): `generation` is the text after the last
    # end_reasoning_string, `reasoning_content` the text before; a trace that never reached it has no answer. A
    # server's reasoning parser (vLLM --reasoning-parser) splits it by itself, with or without this.
    parse_reasoning: bool = False
    end_reasoning_string: str = "</think>"
    max_concurrent_requests: int = 512
    # transient errors (408, 429, 5xx, timeouts) are retried with exponential backoff from retry_delay, capped at
    # 10 s (inference/retry.py): 8 retries wait 45-68 s in all
    max_retries: int = 8
    retry_delay: float = 0.5
    request_timeout: float = 3600.0
    chunk_id: int | None = None  # this unit's chunk of the input (0-based) ...
    num_chunks: int | None = None  # ... out of this many contiguous chunks
    rerun_done: bool = False
    allow_empty_input: bool = False  # an input file without records writes an empty output (else it is an error)
    postprocess_cmd: str | None = None  # run once the final (merged) file is written
    # the field a sample's text goes to [generation]; another NAME also prefixes its stats (NAME_num_generated_tokens,
    # ...), so a later stage keeps an earlier one's fields. Unset, an input that already holds `generation` is refused.
    generation_key: str | None = None
    progress_every: float = 30.0  # seconds between progress lines when not on a terminal
    # tool-integrated reasoning: code blocks run in the sandbox and their output is spliced into the generation
    code_execution: bool = False
    code_tags: str = "qwen"  # a tag set under prompts/code_tags/ (qwen, tool_call) or a YAML file
    max_code_executions: int = 8  # code rounds per sample
    code_timeout: float = 10.0  # seconds per code round
    max_code_output_characters: int = 1000  # of each round's output the model sees
    code_language: str = "ipython"  # python | ipython (prints the last expression) | shell
    code_budget_note: bool = False  # tell the model after each round how many rounds it has left
    sandbox_address: str | None = None  # http://host:port of `kit start_sandbox`; --with_sandbox sets it
    sandbox_ready_timeout: float = 120.0  # seconds to wait for the sandbox's /health (it starts in about 1 s)
    genselect: GenSelectConfig = field(default_factory=GenSelectConfig)


def parse_generate_config(args: list[str] | tuple[str, ...]) -> GenerateConfig:
    """The generation script's config from its `++key=value` arguments, with the inputs its generation type needs."""
    cfg = parse_overrides(args, GenerateConfig, "generation")
    check_values({key: config_value(cfg, key) for key in CHECKED})
    refused = budget_refusal(cfg.server.server_type, cfg.inference.tokens_to_generate is None)
    if refused:
        raise UserError(refused)
    task_class(cfg.generation_type).check_inputs(cfg)
    return cfg


# the keys whose type alone does not say a value is wrong (check_values)
CHECKED = ("max_samples", "inference.reasoning_effort", "inference.tokens_to_generate", "end_reasoning_string")


def check_values(values: dict[str, object]) -> None:
    """The CHECKED keys' values (parsed, or the raw `++key=value` text at submission; None: not given), each wrong
    one a UserError naming the key."""
    samples, effort = values["max_samples"], values["inference.reasoning_effort"]
    budget, end = values["inference.tokens_to_generate"], values["end_reasoning_string"]
    if samples is not None and (int(samples) == 0 or int(samples) < -1):
        raise UserError(f"++max_samples={samples}: give how many records to use (1 or more), or -1 for all.")
    if effort is not None and effort not in REASONING_EFFORTS:
        raise UserError(f"++inference.reasoning_effort={effort} is not one of {', '.join(REASONING_EFFORTS)}.")
    if budget not in (None, "null") and int(budget) < 1:
        raise UserError(
            f"++inference.tokens_to_generate={budget}: give the tokens a sample may have (1 or more), or null for "
            "whatever the context window leaves."
        )
    if end == "":
        raise UserError("++end_reasoning_string is empty; give the string that ends the thinking (default </think>).")


def check_generate_overrides(args: list[str] | tuple[str, ...]) -> None:
    """The check at submission, without hydra in the common case: every key exists and each value fits its type."""
    check_overrides(args, GenerateConfig, "generation")
    check_values({key: take_override(args, key)[0] for key in CHECKED})
