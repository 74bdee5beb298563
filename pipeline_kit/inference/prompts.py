"""Prompt configs: YAML with a system message, a user template with {field} slots and optional few-shot examples
(`few_shot_examples`, each rendered by `few_shot_template` into the {examples} slot) and an optional
`assistant_prefix`: the start of the model's answer, which it continues. A name like `generic/math` is
looked up in the shipped prompts/ folder; a path names the user's own file. A config is checked whole when it is
loaded (template syntax, every example against the template), so a bad one fails before any request."""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_kit.errors import UserError
from pipeline_kit.grading.modes import check_mode
from pipeline_kit.resources import resource_dir
from pipeline_kit.yaml_files import read_yaml

PROMPTS_DIR = resource_dir("prompts")
KEYS = {"system", "user", "few_shot_template", "few_shot_examples", "extract", "assistant_prefix"}
EXAMPLES = "examples"  # the slot of system or user that the rendered few-shot examples fill
NOT_PROMPTS = ("code_tags", "magpie")  # folders of prompts/ that hold other settings (TIR tags, Magpie's domains)


@dataclass
class PromptConfig:
    source: str
    user: str
    system: str = ""
    few_shot_template: str = ""  # one example, with {field} slots from the example's own keys
    few_shot_examples: list[dict] = field(default_factory=list)
    extract: str | None = None  # how answers to this prompt are extracted for grading (boxed | auto), if it says
    # the start of the assistant's turn ({field} slots as in user), sent as a last assistant message that the model
    # continues (a prefill: e.g. an opening code tag for TIR); the sample's generation begins with it
    assistant_prefix: str = ""
    path: str = ""  # the file read (`source` is its name as users know it, e.g. prompts/generic/math.yaml)

    def fields(self) -> set[str]:
        """The input fields the templates need ({examples} is filled from the few-shot examples)."""
        texts = (("system", self.system), ("user", self.user), ("assistant_prefix", self.assistant_prefix))
        return set().union(*(slots(text, self.source, key) for key, text in texts)) - {EXAMPLES}

    def messages(self, record: dict, line_no: int | None = None) -> list[dict]:
        missing = sorted(n for n in self.fields() if n not in record)
        if missing:
            where = f"input line {line_no}" if line_no is not None else "the input record"
            raise UserError(
                f"prompt config {self.source} needs field '{missing[0]}', which {where} does not have "
                f"(it has: {', '.join(sorted(record)) or 'nothing'}); add it or pick another ++prompt_config."
            )
        values = {**record, EXAMPLES: self._examples()}
        out = [{"role": "system", "content": self.system.format(**values)}] if self.system else []
        out.append({"role": "user", "content": self.user.format(**values)})
        if self.assistant_prefix:
            out.append({"role": "assistant", "content": self.assistant_prefix.format(**values)})
        return out

    def _examples(self) -> str:
        return "".join(self.few_shot_template.format(**ex) for ex in self.few_shot_examples)


def split_prefill(messages: list[dict]) -> tuple[list[dict], str]:
    """(the conversation, the assistant's prefill): a last assistant message (a prompt's `assistant_prefix`) is the
    start of the answer, which the model continues; without one the prefill is ""."""
    if messages and messages[-1]["role"] == "assistant":
        return messages[:-1], messages[-1]["content"]
    return messages, ""


def slots(text: str, source: str, key: str) -> set[str]:
    """The record fields a template names: `{problem}`, also `{problem.x}`, `{problem[0]}` and `{problem:>10}`
    (as str.format reads them); `{{` and `}}` are literal braces. A malformed or positional slot is a UserError."""
    try:
        names = {name for _, name, _, _ in string.Formatter().parse(text) if name is not None}
    except ValueError as e:
        raise UserError(
            f"{source}: '{key}' is not a valid template ({e}); write {{{{ and }}}} for literal braces."
        ) from None
    bases = {re.split(r"[.\[]", name, maxsplit=1)[0] for name in names}
    if any(not base or base.isdigit() for base in bases):
        raise UserError(f"{source}: '{key}' has a positional slot ({{}} or {{0}}); name the field, e.g. {{problem}}.")
    return bases


