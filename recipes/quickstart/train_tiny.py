"""Teach the tiny model (make_tiny_model.py) single-digit addition answered as \\boxed{N}, with a plain-torch loop,
for raw prompts ("Q: 3+4=? A: ") and ChatML chats (bare, with a system message, or the prompts/generic/*.yaml wording).
Usage: python train_tiny.py IN_DIR OUT_DIR [STEPS] [--think]   (deterministic; STEPS default 300: ~35 s on an idle
2-core box). With --think (from the trained model) the tokenizer gains <think> and </think> (plain added tokens,
which a server's detokenizer keeps) and the answer becomes a reasoning model's: "<think>Add 3 and 4.</think>"
then the boxed answer, what vLLM's deepseek_r1 reasoning parser splits."""

from __future__ import annotations

import random
import re
import sys

import torch
from tiny_common import (
    ANSWER,
    RAW_PROMPT,
    THINK_ANSWER,
    THINK_END,
    THINK_START,
    config_messages,
    prompt_configs,
    random_question,
    save_tokenizer,
    train,
)
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

SEED = 1234
BATCH = 32
LR = 2e-3  # 3e-3 is faster but, depending on the seed, sometimes stalls
PAIRS = [(a, b) for a in range(10) for b in range(10)]  # all of them: the end-to-end tests may ask any
MIN_FORMAT, MIN_ACCURACY = 0.95, 0.9  # per evaluated prompt style; below -> exit 1


def main() -> None:
    args = [a for a in sys.argv[1:] if a != "--think"]
    think = len(args) < len(sys.argv) - 1
    if len(args) not in (2, 3):
        sys.exit(f"usage: {sys.argv[0]} IN_DIR OUT_DIR [STEPS] [--think]")
    in_dir, out_dir = args[0], args[1]
    steps = int(args[2]) if len(args) == 3 else 300
    answer_text, answer_pattern = ANSWER, r"\s*\\boxed\{(\d+)\}\s*"
    if think:
        answer_text = THINK_ANSWER
        answer_pattern = rf"\s*{THINK_START}(.*?){THINK_END}\s*\\boxed\{{(\d+)\}}\s*"
    torch.manual_seed(SEED)
    torch.set_num_threads(1)  # bit-reproducible on any machine, and faster than 2 threads on a busy 2-core box
    rng = random.Random(SEED)
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(in_dir)
    model = AutoModelForCausalLM.from_pretrained(in_dir, dtype=torch.float32)
    if think:
        tokenizer.add_tokens([THINK_START, THINK_END])  # not special: `skip_special_tokens` keeps them in the text
        model.resize_token_embeddings(len(tokenizer))
    configs = prompt_configs()

    def prompt_text(question: str | list[dict]) -> str:
        if isinstance(question, str):
            return question
        return tokenizer.apply_chat_template(question, tokenize=False, add_generation_prompt=True)

    def example(a: int, b: int) -> tuple[list[int], list[int]]:
        """Token ids and labels; the loss is on the answer (and the end-of-turn token) only."""
        prompt = tokenizer.encode(prompt_text(random_question(rng, a, b, configs)), add_special_tokens=False)
        answer = tokenizer.encode(answer_text.format(a=a, b=b, c=a + b) + tokenizer.eos_token, add_special_tokens=False)
        return prompt + answer, [-100] * len(prompt) + answer

    t_train = train(model, tokenizer, lambda: example(*rng.choice(PAIRS)), steps, LR, BATCH, log_every=100)

    # greedy generation, as a server would answer, once per prompt style over all 100 questions
    model.eval()
    tokenizer.padding_side = "left"
    math_config = configs.get("generic/math", next(iter(configs.values())))
    styles = {
        "raw 'Q: a+b=? A: '": lambda a, b: RAW_PROMPT.format(a=a, b=b),
        "chat user 'Q: a+b=?'": lambda a, b: [{"role": "user", "content": f"Q: {a}+{b}=?"}],
        "chat system + user": lambda a, b: [
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": f"What is {a}+{b}?"},
        ],
        "chat generic/math": lambda a, b: config_messages(math_config, f"{a}+{b}=?"),
    }
    failed = []
    for name, make in styles.items():
        batch = tokenizer(
            [prompt_text(make(a, b)) for a, b in PAIRS], return_tensors="pt", padding=True, add_special_tokens=False
        )
        with torch.no_grad():
            out = model.generate(**batch, max_new_tokens=24 if think else 10, do_sample=False)
        texts = tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        answers = [re.fullmatch(answer_pattern, t) for t in texts]
        fmt = sum(m is not None for m in answers) / len(PAIRS)
        acc = sum(m is not None and int(m[m.lastindex]) == a + b for m, (a, b) in zip(answers, PAIRS, strict=True))
        acc /= len(PAIRS)
        print(f"{name:24s} format {fmt:4.0%}  accuracy {acc:4.0%}  e.g. {texts[7]!r}")
        if fmt < MIN_FORMAT or acc < MIN_ACCURACY:
            failed.append(name)

    tokenizer.padding_side = "right"
    model.save_pretrained(out_dir)
    save_tokenizer(tokenizer, out_dir)
    print(f"trained {steps} steps (batch {BATCH}) in {t_train:.1f}s; saved to {out_dir}")
    if failed:
        sys.exit(f"too weak on: {', '.join(failed)} (want format >= {MIN_FORMAT:.0%}, accuracy >= {MIN_ACCURACY:.0%})")


if __name__ == "__main__":
    main()
