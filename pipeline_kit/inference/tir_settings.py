"""What a tool-integrated-reasoning run is set up with, apart from running it (tir.py): the code tag sets under
prompts/code_tags/, and the checks of the ++code_* settings that submission and the job both make before any request."""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline_kit.errors import UserError
from pipeline_kit.inference.prompts import PROMPTS_DIR
from pipeline_kit.sandbox.limits import LANGUAGES
from pipeline_kit.yaml_files import read_yaml

if TYPE_CHECKING:
    from pipeline_kit.inference.config import GenerateConfig

TIR_KEYS = ("code_tags", "max_code_executions", "code_timeout", "max_code_output_characters", "code_language")

CODE_TAGS_DIR = PROMPTS_DIR / "code_tags"


@dataclass(frozen=True)
class CodeTags:
    code_begin: str
    code_end: str
    code_output_begin: str
    code_output_end: str
    code_format: str = "raw"  # raw | tool_call_json ({"name": ..., "arguments": {"code": ...}} or raw code)

    def last_open_block(self, text: str) -> str | None:
        """The code after the last opening tag, if that block was not closed (generation stopped at its end)."""
        start = text.rfind(self.code_begin)
        if start < 0:
            return None
        body = text[start + len(self.code_begin) :]
        if self.code_end.strip() in body:
            return None
        return self._code(body)

    def _code(self, body: str) -> str:
        if self.code_format == "tool_call_json":
            try:
                call = json.loads(body)
                return call["arguments"]["code"]
            except (ValueError, KeyError, TypeError):
                return body
        return body

    def output_block(self, output: str) -> str:
        if output and not output.endswith("\n"):
            output += "\n"
        return self.code_output_begin + output + self.code_output_end


def code_tags_path(name: str) -> Path:
    """The file of a shipped tag set (`qwen`, `tool_call`) or of the user's YAML."""
    path = Path(name) if name.endswith((".yaml", ".yml")) else CODE_TAGS_DIR / f"{name}.yaml"
    if not path.is_file():
        shipped = ", ".join(sorted(p.stem for p in CODE_TAGS_DIR.glob("*.yaml")))
        raise UserError(f"++code_tags={name}: no such tag set (shipped: {shipped}) nor YAML file.")
    return path


def load_code_tags(name: str) -> CodeTags:
    """A shipped tag set (`qwen`, `tool_call`) or a YAML file with the CodeTags keys."""
    path = code_tags_path(name)
    data = read_yaml(path)
    names = [f.name for f in fields(CodeTags)]
    if not isinstance(data, dict):
        raise UserError(f"{path}: a code tag set is a mapping with keys {', '.join(names)}.")
    unknown = sorted(set(data) - set(names))
    if unknown:
        raise UserError(f"{path}: unknown key '{unknown[0]}'; code tag sets take {', '.join(names)}.")
    missing = [n for n in names[:4] if not isinstance(data.get(n), str) or not data[n]]
    if missing:
        raise UserError(f"{path}: '{missing[0]}' is required (a non-empty string).")
    return CodeTags(**data)


def check_code_settings(cfg: GenerateConfig) -> None:
    """Fail before any request on a TIR setting that cannot work."""

    if not cfg.code_execution:
        return
    if not cfg.sandbox_address:
        raise UserError(
            "++code_execution=true needs a sandbox: pass --with_sandbox to kit generate, or "
            "++sandbox_address=http://host:port of a running `kit start_sandbox`."
        )
    if cfg.code_language not in LANGUAGES:
        raise UserError(f"++code_language={cfg.code_language} is not one of {', '.join(LANGUAGES)}.")
    if cfg.inference.logprobs:
        raise UserError(
            "++inference.logprobs=true with ++code_execution=true: a TIR sample spans several requests and its mean "
            "log-probability is not recorded; drop one of them (SC-TIR votes without weights)."
        )
    for key in ("max_code_executions", "max_code_output_characters"):
        if getattr(cfg, key) < 0:
            raise UserError(f"++{key}={getattr(cfg, key)} must be 0 or more.")
    if cfg.code_timeout <= 0:
        raise UserError(f"++code_timeout={cfg.code_timeout} must be a positive number of seconds.")
    load_code_tags(cfg.code_tags)
