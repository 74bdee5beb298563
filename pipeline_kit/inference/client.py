"""Async requests to an OpenAI-compatible server through LiteLLM: chat or text completion, transient errors
retried with exponential backoff (retry.py: a server no connection reaches stops the job), a refusal of one request (context length, another 4xx) turned into a per-sample
`error` (see refusals.py)."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import gc
import importlib
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pipeline_kit.errors import UserError
from pipeline_kit.inference import request_options, retry
from pipeline_kit.inference.chat_template import ChatTemplate
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.context_window import fitted, parse_refusal, served_window
from pipeline_kit.inference.reasoning import Reasoning
from pipeline_kit.inference.refusals import is_transient, refusal, server_message
from pipeline_kit.server_wait import ServerError, log_tail


@dataclass
class Completion:
    text: str
    num_generated_tokens: int
    generation_time: float
    error: str | None = None
    failed: bool = False  # the server refused the request (not over the context length): a rerun asks again
    finish_reason: str | None = None  # "stop" (end of sequence or a stop phrase) or "length"
    extra: dict = field(default_factory=dict)  # more per-sample fields (code rounds of a TIR sample)
    # the max_tokens the request was fitted to when the prompt plus tokens_to_generate overran the context window
    # (kit asked again with what fits, or the server cut it itself): the sample's `clamped_max_tokens`
    clamped_to: int | None = None
    # the thinking that a server's reasoning parser (or LiteLLM, for a chat answer that opens with <think>) returned
    # apart from `text`, with its tokens when the server counted them (reasoning.py)
    reasoning: Reasoning | None = None
    reasoning_tokens: int | None = None

    def sample_fields(self) -> dict:
        """What a sample records of its completion besides the text: tokens, time, the extra fields, the error."""
        fields = {
            "num_generated_tokens": self.num_generated_tokens,
            "generation_time": round(self.generation_time, 4),
            **self.extra,
        }
        fields |= {"clamped_max_tokens": self.clamped_to} if self.clamped_to is not None else {}
        return {**fields, "error": self.error} if self.error else fields


@dataclass(frozen=True)
class Answer:
    """One answered request: its text, tokens generated, finish reason, token log-probabilities (None: not asked)
    and the prompt's tokens as the server counted them (None: it did not say)."""

    text: str
    tokens: int
    finish: str | None
    logprobs: list[float] | None
    prompt_tokens: int | None
    reasoning: Reasoning | None = None
    reasoning_tokens: int | None = None


def _answer(resp, text: str, chat: bool) -> Answer:
    usage = getattr(resp, "usage", None)
    tokens = int(getattr(usage, "completion_tokens", 0) or 0)
    prompt = getattr(usage, "prompt_tokens", None)
    choice = resp.choices[0]
    reasoning, reasoning_tokens = _server_reasoning(choice.message, usage) if chat else (None, None)
    return Answer(
        text,
        tokens,
        choice.finish_reason,
        token_logprobs(choice, chat=chat),
        prompt if isinstance(prompt, int) else None,
        reasoning,
        reasoning_tokens,
    )


def _server_reasoning(message, usage) -> tuple[Reasoning | None, int | None]:
    """The thinking a chat answer carries apart from its content (`reasoning_content`, which LiteLLM also fills from
    vLLM's newer `reasoning` field, and from a content that opens with <think>...</think>), and its tokens as the
    server counted them; (None, None) when it carries none. A trace with no content after it never finished."""
    trace = getattr(message, "reasoning_content", None)
    if not isinstance(trace, str):
        return None, None
    content = message.content
    details = getattr(usage, "completion_tokens_details", None)
    tokens = getattr(details, "reasoning_tokens", None)
    return Reasoning(trace, content or "", content is not None), tokens if isinstance(tokens, int) else None


def _field(obj, name: str):
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def token_logprobs(choice, chat: bool) -> list[float] | None:
    """The generated tokens' log-probabilities of a choice (None when none came back): OpenAI's chat shape
    (logprobs.content[i].logprob) or its text-completion shape (logprobs.token_logprobs)."""
    logprobs = _field(choice, "logprobs")
    if logprobs is None:
        return None
    if chat:
        return [float(_field(t, "logprob")) for t in _field(logprobs, "content") or []]
    return [float(v) for v in _field(logprobs, "token_logprobs") or [] if v is not None]


