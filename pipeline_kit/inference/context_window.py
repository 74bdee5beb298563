"""A request's budget fitted to the server's context window: the window and prompt length that a server's
context-length refusal names (vLLM, SGLang and OpenAI wordings), and the window a server gives on /v1/models."""

from __future__ import annotations

import json
import re
import urllib.request
from dataclasses import dataclass

# Each wording names the window; most name the prompt's tokens too. Matched in this order, the first one wins.
_WINDOW = r"maximum context length (?:is|of) (?P<window>[\d,]+) tokens"
_REFUSALS = (
    # SGLang: "... maximum context length of W tokens. You requested a total of T tokens: P tokens from the input
    # messages and C tokens for the completion."
    re.compile(_WINDOW + r".*?(?P<prompt>[\d,]+) tokens from the input", re.S),
    # vLLM 0.6-0.9 and OpenAI: "... is W tokens. However, you requested T tokens (P in the messages, C in the
    # completion)."; or "you requested T tokens in the messages" (the prompt alone)
    re.compile(_WINDOW + r".*?\((?P<prompt>[\d,]+) in the messages", re.S),
    re.compile(_WINDOW + r".*?you requested (?P<prompt>[\d,]+) tokens in the messages", re.S),
    # vLLM 0.10+: "... is W tokens. However, you requested C output tokens and your prompt contains P input tokens";
    # or "your prompt contains [at least] P input tokens, which exceeds this limit even without any output tokens"
    re.compile(_WINDOW + r".*?prompt contains (?:at least )?(?P<prompt>[\d,]+) input tokens", re.S),
    # SGLang: "The input (P tokens) is longer than the model's context length (W tokens)."
    re.compile(r"input \((?P<prompt>[\d,]+) tokens\) is longer than the model's context length \((?P<window>[\d,]+)"),
    # vLLM 0.11+: "max_tokens=C cannot be greater than max_model_len=W" (the prompt's length unknown)
    re.compile(r"cannot be greater than max_model_len=(?P<window>[\d,]+)"),
    re.compile(_WINDOW),
)


@dataclass(frozen=True)
class ContextRefusal:
    """What a context-length refusal says: the window, and the prompt's tokens when it names them."""

    window: int
    prompt: int | None

    @property
    def room(self) -> int | None:
        """The tokens a completion of this prompt may have (0 or less: the prompt alone fills the window)."""
        return None if self.prompt is None else self.window - self.prompt


def parse_refusal(message: str) -> ContextRefusal | None:
    """The window and prompt length out of a server's context-length message; None for any other message."""
    for pattern in _REFUSALS:
        found = pattern.search(message)
        if found:
            numbers = found.groupdict()
            prompt = numbers.get("prompt")
            return ContextRefusal(_int(numbers["window"]), None if prompt is None else _int(prompt))
    return None


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def served_window(base_url: str, model: str, api_key: str | None, timeout: float = 10.0) -> int | None:
    """The context window of `model` as the server's /v1/models lists it (`max_model_len`: vLLM, SGLang); None when
    the server does not say (transformers serve, an external API) or cannot be asked."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    request = urllib.request.Request(f"{base_url.rstrip('/')}/models", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            listed = json.loads(answer.read())["data"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    for entry in listed if isinstance(listed, list) else []:
        if isinstance(entry, dict) and entry.get("id") == model and isinstance(entry.get("max_model_len"), int):
            return entry["max_model_len"]
    return None


def fitted(refusal: ContextRefusal | None, asked: int | None) -> dict | None:
    """The request fields to ask again with after a context-length refusal: {"max_tokens": what fits}, or
    {"max_tokens": None} (the server's own "whatever fits") when the refusal names the window but not the prompt;
    None when asking again cannot help: the prompt alone fills the window, the request asked for whatever fits
    already, or the message names no window."""
    if refusal is None or asked is None:
        return None
    if refusal.room is None:
        return {"max_tokens": None}
    return {"max_tokens": refusal.room} if 0 < refusal.room < asked else None
