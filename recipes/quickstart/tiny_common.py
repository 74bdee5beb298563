"""Shared by make_tiny_model.py and train_tiny.py: the tiny model's special tokens, its ChatML template, the
addition-question phrasings (incl. the repo's prompts/generic/*.yaml wording) and tokenizer saving."""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PROMPT_DIR = REPO / "prompts" / "generic"

ENDOFTEXT, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END]

# ChatML, the Qwen layout. The whitespace control makes it render the same with and without
# trim_blocks/lstrip_blocks (Hugging Face, vLLM and the kit client all turn both on).
CHAT_TEMPLATE = """{%- for message in messages %}
{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}
{%- endfor %}
{%- if add_generation_prompt %}
{{- '<|im_start|>assistant\\n' }}
{%- endif %}"""

# How an addition question may be phrased: the {problem} of a prompt config, the user message, or a raw prompt.
PROBLEMS = [
    "Q: {a}+{b}=?",
    "{a}+{b}=?",
    "{a} + {b} = ?",
    "What is {a}+{b}?",
    "What is {a} + {b}?",
    "Compute {a}+{b}.",
    "Add {a} and {b}.",
]
SYSTEMS = [
    "You are a helpful assistant.",
    "You are a careful math tutor.",
    "Answer with the final result in \\boxed{}.",
    "Be concise.",
]
RAW_PROMPT = "Q: {a}+{b}=? A: "  # the canonical text-completion prompt
ANSWER = "\\boxed{{{c}}}"
# the reasoning variant (train_tiny.py --think): a trace in <think>...</think>, then the answer, as DeepSeek-R1 writes
THINK_START, THINK_END = "<think>", "</think>"
THINK_ANSWER = THINK_START + "Add {a} and {b}." + THINK_END + "\n" + ANSWER


def prompt_configs() -> dict[str, tuple[str, str]]:
    """{name: (system, user)} for the shipped generic prompt configs, e.g. generic/math."""
    out = {}
    for path in sorted(PROMPT_DIR.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        system, user = data.get("system") or "", data["user"]
        fields = {name for text in (system, user) for _, name, _, _ in string.Formatter().parse(text) if name}
        if fields == {"problem"}:  # a later stage's prompt (generic/verify also needs `generation`) is not trained on
            out[f"generic/{path.stem}"] = (system, user)
    if not out:
        raise SystemExit(f"no prompt configs (*.yaml) in {PROMPT_DIR}")
    return out


def config_messages(config: tuple[str, str], problem: str) -> list[dict]:
    """Messages the kit client builds from a prompt config (same str.format rules as pipeline_kit)."""
    system, user = config
    messages = [{"role": "system", "content": system.format(problem=problem)}] if system else []
    return messages + [{"role": "user", "content": user.format(problem=problem)}]


def random_question(rng: random.Random, a: int, b: int, configs: dict) -> str | list[dict]:
    """One training question for a+b: a raw completion prompt (str) or chat messages (list)."""
    if rng.random() < 0.3:
        return RAW_PROMPT.format(a=a, b=b)
    problem = rng.choice(PROBLEMS).format(a=a, b=b)
    roll = rng.random()
    if roll < 0.45:
        messages = config_messages(rng.choice(list(configs.values())), problem)
    else:
        messages = [{"role": "user", "content": problem}]
    if roll > 0.8 and messages[0]["role"] != "system":
        messages.insert(0, {"role": "system", "content": rng.choice(SYSTEMS)})
    return messages


def save_tokenizer(tokenizer, out_dir: str | Path) -> None:
    """save_pretrained, then make sure the template is in both chat_template.jinja and tokenizer_config.json."""
    out = Path(out_dir)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out)
    (out / "chat_template.jinja").write_text(CHAT_TEMPLATE)
    cfg_file = out / "tokenizer_config.json"
    cfg = json.loads(cfg_file.read_text())
    cfg["chat_template"] = CHAT_TEMPLATE
    cfg_file.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")


def train(model, tokenizer, example, steps: int, lr: float, batch: int, log_every: int) -> float:
    """The tiny models' training loop: `steps` AdamW steps (one-cycle learning rate, peak `lr`) on batches of
    `batch` examples from `example()` ((token ids, labels), labels -100 off the answer); returns its seconds."""
    import time

    import torch

    def collate(examples: list[tuple[list[int], list[int]]]) -> dict:
        width = max(len(ids) for ids, _ in examples)
        ids = torch.full((len(examples), width), tokenizer.pad_token_id)
        labels = torch.full((len(examples), width), -100)
        mask = torch.zeros((len(examples), width), dtype=torch.long)
        for row, (x, y) in enumerate(examples):
            ids[row, : len(x)], labels[row, : len(y)], mask[row, : len(x)] = torch.tensor(x), torch.tensor(y), 1
        return {"input_ids": ids, "labels": labels, "attention_mask": mask}

    t0 = time.time()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=lr, total_steps=steps, pct_start=0.1)
    model.train()
    for step in range(1, steps + 1):
        loss = model(**collate([example() for _ in range(batch)])).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        if step % log_every == 0 or step == steps:
            print(f"step {step}/{steps}  loss {loss.item():.4f}  {time.time() - t0:.1f}s", flush=True)
    return time.time() - t0