def text_prompt_fields(server_type: str | None) -> dict:
    """The fields of a text completion whose prompt is already whole: kit renders the chat template (bos_token
    included, as a Hugging Face tokenizer renders it) or sends Magpie's pre-query prefix. vLLM's /v1/completions
    adds the tokenizer's special tokens to a prompt by default (`add_special_tokens`, unlike its chat endpoint), so a
    model whose tokenizer adds a BOS (Llama 3) would read two; other servers get no unknown field."""
    return {"add_special_tokens": False} if server_type == "vllm" else {}


# httpx makes every response a reference cycle (the Response and its BoundAsyncStream), so a finished response, its
# body and the parsed JSON with it, is freed only by the cyclic garbage collector. A long request outlives the
# collections of the young generations, so its garbage waits for a full collection, which Python runs rarely: at
# 32k-token samples and 64 in flight, 208 responses were alive at once. A full collection after every COLLECT_TEXT
# characters of answers (64 samples of 32k tokens) keeps that garbage to a few samples' worth; after gc.freeze (see
# import_litellm) it walks only what the requests made (perf/README.md, "Reasoning-length samples").
COLLECT_TEXT = 8 * 2**20
_uncollected = [0]  # characters of answers received since the last collection, in this process


def collect_after(answer_chars: int) -> None:
    _uncollected[0] += answer_chars
    if _uncollected[0] >= COLLECT_TEXT:
        _uncollected[0] = 0
        gc.collect()


# the context window (max_model_len of /v1/models, None where not said) of each (base_url, model) asked so far: the
# units of a job ask one server
_WINDOWS: dict[tuple[str, str], int | None] = {}


class _Preload:
    """The background import of LiteLLM (start_litellm_import): its thread, and what the import raised."""

    thread: threading.Thread | None = None
    error: BaseException | None = None


def start_litellm_import(say: Callable[[str], None] | None = None) -> bool:
    """Start importing LiteLLM in a thread, so that its ~2 s of CPU overlap what the job waits for (the server's
    start-up) instead of following it; the next import_litellm() waits for that thread (and raises what the import
    raised). `say` gets one line when it is done. False where LiteLLM is imported already, or its import started.
    Not a daemon thread: a job that stops before it needs LiteLLM (a server never ready) exits once the import is
    done, not in the middle of it."""
    if "litellm" in sys.modules or _Preload.thread is not None:
        return False

    def run() -> None:
        start = time.monotonic()
        try:
            _import_litellm()
        except BaseException as e:  # raised again by import_litellm in the thread that needs LiteLLM
            _Preload.error = e
            return
        if say is not None:
            say(f"LiteLLM imported in {time.monotonic() - start:.1f} s")

    _Preload.thread = threading.Thread(target=run, name="kit-import-litellm")
    _Preload.thread.start()
    return True


def litellm_import_ended() -> None:
    """Wait for the thread of start_litellm_import, if one runs (what it raised is import_litellm's to raise): a job
    that stops before its first request (a server never ready) says its last line, the error, after the import's."""
    if _Preload.thread is not None:
        _Preload.thread.join()


def import_litellm():
    """LiteLLM, imported with the garbage collector off, then every object so far frozen (gc.freeze: left out of
    all later collections). The import leaves ~230,000 tracked objects: with the collector on it took 0.3 of 1.8 s of
    CPU more, and each full collection of the requests that follow walked them all again (perf/README.md). Where
    start_litellm_import began it in a thread, waits for that thread."""
    thread = _Preload.thread
    if thread is not None:
        thread.join()
        if _Preload.error is not None:
            raise _Preload.error
    return _import_litellm()


# what LiteLLM's first request imports on top of `import litellm` (~460 modules, 0.35 s of CPU here: the OpenAI SDK's
# resources above all), imported with it, so that where the import overlaps the server's start-up, so does this
FIRST_REQUEST_MODULES = (
    "openai.resources",
    "litellm.litellm_core_utils.logging_worker",
    "litellm.litellm_core_utils.get_supported_openai_params",
    "litellm.litellm_core_utils.llm_request_utils",
    "litellm._service_logger",
    "jiter",
    "encodings.idna",
)


