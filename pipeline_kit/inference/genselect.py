"""GenSelect as a generation type (++generation_type=genselect): the unit's "input records" are the problems of
the runs in ++input_dir, and each sample is one problem's tournament (pipeline_kit.selection.genselect), so chunks,
seeds, resume and .done keys work as for any generation. A problem cut off mid-tournament is asked again."""

from __future__ import annotations

from pipeline_kit.errors import UserError
from pipeline_kit.inference.client import start_litellm_import
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.prompts import PromptConfig, load_prompt_config
from pipeline_kit.inference.tasks import prompt_fields
from pipeline_kit.inference.unit_files import chunk_of
from pipeline_kit.selection.genselect import Reply, Solution, select
from pipeline_kit.selection.genselect_runs import read_problems, runs_digest


def solution_text(record: dict) -> str:
    """The part of a generation the judge reads: after the last </think> (a reasoning model's summary), stripped."""
    return record["generation"].split("</think>")[-1].strip()


def prompt_messages(prompt: PromptConfig, solutions: list[Solution]) -> list[dict]:
    """A window's prompt: the problem's own fields (from the first solution's record) plus {solutions} ("Solution
    0:" ... blocks), {num_solutions} and {max_index}."""
    block = "\n\n".join(f"Solution {i}:\n{solution_text(s.record)}" for i, s in enumerate(solutions))
    values = {**solutions[0].record, "solutions": block, "num_solutions": len(solutions)}
    return prompt.messages({**values, "max_index": len(solutions) - 1})


class GenSelectTask:
    """One tournament per problem of the runs in ++input_dir (their records less grading's fields are its input)."""

    input_key = "input_dir"
    prompt_key = "genselect.prompt_config"

    @staticmethod
    def check_inputs(cfg: GenerateConfig) -> None:
        if cfg.input_dir is None:
            raise UserError(
                "generation: ++generation_type=genselect needs ++input_dir (the folder of output-rs*.jsonl)."
            )
        if cfg.genselect.window < 2:
            raise UserError(f"++genselect.window={cfg.genselect.window}: a window compares at least 2 solutions.")

    @staticmethod
    def input_digest(cfg: GenerateConfig) -> str:
        return runs_digest(cfg.input_dir)

    @staticmethod
    def done_key_fields(cfg: GenerateConfig) -> dict[str, object]:
        return {
            **prompt_fields("genselect.prompt_config", cfg.genselect.prompt_config),
            "genselect.window": cfg.genselect.window,
        }

    @staticmethod
    async def open_model(cfg: GenerateConfig, key: str | None):
        from pipeline_kit.inference.generation_model import GenerationModel

        return await GenerationModel.open(cfg, key)

    preload = staticmethod(start_litellm_import)

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

        async def ask(window: list[Solution]) -> Reply:
            result = await model.generate(prompt_messages(self.prompt, window))
            return Reply(result.text, result.num_generated_tokens, result.error)

        # the shuffle's seed: the unit's seed and the problem's line in the first run (not its chunk position)
        return await select(solutions, self.window, f"{self.seed}:{line_no}", ask)
