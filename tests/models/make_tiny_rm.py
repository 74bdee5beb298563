"""Build, offline, a tiny reward model: the trained tiny model's body and tokenizer under a scalar head
(AutoModelForSequenceClassification, num_labels=1; the head is random with a fixed seed). Its scores mean nothing,
but they are deterministic, so a server's score for a (prompt, response) pair can be checked against transformers'.
Usage: python make_tiny_rm.py TINY_MODEL_DIR OUT_DIR   (about 2 s; writes a ~2 MB HF folder)"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from tiny_common import save_tokenizer
from transformers import AutoModelForSequenceClassification, AutoTokenizer
from transformers.utils import logging as hf_logging

SEED = 1234
HEAD_STD = 0.1  # scores of a few units, clearly different between pairs


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(f"usage: {sys.argv[0]} TINY_MODEL_DIR OUT_DIR")
    src, out = sys.argv[1], Path(sys.argv[2])
    hf_logging.set_verbosity_error()  # "score.weight newly initialized" is the point here
    hf_logging.disable_progress_bar()
    tokenizer = AutoTokenizer.from_pretrained(src)
    model = AutoModelForSequenceClassification.from_pretrained(src, num_labels=1, dtype=torch.float32)
    torch.manual_seed(SEED)
    with torch.no_grad():
        model.score.weight.normal_(0.0, HEAD_STD)
    model.config.pad_token_id = tokenizer.pad_token_id
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    save_tokenizer(tokenizer, out)
    print(f"tiny reward model in {out}: {type(model).__name__}, head {tuple(model.score.weight.shape)}")


if __name__ == "__main__":
    main()
