"""Reward-model scoring (`++generation_type=reward`): each input row's prompt (the prompt config's messages) and its
`generation` go as a (user, assistant) conversation to the server's `/pooling` route (vLLM's pooling API; kit's own
reward server for --server_type=transformers answers the same shape); the row comes back with `reward_model_score`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pipeline_kit.errors import UserError
from pipeline_kit.inference import retry, unit_files
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.prompts import PromptConfig, split_prefill
from pipeline_kit.inference.refusals import is_transient, refusal, server_message
from pipeline_kit.inference.tasks import check_input_file, input_file_digest, prompt_fields
from pipeline_kit.server_wait import ServerError, log_tail

SCORE_FIELD = "reward_model_score"
RESPONSE_FIELD = "generation"
ROUTE = "/pooling"  # at the server's root, beside /v1


def check_reward_settings(cfg: GenerateConfig) -> None:
    if cfg.code_execution:
        raise UserError(
            "++code_execution=true does not apply to ++generation_type=reward (it scores, it does not generate)."
        )
    if cfg.server.endpoint != "chat":
        raise UserError(
            f"++server.endpoint={cfg.server.endpoint}: reward scoring sends the conversation to {ROUTE}, whose server "
            "applies the model's chat template; drop ++server.endpoint."
        )


def conversation(prompt: PromptConfig, record: dict, line_no: int, input_file: str) -> list[dict]:
    """The prompt config's messages, then the row's response as the assistant turn."""
    if RESPONSE_FIELD not in record:
        raise UserError(
            f"{input_file}: line {line_no} has no '{RESPONSE_FIELD}' (the response to score); reward scoring reads "
            "a generation output, e.g. the output.jsonl of a `kit generate` run."
        )
    response = record[RESPONSE_FIELD]
    if not isinstance(response, str):
        raise UserError(
            f"{input_file}: line {line_no}: '{RESPONSE_FIELD}' is {type(response).__name__}, not text; fix or drop "
            "that line."
        )
    conversation, _ = split_prefill(prompt.messages(record, line_no))  # a generation begins with its prefill
    return [*conversation, {"role": "assistant", "content": response}]


def pooling_url(base_url: str) -> str:
    return base_url.rstrip("/").removesuffix("/v1") + ROUTE


def request_body(model: str, messages: list[dict]) -> dict:
    """The raw score (the head's logit, as transformers returns it): no sigmoid/softmax on top."""
    return {"model": model, "messages": messages, "use_activation": False}


def single_score(answer: dict, url: str) -> float:
    """The one number of a sequence score ([x]); of a per-token output ([[x], [y], ...]) the last token's."""
    try:
        values = answer["data"][0]["data"]
        if values and isinstance(values[0], list):
            values = values[-1]
    except (KeyError, IndexError, TypeError):
        raise ServerError(f"{url} answered without data[0].data: {str(answer)[:200]}") from None
    if len(values) != 1:
        raise UserError(
            f"{url} returned {len(values)} values per conversation, not one score: the model is a classifier with "
            f"{len(values)} labels; serve a reward model (a sequence-classification head with num_labels=1)."
        )
    return float(values[0])


@dataclass
class Score:
    """One conversation's score; `error` when the server refused it (`failed` unless over the context length)."""

    value: float | None
    error: str | None = None
    failed: bool = False

    def fields(self) -> dict:
        return {SCORE_FIELD: self.value, **({"error": self.error} if self.error else {})}


class RewardTask:
    """Reward scoring as a generation type: each row with its `reward_model_score` (rows checked before any request)."""

    input_key = "input_file"
    prompt_key = "prompt_config"
    check_inputs = staticmethod(check_input_file)
    input_digest = staticmethod(input_file_digest)

    @staticmethod
    def done_key_fields(cfg: GenerateConfig) -> dict[str, object]:
        return prompt_fields("prompt_config", cfg.prompt_config)

    def __init__(self, cfg: GenerateConfig):
        from pipeline_kit.inference.prompts import load_prompt_config

        check_reward_settings(cfg)
        prompt = load_prompt_config(cfg.prompt_config)
        self.rows = unit_files.read_input(cfg.input_file, cfg.chunk_id, cfg.num_chunks, cfg.max_samples)
        self.conversations = [conversation(prompt, record, line_no, cfg.input_file) for line_no, record in self.rows]

    @staticmethod
    async def open_model(cfg: GenerateConfig, key: str | None) -> RewardClient:
        return RewardClient(cfg, key)

    async def sample(self, i: int, model) -> dict:
        return {**self.rows[i][1], **(await model.generate(self.conversations[i])).fields()}


class RewardClient:
    """One session for the run's requests; `generate(conversation)` scores one (the unit machinery's request)."""

    def __init__(self, cfg: GenerateConfig, api_key: str | None):
        import aiohttp

        self.cfg = cfg
        self.url = pooling_url(cfg.server.base_url)
        self.headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        connector = retry.pool_connector(cfg.max_concurrent_requests)
        self._session = aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(cfg.request_timeout))
        self._transient = (aiohttp.ClientConnectionError, asyncio.TimeoutError)
        self.retried = retry.Retries()  # requests tried again and why: the job's figures and its log

    async def close(self) -> None:
        await self._session.close()

    async def generate(self, messages: list[dict]) -> Score:
        """One score, retried like a generation request (retry.py)."""
        body = request_body(self.cfg.server.model, messages)
        reach = retry.reach(self.cfg.server.base_url)
        for attempt in range(self.cfg.max_retries + 1):
            unanswered = False
            try:
                async with self._session.post(self.url, json=body, headers=self.headers) as resp:
                    reach.answered()
                    text = await resp.text()
                    if resp.status == 200:
                        return Score(single_score(await resp.json(content_type=None), self.url))
                    if not is_transient(resp.status):
                        return self._refused(resp.status, text)
                    problem = f"HTTP {resp.status}: {text[:200]}"
            except self._transient as e:
                problem = retry.describe(e)
                unanswered = retry.no_answer(e)
                lost = (
                    await retry.gone(reach, self.cfg.server.base_url, self.cfg.server.gone_after)
                    if unanswered
                    else None
                )
                if lost is not None:
                    raise ServerError(
                        f"the server at {self.url} is gone: no request reached it for {lost:.0f} s (last: {problem}); "
                        f"a rerun requests only the missing samples{log_tail(self.cfg.server.server_log)}"
                    ) from None
            if attempt == self.cfg.max_retries:
                raise ServerError(
                    f"the server at {self.url} stopped answering ({problem} after {attempt + 1} tries)"
                    f"{log_tail(self.cfg.server.server_log)}"
                )
            self.retried.add(problem)
            await asyncio.sleep(retry.backoff(attempt, self.cfg.retry_delay, unanswered))
        raise AssertionError("unreachable")

    def _refused(self, status: int, text: str) -> Score:
        """404: no pooling route (a generative model) or another served name: the run stops, as on 401/403. Another
        4xx (e.g. 400 for a conversation longer than the model's context): this row gets no score and an `error`."""
        if status == 404:
            raise UserError(
                f"{self.url} answered 404 ({text.strip()[:150]}): the server has no reward scoring for model "
                f"'{self.cfg.server.model}'; --model must be a reward model (a *ForSequenceClassification with "
                "num_labels=1), which vLLM serves with its pooling runner."
            )
        if 400 <= status < 500:
            error, failed = refusal(status, server_message(text), self.url, self.cfg.server.model)
            return Score(None, error, failed)
        raise ServerError(
            f"{self.url} answered HTTP {status}: {text.strip()[:300]}{log_tail(self.cfg.server.server_log)}"
        )
