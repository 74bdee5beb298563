"""Build, offline, a tiny random-init Qwen2-style causal LM and a byte-level BPE tokenizer trained on synthetic math.
Usage: python make_tiny_model.py OUT_DIR   (deterministic; about 10 s on 2 CPU cores; writes a ~2 MB HF folder)"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path

import torch
from tiny_common import (
    ANSWER,
    ENDOFTEXT,
    IM_END,
    IM_START,
    PROBLEMS,
    SPECIAL_TOKENS,
    SYSTEMS,
    prompt_configs,
    random_question,
    save_tokenizer,
)
from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM
from transformers.utils import logging as hf_logging

SEED = 1234
VOCAB_TARGET = 1024  # an upper bound: the small corpus yields fewer merges
# word pieces: contractions, letters with one leading non-letter, ONE digit, punctuation runs, whitespace
SPLIT_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def corpus(rng: random.Random, n: int = 20000) -> list[str]:
    """Text for the BPE trainer: the training questions plus generic arithmetic/LaTeX so other numbers tokenize too."""
    configs = prompt_configs()
    lines = [*SYSTEMS, *(user for _, user in configs.values())]
    for _ in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        question = random_question(rng, a, b, configs)
        if isinstance(question, list):
            question = "\n".join(f"{m['role']}\n{m['content']}" for m in question) + "\nassistant\n"
        lines.append(question + ANSWER.format(c=a + b))
        x, y = rng.randint(0, 9999), rng.randint(1, 999)
        op, value = rng.choice([("+", x + y), ("-", x - y), ("*", x * y), ("/", x // y)])
        lines.append(rng.choice(PROBLEMS).replace("+", f" {op} ").format(a=x, b=y))
        lines.append(f"The answer is $\\boxed{{{value}}}$. \\frac{{{x}}}{{{y}}} = {x / y:.3f}, x^2 (a) [b] {{c}}; ok!")
    return lines


def train_tokenizer(lines: list[str]) -> PreTrainedTokenizerFast:
    bpe = Tokenizer(models.BPE())
    # The Qwen2 pipeline: AutoTokenizer maps model_type qwen2 to Qwen2Tokenizer, which re-imposes it on load,
    # so the merges must be learned under it too. \p{N} alone makes every digit its own token (a+b is learnable).
    bpe.normalizer = normalizers.NFC()
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_TARGET,
        min_frequency=2,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(lines, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token=IM_END,
        pad_token=ENDOFTEXT,
        additional_special_tokens=[IM_START],
        model_max_length=512,
        clean_up_tokenization_spaces=False,
    )


def build_model(tokenizer: PreTrainedTokenizerFast) -> Qwen2ForCausalLM:
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=384,
        num_hidden_layers=2,
        num_attention_heads=2,  # head_dim 128/2 = 64: the smallest size vLLM's CPU attention kernels take
        num_key_value_heads=1,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=ids[IM_END],
        pad_token_id=ids[ENDOFTEXT],
        dtype="float32",
    )
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=[ids[IM_END], ids[ENDOFTEXT]],
        pad_token_id=ids[ENDOFTEXT],
        do_sample=False,
    )
    return model


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(f"usage: {sys.argv[0]} OUT_DIR")
    out = Path(sys.argv[1])
    t0 = time.time()
    rng = random.Random(SEED)
    torch.manual_seed(SEED)
    hf_logging.disable_progress_bar()
    tokenizer = train_tokenizer(corpus(rng))
    t_tok = time.time() - t0
    model = build_model(tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    save_tokenizer(tokenizer, out)
    params = sum(p.numel() for p in model.parameters())
    print(
        f"tiny model in {out}: vocab {len(tokenizer)}, {params} parameters, tokenizer {t_tok:.1f}s, total {time.time() - t0:.1f}s"
    )
    print("tokens of 'Q: 12+7=? A: \\boxed{19}':", tokenizer.tokenize("Q: 12+7=? A: \\boxed{19}"))


if __name__ == "__main__":
    main()
