"""GenSelect as a generation type (++generation_type=genselect): the unit's "input records" are the problems of
the runs in ++input_dir, and each sample is one problem's tournament (pipeline_kit.selection.genselect), so chunks,
seeds, resume and .done keys work as for any generation. A problem cut off mid-tournament is asked again."""

from __future__ import annotations

from pipeline_kit.errors import UserError
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.prompts import load_prompt_config
from pipeline_kit.inference.unit_files import chunk_of
from pipeline_kit.selection.genselect import Reply, prompt_messages, select
from pipeline_kit.selection.genselect_runs import read_problems


class GenSelectTask:
    @staticmethod
    async def open_model(cfg: GenerateConfig, key: str | None):
        from pipeline_kit.inference.generate import GenerationModel

        return await GenerationModel.open(cfg, key)

    def __init__(self, cfg: GenerateConfig):
        if cfg.code_execution:
            raise UserError("++generation_type=genselect compares finished solutions; drop ++code_execution.")
        self.prompt = load_prompt_config(cfg.genselect.prompt_config)
        self.rows = chunk_of(read_problems(cfg.input_dir), cfg.chunk_id, cfg.num_chunks)
        for _, solutions in self.rows:  # a field the prompt needs and the records lack fails before any request
            prompt_messages(self.prompt, solutions[:2])
        self.window = cfg.genselect.window
        self.seed = cfg.inference.random_seed if cfg.inference.random_seed is not None else 0

    async def sample(self, i: int, model) -> dict:
        line_no, solutions = self.rows[i]

        async def ask(messages: list[dict]) -> Reply:
            result = await model.generate(messages)
            return Reply(result.text, result.num_generated_tokens, result.error)

        # the shuffle's seed: the unit's seed and the problem's line in the first run (not its chunk position)
        return await select(solutions, self.window, f"{self.seed}:{line_no}", self.prompt, ask)