def _import_litellm():
    if "litellm" not in sys.modules:
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # offline: no cost-map download at import
        # LiteLLM's default mode (DEV) loads the first .env file in the folders above its own package (a venv
        # inside the user's repository finds the repository's) into the job's environment, unseen by kit
        os.environ.setdefault("LITELLM_MODE", "PRODUCTION")
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            import litellm  # noqa: F401

            for name in FIRST_REQUEST_MODULES:
                with contextlib.suppress(ImportError):  # a warm-up only: the first request imports what it needs
                    importlib.import_module(name)
        finally:
            if was_enabled:
                gc.enable()
        gc.freeze()
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class JobConnection:
    """The HTTP connections of every GenerationClient of a job (job_pool.py: the units' clients are open side by
    side, and LiteLLM takes its HTTP client from one global, `litellm.aclient_session`)."""

    def __init__(self, concurrency: int):
        litellm = import_litellm()
        self.session = GenerationClient._aiohttp_session(concurrency)
        litellm.aclient_session = GenerationClient._http_client(self.session)

    async def close(self) -> None:
        """Run LiteLLM's queued success-logging coroutines (its logging worker falls behind at high concurrency:
        1,500 of 2,000 were still queued at 512 in flight; at exit LiteLLM runs 200 and drops the rest with a
        'coroutine ... was never awaited' warning), then close the connections."""
        from litellm.litellm_core_utils.logging_worker import GLOBAL_LOGGING_WORKER

        try:
            await asyncio.wait_for(GLOBAL_LOGGING_WORKER.flush(), timeout=10)
        except asyncio.TimeoutError:
            pass
        await self.session.close()


class _SharedConnection:
    """A job's JobConnection, opened by the first client that needs it (a reward job never imports LiteLLM)."""

    def __init__(self, concurrency: int):
        self.concurrency, self.connection = concurrency, None

    def get(self) -> JobConnection:
        if self.connection is None:
            self.connection = JobConnection(self.concurrency)
        return self.connection


_SHARED: contextvars.ContextVar[_SharedConnection | None] = contextvars.ContextVar("kit_job_connection", default=None)


@contextlib.asynccontextmanager
async def job_connection(concurrency: int):
    """Inside it (and in the tasks started inside it), GenerationClients share one JobConnection sized to
    `concurrency`, closed at its end; outside, each client opens and closes its own."""
    shared = _SharedConnection(concurrency)
    token = _SHARED.set(shared)
    try:
        yield
    finally:
        _SHARED.reset(token)
        if shared.connection is not None:
            await shared.connection.close()