def check_examples(source: str, template: str, examples: list, system: str, user: str) -> None:
    """The few-shot parts agree: examples, a template to render them, an {examples} slot to put them in, and every
    field the template names in every example (the first gap is named by its index)."""
    used = [key for key, text in (("system", system), ("user", user)) if EXAMPLES in slots(text, source, key)]
    if used and not examples:
        raise UserError(
            f"{source}: '{used[0]}' has an {{{EXAMPLES}}} slot but there are no 'few_shot_examples' to fill it; add a "
            "list of examples (and a 'few_shot_template'), or drop the slot."
        )
    if (examples or template) and not used:
        given = "few_shot_examples" if examples else "few_shot_template"
        raise UserError(
            f"{source}: '{given}' is given but neither 'system' nor 'user' has an {{{EXAMPLES}}} slot, so the "
            "examples would be left out; add {examples} where they go."
        )
    if examples and not template:
        raise UserError(
            f"{source}: 'few_shot_examples' needs a 'few_shot_template' that renders one example from its fields, "
            'e.g. few_shot_template: "Problem: {problem}\\nSolution: {solution}\\n\\n".'
        )
    needed = slots(template, source, "few_shot_template")
    for index, example in enumerate(examples):
        missing = sorted(needed - set(example))
        if missing:
            raise UserError(
                f"{source}: few_shot_examples[{index}] has no '{missing[0]}', which few_shot_template names (example "
                f"{index} has: {', '.join(sorted(map(str, example))) or 'nothing'}); add it to the example or change "
                "the template."
            )


def resolve_prompt_path(name: str) -> Path:
    path = Path(name)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise UserError(
                f"++prompt_config={name}: no such file; give a YAML path or a shipped name like generic/math."
            )
        return path
    shipped = PROMPTS_DIR / f"{name}.yaml"
    if not shipped.is_file():
        names = sorted(
            str(p.relative_to(PROMPTS_DIR).with_suffix(""))
            for p in PROMPTS_DIR.rglob("*.yaml")
            if p.parent.name not in NOT_PROMPTS
        )
        raise UserError(f"++prompt_config={name} is not a shipped prompt ({', '.join(names)}) nor a YAML file.")
    return shipped


def shown_name(name: str, path: Path) -> str:
    """How errors name a prompt config: a shipped one as prompts/<name>.yaml (the job reads a packed copy, whose
    path means nothing to the user), a user's file by its path."""
    return f"prompts/{name}.yaml" if path == PROMPTS_DIR / f"{name}.yaml" else str(path)


def load_prompt_config(name: str) -> PromptConfig:
    path = resolve_prompt_path(name)
    data = read_yaml(path)
    if not isinstance(data, dict) or not isinstance(data.get("user"), str):
        raise UserError(f"{path}: a prompt config needs a 'user' template string.")
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise UserError(f"{path}: unknown key '{unknown[0]}'; prompt configs take {', '.join(sorted(KEYS))}.")
    # the keys besides 'user' are optional
    system, template = data.get("system") or "", data.get("few_shot_template") or ""
    examples, prefix = data.get("few_shot_examples") or [], data.get("assistant_prefix") or ""
    for key, value in (("system", system), ("few_shot_template", template), ("assistant_prefix", prefix)):
        if not isinstance(value, str):
            raise UserError(f"{path}: '{key}' must be a string, got {type(value).__name__}.")
    bad = (
        next((i for i, e in enumerate(examples) if not isinstance(e, dict)), None) if isinstance(examples, list) else -1
    )
    if bad is not None:
        where = "'few_shot_examples'" if bad < 0 else f"few_shot_examples[{bad}]"
        raise UserError(
            f"{path}: {where} must be {'a list of mappings' if bad < 0 else 'a mapping of field: text'}, e.g. "
            "few_shot_examples: [{problem: ..., solution: ...}]."
        )
    check_examples(str(path), template, examples, system, data["user"])
    extract = data.get("extract")  # optional: the benchmark's EXTRACT, else boxed
    if extract is not None:
        check_mode(extract, f"{path}: extract")
    return PromptConfig(
        source=shown_name(name, path),
        user=data["user"],
        system=system,
        few_shot_template=template,
        few_shot_examples=examples,
        extract=extract,
        assistant_prefix=prefix,
        path=str(path),
    )
