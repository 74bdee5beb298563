"""Magpie-style problem writing (`++generation_type=magpie`): for each input row, the chat template rendered for
[system (the row's `system`), user] and cut where the user's text would start (the pre-query prefix) goes to the
text endpoint; the model, an aligned chat model, writes a user query there. The row comes back with that query as
`problem` (stripped; possibly empty) and the request's `seed`, distinct per row so that rows differ."""

from __future__ import annotations

import hashlib

from pipeline_kit.errors import UserError
from pipeline_kit.inference import unit_files
from pipeline_kit.inference.chat_template import ChatTemplate
from pipeline_kit.inference.client import GenerationClient, start_litellm_import
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.generation_model import ClientModel
from pipeline_kit.inference.tasks import check_input_file, input_file_digest

SYSTEM_FIELD = "system"
PROBLEM_FIELD = "problem"


def check_magpie_settings(cfg: GenerateConfig) -> None:
    if cfg.code_execution:
        raise UserError("++code_execution=true does not apply to ++generation_type=magpie (it writes problems).")
    if cfg.server.endpoint != "text":
        raise UserError(
            "++generation_type=magpie sends the chat template's pre-query prefix to the text endpoint; add "
            "++server.endpoint=text (and ++server.chat_template=<model folder> when the server's name is not one)."
        )


def row_seed(base: int | None, line_no: int) -> int:
    """The seed of the row on input line `line_no` for the unit's seed `base`: distinct per row and per unit seed
    (31 bits: every server takes it)."""
    digest = hashlib.sha256(f"{base or 0}:{line_no}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1


class MagpieModel(ClientModel):
    """The unit's text-completion client; `generate((prompt, stop, seed))` is one request."""

    @classmethod
    async def open(cls, cfg: GenerateConfig, key: str | None) -> MagpieModel:

        return cls(GenerationClient(cfg, key))

    async def generate(self, request: tuple[str, list[str], int]):
        return await self.client.complete_text(*request)


class MagpieTask:
    """Problem writing: the model's own user query per input row; its prompt is the chat template (in the key as
    server.chat_template / server.model), so no prompt config is read."""

    input_key = "input_file"
    prompt_key = None
    check_inputs = staticmethod(check_input_file)
    input_digest = staticmethod(input_file_digest)
    open_model = staticmethod(MagpieModel.open)
    preload = staticmethod(start_litellm_import)

    @staticmethod
    def done_key_fields(cfg: GenerateConfig) -> dict[str, object]:
        return {}

    def __init__(self, cfg: GenerateConfig):

        check_magpie_settings(cfg)
        template = ChatTemplate(cfg.server.chat_template or cfg.server.model)
        self.rows = unit_files.read_input(cfg.input_file, cfg.chunk_id, cfg.num_chunks, cfg.max_samples)
        self.requests = []
        for line_no, record in self.rows:  # every row checked before any request
            system = record.get(SYSTEM_FIELD)
            if not isinstance(system, str):
                raise UserError(
                    f"{cfg.input_file}: line {line_no} has no '{SYSTEM_FIELD}' text (the system prompt the problem is "
                    f'written under); ++generation_type=magpie reads rows like {{"id": ..., "system": ...}}.'
                )
            prefix, end_of_turn = template.pre_query(system)
            self.requests.append((prefix, [end_of_turn], row_seed(cfg.inference.random_seed, line_no)))

    async def sample(self, i: int, model) -> dict:
        seed = self.requests[i][2]
        result = await model.generate(self.requests[i])
        return {**self.rows[i][1], PROBLEM_FIELD: result.text.strip(), "seed": seed, **result.sample_fields()}
