"""Async requests to an OpenAI-compatible server through LiteLLM: chat or text completion, transient errors
retried with exponential backoff, context-length errors turned into a per-sample `error`."""

from __future__ import annotations

import asyncio
import os
import random
import time
from dataclasses import dataclass

from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.server_wait import ServerError, log_tail


@dataclass
class Completion:
    text: str
    num_generated_tokens: int
    generation_time: float
    error: str | None = None


CONTEXT_HINTS = ("context length", "maximum context", "context window", "too long", "max_model_len")


class GenerationClient:
    def __init__(self, cfg: GenerateConfig, api_key: str | None):
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no cost-map download at import
        import litellm

        litellm.disable_aiohttp_transport = True  # httpx transport: same speed, no unclosed-session warnings
        litellm.suppress_debug_info = True
        self.litellm = litellm
        self.cfg = cfg
        self.api_key = api_key or "EMPTY"
        self.template = None
        if cfg.server.endpoint == "text":
            from pipeline_kit.inference.chat_template import ChatTemplate

            self.template = ChatTemplate(cfg.server.chat_template or cfg.server.model)
        self.params = self._params()  # the same for every request of this run
        self.transient = (
            litellm.APIConnectionError,
            litellm.Timeout,
            litellm.RateLimitError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
        )

    def _params(self) -> dict:
        inf = self.cfg.inference
        params = {
            "model": f"openai/{self.cfg.server.model}",
            "api_base": self.cfg.server.base_url,
            "api_key": self.api_key,
            "temperature": inf.temperature,
            "top_p": inf.top_p,
            "max_tokens": inf.tokens_to_generate,
            "timeout": self.cfg.request_timeout,
            "num_retries": 0,  # kit retries itself, so that it can tell the server died
        }
        if inf.random_seed is not None:
            params["seed"] = inf.random_seed
        if inf.stop_phrases:
            params["stop"] = list(inf.stop_phrases)
        if inf.top_k > 0:
            params["extra_body"] = {"top_k": inf.top_k}
        return params

    async def _request(self, messages: list[dict]) -> tuple[str, int]:
        if self.template is None:
            resp = await self.litellm.acompletion(messages=messages, **self.params)
            text = resp.choices[0].message.content or ""
        else:
            resp = await self.litellm.atext_completion(prompt=self.template.render(messages), **self.params)
            text = resp.choices[0].text or ""
        usage = getattr(resp, "usage", None)
        return text, int(getattr(usage, "completion_tokens", 0) or 0)

    async def generate(self, messages: list[dict]) -> Completion:
        start = time.monotonic()
        for attempt in range(self.cfg.max_retries + 1):
            try:
                text, tokens = await self._request(messages)
                return Completion(text, tokens, time.monotonic() - start)
            except self.litellm.ContextWindowExceededError as e:
                return Completion("", 0, time.monotonic() - start, error=f"context length exceeded: {e}")
            except self.litellm.BadRequestError as e:
                if any(h in str(e).lower() for h in CONTEXT_HINTS):
                    return Completion("", 0, time.monotonic() - start, error=f"context length exceeded: {e}")
                raise
            except self.transient as e:
                if attempt == self.cfg.max_retries:
                    raise ServerError(
                        f"the server at {self.cfg.server.base_url} stopped answering ({type(e).__name__} after "
                        f"{attempt + 1} tries: {str(e).splitlines()[0][:200]}){log_tail(self.cfg.server.server_log)}"
                    ) from None
                delay = self.cfg.retry_delay * 2**attempt
                await asyncio.sleep(delay * (0.5 + random.random()))
        raise AssertionError("unreachable")
