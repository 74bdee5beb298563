"""Tool-integrated reasoning: generate until the closing code tag, run the last code block in the sample's sandbox
session, splice its output in between the output tags, and go on, up to `max_code_executions` rounds.
Tag sets are YAML files under prompts/code_tags/ (`qwen`: ```python / ```output; `tool_call`: <tool_call>)."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import dataclass

from pipeline_kit.inference.client import Completion
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.tir_settings import CodeTags, load_code_tags
from pipeline_kit.sandbox.client import SandboxClient, SandboxError
from pipeline_kit.server_wait import ServerError, wait_until_ready


@dataclass
class CodeSettings:
    max_code_executions: int
    timeout: float
    max_output_characters: int
    language: str
    budget_note: bool


def without_matched_stop(before: str, part: str, tags: CodeTags) -> str:
    """A part that stopped, less the closing code tag at its end when that closes a code block: OpenAI's servers
    (vLLM, SGLang) leave out the stop string they matched, `transformers serve` returns it (less its newline)."""
    for end in (tags.code_end, tags.code_end.rstrip()):
        if end and part.endswith(end) and tags.last_open_block(before + part[: -len(end)]) is not None:
            return part[: -len(end)]
    return part


def format_result(result: dict, timeout: float) -> str:
    """What the model sees of one execution."""
    text = result["stdout"] + result["stderr"]
    if result["status"] == "timeout":
        text += ("\n" if text and not text.endswith("\n") else "") + f"Execution timed out after {timeout:g} s"
    return text


async def generate_with_code(
    client,
    sandbox,
    messages: list[dict],
    tags: CodeTags,
    settings: CodeSettings,
    stop: list[str],
    max_tokens: int,
    prefill: str = "",
):
    """One sample with code rounds, its answer begun with `prefill` (which may open a code block). Returns the
    Completion, with the per-sample code statistics in `extra`."""

    session = uuid.uuid4().hex
    start = time.monotonic()
    text, tokens, rounds, timeouts, exec_time, error, failed = prefill, 0, 0, 0, 0.0, None, False
    last_status = None  # the last code round's status: completed | error | timeout (SC-TIR drops the last two)
    session_used = False
    try:
        while True:
            can_run = rounds < settings.max_code_executions
            stops = [*stop, tags.code_end] if can_run else stop
            part = await client.generate(messages, prefix=text, stop=stops, max_tokens=max_tokens - tokens)
            text += (
                without_matched_stop(text, part.text, tags) if can_run and part.finish_reason == "stop" else part.text
            )
            tokens += part.num_generated_tokens
            if part.error:
                error, failed = part.error, part.failed
                break
            code = tags.last_open_block(text) if can_run and part.finish_reason == "stop" else None
            if code is None or tokens >= max_tokens:
                break
            session_used = True
            try:
                result = await sandbox.execute(
                    code,
                    language=settings.language,
                    session_id=session,
                    timeout=settings.timeout,
                    max_output_characters=settings.max_output_characters,
                )
            except SandboxError as e:
                error = f"code execution failed: {e}"
                break
            rounds += 1
            timeouts += result["status"] == "timeout"
            last_status = result["status"]
            exec_time += result.get("wall_seconds", 0.0)
            text += tags.code_end + tags.output_block(format_result(result, settings.timeout))
            if settings.budget_note:
                left = settings.max_code_executions - rounds
                text += f"You have {left} code execution{'s' if left != 1 else ''} left.\n"
    finally:
        if session_used:  # most samples of a run never write code: no request for them
            try:
                await sandbox.delete_session(session)
            except SandboxError:
                pass
    extra = {
        "code_rounds_executed": rounds,
        "num_code_timeouts": timeouts,
        "code_execution_time": round(exec_time, 4),
        "code_last_status": last_status,
        "code_limit_reached": rounds >= settings.max_code_executions,
    }
    return Completion(text, tokens, time.monotonic() - start, error=error, failed=failed, extra=extra)


class CodeRunner:
    """The sandbox side of a TIR run: the tag set, the settings and one client for every sample."""

    def __init__(self, cfg: GenerateConfig, client, sandbox):
        self.cfg, self.client, self.sandbox = cfg, client, sandbox
        self.tags = load_code_tags(cfg.code_tags)
        self.settings = CodeSettings(
            cfg.max_code_executions,
            cfg.code_timeout,
            cfg.max_code_output_characters,
            cfg.code_language,
            cfg.code_budget_note,
        )

    @classmethod
    async def start(cls, cfg: GenerateConfig, client, say) -> CodeRunner:

        sandbox = SandboxClient(cfg.sandbox_address, max_connections=cfg.max_concurrent_requests)
        waited = await wait_for_sandbox(cfg.sandbox_address, cfg.sandbox_ready_timeout)
        say(f"sandbox {cfg.sandbox_address} ready after {waited:.1f} s")
        return cls(cfg, client, sandbox)

    async def generate(self, messages: list[dict], prefill: str = ""):
        stop, max_tokens = list(self.cfg.inference.stop_phrases), self.cfg.inference.tokens_to_generate
        return await generate_with_code(
            self.client, self.sandbox, messages, self.tags, self.settings, stop, max_tokens, prefill
        )

    async def close(self) -> None:
        await self.sandbox.close()


async def wait_for_sandbox(address: str, timeout: float) -> float:
    """Seconds until the sandbox's GET /health answered (polled in a thread: nothing else runs yet)."""
    try:
        return await asyncio.to_thread(wait_until_ready, address, timeout)
    except ServerError:
        raise ServerError(
            f"the sandbox at {address} was not ready after {timeout:g} s; see its log ({sandbox_log_hint()}), "
            "or raise ++sandbox_ready_timeout"
        ) from None


def sandbox_log_hint() -> str:
    """Where a --with_sandbox job's sandbox logs: beside this command's log, in the job's own log folder."""
    log_dir = os.environ.get("KIT_LOG_DIR")
    if log_dir:
        return f"{log_dir}/{os.environ.get('KIT_LOG_PREFIX', '')}sandbox.log"
    return "<log dir>/<job>/sandbox.log in a --with_sandbox job"
