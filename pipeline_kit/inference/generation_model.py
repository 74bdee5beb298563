"""What a generation unit's requests go to: the LiteLLM client, or the sandbox's code rounds around it for tool-integrated
reasoning (++code_execution). Opened per unit by GenerateTask (and GenSelect, and Magpie's ClientModel) in the job."""

from __future__ import annotations

from pipeline_kit.inference.client import GenerationClient
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.job_pool import say
from pipeline_kit.inference.prompts import split_prefill
from pipeline_kit.inference.retry import Retries
from pipeline_kit.inference.tir import CodeRunner


class ClientModel:
    """A unit's model whose requests all go to one GenerationClient: the job's figures (retries, clamped) and the
    close are the client's."""

    def __init__(self, client: GenerationClient):
        self.client = client

    @property
    def retried(self) -> Retries:
        """Requests of this unit tried again, and why (the job's figures, the unit's line in the log)."""
        return self.client.retried

    @property
    def clamped(self) -> int:
        """Requests of this unit whose max_tokens was fitted to the context window (the job's figures)."""
        return self.client.clamped

    async def close(self) -> None:
        await self.client.close()


class GenerationModel(ClientModel):
    """The completions of a unit: the LiteLLM client, through the sandbox's code rounds for TIR."""

    def __init__(self, client: GenerationClient, code_runner: CodeRunner | None):
        super().__init__(client)
        self.code_runner = code_runner

    @classmethod
    async def open(cls, cfg: GenerateConfig, key: str | None) -> GenerationModel:

        client = GenerationClient(cfg, key)
        return cls(client, await CodeRunner.start(cfg, client, say) if cfg.code_execution else None)

    async def generate(self, messages: list[dict]):
        """A completion of `messages`; one that ends with an assistant message (a prompt's assistant_prefix) is
        continued from that prefill, and its text begins with it."""
        messages, prefill = split_prefill(messages)
        if self.code_runner is not None:
            return await self.code_runner.generate(messages, prefill)
        result = await self.client.generate(messages, prefix=prefill)
        result.text = prefill + result.text
        return result

    async def close(self) -> None:
        await self.client.close()
        if self.code_runner is not None:
            await self.code_runner.close()
