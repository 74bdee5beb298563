"""The `generate` generation type (registry.py): one completion per input record. Light to import, since
submission asks its class-level answers (tasks.py); what sends requests is imported when a unit opens its model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pipeline_kit.content_digest import file_digest
from pipeline_kit.errors import UserError
from pipeline_kit.inference import unit_files
from pipeline_kit.inference.prompts import load_prompt_config
from pipeline_kit.inference.reasoning import ReasoningSettings
from pipeline_kit.inference.tasks import check_input_file, input_file_digest, prompt_fields
from pipeline_kit.inference.tir_settings import TIR_KEYS, check_code_settings, code_tags_path

if TYPE_CHECKING:
    from pipeline_kit.inference.config import GenerateConfig
    from pipeline_kit.inference.generation_model import GenerationModel


class GenerateTask:
    """A generation: one completion per input record, the record's fields plus the completion's; with
    ++code_execution, tool-integrated reasoning (tir.py: code rounds in the sandbox)."""

    input_key = "input_file"
    prompt_key = "prompt_config"
    check_inputs = staticmethod(check_input_file)
    input_digest = staticmethod(input_file_digest)

    @staticmethod
    async def open_model(cfg: GenerateConfig, key: str | None) -> GenerationModel:
        # lazy: the client, the sandbox client and asyncio stay out of submission (kit plan, kit generate)
        from pipeline_kit.inference.generation_model import GenerationModel

        return await GenerationModel.open(cfg, key)

    @staticmethod
    def preload(say) -> None:
        from pipeline_kit.inference.client import start_litellm_import  # lazy: as in open_model

        start_litellm_import(say)

    @staticmethod
    def done_key_fields(cfg: GenerateConfig) -> dict[str, object]:
        fields = prompt_fields("prompt_config", cfg.prompt_config)
        if cfg.code_execution:
            fields.update({k: getattr(cfg, k) for k in TIR_KEYS})
            fields["code_tags content"] = file_digest(code_tags_path(cfg.code_tags))
        return fields

    def __init__(self, cfg: GenerateConfig):
        check_code_settings(cfg)
        prompt = load_prompt_config(cfg.prompt_config)
        self.rows = unit_files.read_input(cfg.input_file, cfg.chunk_id, cfg.num_chunks, cfg.max_samples)
        self.key = output_key(cfg, self.rows)
        self.messages = [prompt.messages(record, line_no) for line_no, record in self.rows]  # fail before requests
        self.reasoning = ReasoningSettings.of(cfg)

    async def sample(self, i: int, model) -> dict:
        result = await model.generate(self.messages[i])
        text, thinking = self.reasoning.apply(result)
        stats = result.sample_fields() | thinking
        if self.key != DEFAULT_KEY:
            stats = {f"{self.key}_{name}": value for name, value in stats.items()}
        return {**self.rows[i][1], self.key: text, **stats}


DEFAULT_KEY = "generation"


def output_key(cfg: GenerateConfig, rows: list[tuple[int, dict]]) -> str:
    """The field a sample's text goes to: ++generation_key, else `generation`, which an input record must not
    hold already (an earlier stage's solution would be lost without a word)."""
    if cfg.generation_key is not None:
        return cfg.generation_key
    line = next((line_no for line_no, record in rows if DEFAULT_KEY in record), None)
    if line is not None:
        raise UserError(
            f"{cfg.input_file}:{line}: the record already holds '{DEFAULT_KEY}' (an earlier stage's); give "
            f"++generation_key=NAME to write this stage's as NAME and keep it, or ++generation_key={DEFAULT_KEY} to "
            "replace it."
        )
    return DEFAULT_KEY