class GenerationClient:
    def __init__(self, cfg: GenerateConfig, api_key: str | None):
        litellm = import_litellm()
        shared = _SHARED.get()
        self._connection = shared.get() if shared is not None else JobConnection(cfg.max_concurrent_requests)
        self._owns_connection = shared is None
        self.litellm = litellm
        self.cfg = cfg
        self.api_key = api_key or "EMPTY"
        self.template = None
        keys = request_options.template_keys(cfg.inference, cfg.chat_template_kwargs)
        refused = request_options.refusal(cfg.server.server_type, cfg.server.endpoint, keys)
        if refused:
            raise UserError(refused)
        if cfg.server.endpoint == "text":
            arguments = request_options.template_arguments(cfg.inference, cfg.chat_template_kwargs)
            self.template = ChatTemplate(cfg.server.chat_template or cfg.server.model, arguments)
        self.params = self._params()  # the same for every request of this run
        self.retried = retry.Retries()  # requests tried again and why: the job's figures and its log
        self.clamped = 0  # requests whose max_tokens was fitted to the context window, counted there too
        self._window = None  # the task that asks the server's context window (/v1/models), if this client asked
        self.transient = (
            litellm.APIConnectionError,
            litellm.Timeout,
            litellm.RateLimitError,
            litellm.InternalServerError,
            litellm.ServiceUnavailableError,
        )

    @staticmethod
    def _aiohttp_session(concurrency: int):
        """One connection per request in flight. Called in the running event loop; closed by close()."""
        import aiohttp
        from litellm.llms.custom_httpx.http_handler import get_ssl_configuration

        return aiohttp.ClientSession(connector=retry.pool_connector(concurrency, ssl=get_ssl_configuration()))

    @staticmethod
    def _http_client(session):
        """The httpx client LiteLLM hands to the OpenAI SDK for every chat and text request of this run: one, on
        LiteLLM's aiohttp transport over `session`. LiteLLM's own choice is worse at kit's concurrency: with the
        httpx transport, httpcore 1.0's pool rescans every connection (and every queued request) on each request
        and each response, and closes idle connections as soon as it holds more than 20; for text completions
        LiteLLM makes a new client, so a new connection, per request. 2,000 requests to perf/'s fast stub
        (perf/README.md): 21 -> 160 requests/s and 99 -> 18 CPU seconds at 512 in flight, 106 -> 161 at 64."""
        import httpx
        from litellm.llms.custom_httpx.aiohttp_transport import LiteLLMAiohttpTransport

        transport = LiteLLMAiohttpTransport(client=session, owns_session=False)
        return httpx.AsyncClient(transport=transport, follow_redirects=True)

    async def close(self) -> None:
        """Close its own connection (JobConnection.close); a job's shared one is closed at the job's end."""
        if self._owns_connection:
            await self._connection.close()

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
        server = self.cfg.server
        fields = request_options.body_fields(server.server_type, server.endpoint, inf, self.cfg.chat_template_kwargs)
        if self.template is not None:
            fields |= text_prompt_fields(self.cfg.server.server_type)
        if fields:
            params["extra_body"] = fields
        if inf.logprobs:  # chat: true (a list per token comes back); text: the top-1 count
            params["logprobs"] = 1 if self.template is not None else True
        return params

    async def _request(self, messages: list[dict], prefix: str, overrides: dict) -> tuple:
        """`prefix`: the answer so far, which the model continues (after a code round)."""
        params = {**self.params, **overrides}
        if self.template is None:
            if prefix:  # vLLM/SGLang: continue the last assistant message instead of starting a new one
                messages = [*messages, {"role": "assistant", "content": prefix}]
                extra = {**params.get("extra_body", {}), "continue_final_message": True, "add_generation_prompt": False}
                params = {**params, "extra_body": extra}
            resp = await self.litellm.acompletion(messages=messages, **params)
            text = resp.choices[0].message.content or ""
        else:
            return await self._text(self.template.render(messages) + prefix, params)
        return _answer(resp, text, chat=True)

    async def _text(self, prompt: str, params: dict) -> tuple:
        resp = await self.litellm.atext_completion(prompt=prompt, **params)
        return _answer(resp, resp.choices[0].text or "", chat=False)

    async def generate(
        self, messages: list[dict], prefix: str = "", stop: list[str] | None = None, max_tokens: int | None = None
    ) -> Completion:
        """One completion; `stop` and `max_tokens` replace the configured ones for this request."""
        overrides = {"stop": stop} if stop is not None else {}
        overrides |= {"max_tokens": max_tokens} if max_tokens is not None else {}
        asked = overrides.get("max_tokens", self.params["max_tokens"])
        return await self._retried(lambda fit: self._request(messages, prefix, {**overrides, **fit}), asked)

    async def complete_text(self, prompt: str, stop: list[str], seed: int) -> Completion:
        """A text completion of `prompt` as it is (no chat template), e.g. Magpie's pre-query prefix, with this
        request's own stop phrases (added to the configured ones) and seed."""
        params = {**self.params, "stop": [*self.cfg.inference.stop_phrases, *stop], "seed": seed}
        return await self._retried(lambda fit: self._text(prompt, {**params, **fit}), params["max_tokens"])

    async def _retried(self, request, asked: int | None) -> Completion:
        """`request(fit)` (a coroutine of an Answer; `fit` replaces fields of the request), retried on transient
        errors (retry.py: 408, 429, 5xx with backoff; a server no connection reaches stops the job after
        ++server.gone_after seconds); a refusal of this request (another 4xx: then `failed`) is the sample's `error`;
        one that every request would get (401, 403, 404) is a UserError. Every retry counts in `self.retried` (the
        job's figures). `asked`: the request's max_tokens (None: whatever fits). When the prompt plus `asked` overruns
        the context window, the request is asked once more with what fits (or the server cut it itself): counted in
        `self.clamped`; a prompt that alone fills the window is the sample's error, as it would be again."""
        start = time.monotonic()
        server = self.cfg.server
        reach = retry.reach(server.base_url)
        fit: dict = {}  # {"max_tokens": what fits} after a context-length refusal
        attempt = 0
        while True:
            try:
                answer = await request(fit)
                reach.answered()
                collect_after(len(answer.text) + (len(answer.reasoning.trace) if answer.reasoning else 0))
                clamped_to = await self._clamped_to(asked, fit, answer)
                self.clamped += clamped_to is not None
                logprobs = answer.logprobs
                extra = (
                    {} if logprobs is None else {"mean_logprob": sum(logprobs) / len(logprobs) if logprobs else None}
                )
                took = time.monotonic() - start
                return Completion(
                    answer.text,
                    answer.tokens,
                    took,
                    finish_reason=answer.finish,
                    extra=extra,
                    clamped_to=clamped_to,
                    reasoning=answer.reasoning,
                    reasoning_tokens=answer.reasoning_tokens,
                )
            except Exception as e:  # LiteLLM's HTTP errors share no base class (some are openai's): go by status
                status = getattr(e, "status_code", None)
                context = parse_refusal(str(e)) if status == 400 else None
                if isinstance(e, self.litellm.ContextWindowExceededError) or context is not None:
                    reach.answered()
                    refit = None if fit else fitted(context, asked)
                    if refit is not None:
                        fit = refit
                        continue  # not a retry: the same request, with what fits
                    error = f"context length exceeded: HTTP {status}: {server_message(str(e))}"
                    return Completion("", 0, time.monotonic() - start, error=error)
                if not isinstance(e, self.transient) and not (isinstance(status, int) and is_transient(status)):
                    if not isinstance(status, int) or not 400 <= status < 500:
                        raise
                    reach.answered()
                    error, failed = refusal(status, server_message(str(e)), server.base_url, server.model,
                                            server.endpoint)  # fmt: skip
                    return Completion("", 0, time.monotonic() - start, error=error, failed=failed)
                what = retry.describe(e)
                unanswered = retry.no_answer(e)
                if unanswered:  # refused, reset, closed: no HTTP answer
                    lost = await retry.gone(reach, server.base_url, server.gone_after)
                    if lost is not None:
                        raise ServerError(
                            f"the server at {server.base_url} is gone: no request reached it for {lost:.0f} s "
                            f"(++server.gone_after={server.gone_after:g}; last: {what}); a rerun requests only the "
                            f"missing samples{log_tail(server.server_log)}"
                        ) from None
                else:
                    reach.answered()  # it answered (429, 5xx) or took the request (a timeout): it is there
                if attempt == self.cfg.max_retries:
                    raise ServerError(
                        f"the server at {server.base_url} stopped answering ({what}, after {attempt + 1} tries over "
                        f"{time.monotonic() - start:.0f} s){log_tail(server.server_log)}"
                    ) from None
            self.retried.add(what)
            await asyncio.sleep(retry.backoff(attempt, self.cfg.retry_delay, unanswered))
            attempt += 1

    async def _clamped_to(self, asked: int | None, fit: dict, answer: Answer) -> int | None:
        """The max_tokens an answered request was fitted to, or None when it got all it asked: what kit asked again
        with, else (a server that cuts the budget itself, as vLLM 0.11+ does) what the window left the prompt."""
        if fit:
            if fit["max_tokens"] is not None:
                return fit["max_tokens"]
        elif asked is None or answer.prompt_tokens is None:
            return None
        served = (self.cfg.server.base_url, self.cfg.server.model)
        if served not in _WINDOWS:  # asked once per server and model in this process, not once per unit
            if self._window is None:
                self._window = asyncio.ensure_future(asyncio.to_thread(served_window, *served, self.api_key))
            _WINDOWS[served] = await self._window
        window = _WINDOWS[served]
        if window is None or answer.prompt_tokens is None:
            return answer.tokens if fit else None
        room = window - answer.prompt_tokens
        return room if fit or room < asked else None
