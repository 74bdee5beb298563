"""The request options beyond OpenAI's core ones (top_k, min_p, repetition_penalty, reasoning_effort and the chat
template's own arguments): the fields each server type reads them from, and the ones a type cannot honour."""

from __future__ import annotations

import json

# The options that are off unless set, with their "off" value: only a set one goes into a request or a .done key
# (so the keys of runs made before an option existed stay valid).
OFF = {"top_k": -1, "min_p": 0.0, "repetition_penalty": 1.0, "reasoning_effort": None}


def set_options(inference) -> dict[str, object]:
    """The options of `inference` (an InferenceConfig) that are set, by field name."""
    return {name: getattr(inference, name) for name, off in OFF.items() if getattr(inference, name) != off}


def template_keys(inference, chat_template_kwargs: dict) -> list[str]:
    """The keys set that go to the chat template (++chat_template_kwargs.KEY, ++inference.reasoning_effort)."""
    keys = [f"++chat_template_kwargs.{k}" for k in chat_template_kwargs]
    return keys + (["++inference.reasoning_effort"] if inference.reasoning_effort is not None else [])


def refusal(server_type: str | None, endpoint: str, keys: list[str]) -> str | None:
    """Why `server_type` cannot honour the template `keys` set (template_keys), as a message naming the first and
    the fix, or None. On the text endpoint kit renders the chat template itself, so they reach every server; on the
    chat endpoint `transformers serve` takes neither (its requests carry only a generation_config)."""
    if server_type != "transformers" or endpoint != "chat" or not keys:
        return None
    return (
        f"{keys[0]}: server type 'transformers' (transformers serve) does not take it on the chat endpoint; add "
        "++server.endpoint=text (kit then renders the chat template with it) or use --server_type=vllm."
    )


def budget_refusal(server_type: str | None, whatever_fits: bool) -> str | None:
    """Why `server_type` cannot take ++inference.tokens_to_generate=null ("whatever fits": `whatever_fits`), or None
    (None too for a number). vLLM and SGLang give a request without max_tokens what the context window leaves its
    prompt; `transformers serve` stops it at the model's generation_config max_new_tokens, or at 20 tokens when the
    model's file has none."""
    if not whatever_fits or server_type != "transformers":
        return None
    return (
        "++inference.tokens_to_generate=null: server type 'transformers' (transformers serve) has no 'whatever fits' "
        "(without a max_tokens it stops at the model's generation_config max_new_tokens, else 20 tokens); give a "
        "number, or use --server_type=vllm."
    )


def body_fields(server_type: str | None, endpoint: str, inference, chat_template_kwargs: dict) -> dict:
    """The fields merged into each request's JSON body for the options that are set (None: a generic OpenAI-
    compatible endpoint). vLLM, SGLang and TensorRT-LLM read top_k, min_p and repetition_penalty as fields of their
    own, and on the chat endpoint chat_template_kwargs and reasoning_effort too. `transformers serve` starts each
    request's GenerationConfig from the model's generation_config.json and takes only temperature and top_p from the
    request, so a model whose file lacks `do_sample: true` decodes greedily at any temperature; it refuses a `top_k`
    field (HTTP 422): its own `generation_config` field (a JSON string; what it leaves unset still comes from the
    model's file) carries do_sample and the sampling options."""
    options = set_options(inference)
    sampling = {k: v for k, v in options.items() if k != "reasoning_effort"}
    if server_type == "transformers":
        return {"generation_config": json.dumps({"do_sample": inference.temperature > 0, **sampling})}
    if endpoint != "chat":  # the template's arguments went into the prompt kit rendered (template_arguments)
        return sampling
    chat = {"chat_template_kwargs": dict(chat_template_kwargs)} if chat_template_kwargs else {}
    effort = {"reasoning_effort": inference.reasoning_effort} if inference.reasoning_effort is not None else {}
    return {**sampling, **chat, **effort}


def template_arguments(inference, chat_template_kwargs: dict) -> dict:
    """The variables kit's own rendering of the chat template gets (text endpoint), as a server's would."""
    effort = {"reasoning_effort": inference.reasoning_effort} if inference.reasoning_effort is not None else {}
    return {**effort, **chat_template_kwargs}
