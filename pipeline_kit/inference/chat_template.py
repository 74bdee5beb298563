"""Client-side chat templates for the text-completion endpoint: the model's own Jinja template (chat_template.jinja
or tokenizer_config.json), rendered the way Hugging Face tokenizers render it; also its pre-query prefix (Magpie)."""

from __future__ import annotations

import json
from pathlib import Path

from pipeline_kit.errors import UserError

SENTINEL = "\x00kit-user-content\x00"  # stands for the user's text; the prefix is cut right before it


def _special(config: dict, key: str) -> str:
    value = config.get(key)
    return value.get("content", "") if isinstance(value, dict) else (value or "")


class ChatTemplate:
    """`arguments`: more variables for the template (++chat_template_kwargs, reasoning_effort), as a server passes
    them to the model's template."""

    def __init__(self, source: str, arguments: dict | None = None):
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        self.arguments = dict(arguments or {})

        path = Path(source)
        config: dict = {}
        if path.is_dir():
            cfg_file = path / "tokenizer_config.json"
            config = json.loads(cfg_file.read_text()) if cfg_file.exists() else {}
            jinja = path / "chat_template.jinja"
            text = jinja.read_text() if jinja.exists() else config.get("chat_template")
        elif path.is_file():
            text = path.read_text()
        else:
            text = None
        if not isinstance(text, str):
            raise UserError(
                f"no chat template at {source} (looked for chat_template.jinja and tokenizer_config.json); "
                "set ++server.chat_template to the model folder or a .jinja file, or use ++server.endpoint=chat."
            )
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

        def raise_exception(message):
            raise UserError(f"chat template {source}: {message}")

        env.globals["raise_exception"] = raise_exception
        self.template = env.from_string(text)
        self.source = source
        self.bos_token = _special(config, "bos_token")
        self.eos_token = _special(config, "eos_token")

    def render(self, messages: list[dict], add_generation_prompt: bool = True) -> str:
        return self.template.render(
            **self.arguments,
            messages=messages,
            add_generation_prompt=add_generation_prompt,
            bos_token=self.bos_token,
            eos_token=self.eos_token,
        )

    def pre_query(self, system: str) -> tuple[str, str]:
        """Magpie's pre-query prefix: the conversation [system, user] rendered up to where the user's text would
        start, and the end of a user turn (the eos token, else what the template writes right after the user's
        text up to the line's end) to stop the model's made-up query at."""
        messages = [{"role": "user", "content": SENTINEL}]
        rendered = self.render([{"role": "system", "content": system}, *messages] if system else messages, False)
        if rendered.count(SENTINEL) != 1:
            raise UserError(f"chat template {self.source}: the user's text does not appear once in the rendering.")
        prefix, after = rendered.split(SENTINEL)
        end_of_turn = self.eos_token or after.split("\n")[0].strip()
        if not end_of_turn:
            raise UserError(f"chat template {self.source}: no eos_token and nothing marks the end of a user turn.")
        return prefix, end_of_turn
