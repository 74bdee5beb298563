"""What a generation type is: one small Protocol that the script (generate.py), the `.done` ledger (done_key.py) and
the job builder (jobs/generate.py) ask, so that none of them tests a type's name. The types are named in
registry.py, whose `task_class` resolves a name (or a user's `package.module:Class`) to its class."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from pipeline_kit.content_digest import file_digest
from pipeline_kit.errors import UserError

if TYPE_CHECKING:
    from pipeline_kit.inference.config import GenerateConfig


class GenerationTask(Protocol):
    """One unit's work of a generation type. Class-level (asked at submission too, without reading inputs):
    `input_key`, `prompt_key`, `check_inputs`, `input_digest`, `done_key_fields`. Per unit: the instance built from
    the config holds `rows` (one per sample), `open_model` opens what the requests go to, `sample(i, model)` makes
    row i's output record."""

    input_key: ClassVar[str]  # the ++key of what a unit reads: input_file (a JSONL) or input_dir (a folder)
    prompt_key: ClassVar[str | None]  # the ++key of its prompt config (checked at submission); None: it uses none

    @staticmethod
    def check_inputs(cfg: GenerateConfig) -> None:
        """The input keys this type needs and refuses (each problem one UserError naming the key)."""

    @staticmethod
    def input_digest(cfg: GenerateConfig) -> str:
        """The content digest of what a unit reads: the `<input_key> content` field of its .done key."""

    @staticmethod
    def done_key_fields(cfg: GenerateConfig) -> dict[str, object]:
        """The type's own fields of the .done key (its prompt and settings), beside the ledger's common ones (server,
        model, input content, chunk layout, inference settings)."""

    rows: list[tuple[int, Any]]  # (input line, what a sample is made from)

    def __init__(self, cfg: GenerateConfig) -> None: ...

    @staticmethod
    async def open_model(cfg: GenerateConfig, api_key: str | None) -> Any:
        """What `sample` sends requests to: `generate(request)` and `close()`."""

    # Optional, `preload(say)`: start in the background what open_model will import (LiteLLM's ~2 s of CPU), called
    # once per job just before the server is waited for, so that the first request waits only for the server; `say`
    # takes one line for the job's log. A type without it imports what it needs in open_model.

    async def sample(self, i: int, model: Any) -> dict:
        """Row i's output record."""


# ---- the parts the file-reading types share


def check_input_file(cfg: GenerateConfig) -> None:
    """A type that reads ++input_file: it is required, and ++input_dir (GenSelect's input) is refused."""
    if cfg.input_dir is not None:
        raise UserError("generation: ++input_dir is GenSelect's input; add ++generation_type=genselect or drop it.")
    if cfg.input_file is None:
        raise UserError("generation: ++input_file is required; pass it (e.g. ++input_file=...).")


def input_file_digest(cfg: GenerateConfig) -> str:
    return file_digest(cfg.input_file, "++input_file=")


def prompt_fields(key: str, name: str) -> dict[str, object]:
    """A prompt config in the .done key: its name (as `key`) and its file's content."""
    from pipeline_kit.inference.prompts import resolve_prompt_path

    return {key: name, f"{key} content": file_digest(resolve_prompt_path(name))}
