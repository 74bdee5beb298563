"""`python -m pipeline_kit.training.precheck ++key=value ...` (the TRL trainer's overrides): what a training job runs
before its trainer (and a GRPO vLLM server) starts where kit could not see its paths at submission (a cluster over
SSH): the model folders, every training record, an output folder it can write and the settings of the checkpoints
already there. Exit 2 with one line for a mistake; nothing is written."""

from __future__ import annotations

import sys
from pathlib import Path

from pipeline_kit.errors import UserError
from pipeline_kit.inference.input_check import check_output_dir
from pipeline_kit.training.checkpoints import SETTINGS, check_settings, run_settings, training_done
from pipeline_kit.training.config import check_model_dirs, parse_train_overrides, read_training_records


def check_training_inputs(cfg) -> None:
    """The trainer's own checks before it loads anything (a run whose training is done trains nothing: no check)."""
    if training_done(cfg.output_dir, cfg.max_steps):
        return
    check_model_dirs(cfg)
    check_output_dir(cfg.output_dir, flag="++output_dir")
    read_training_records(cfg.training_data, cfg.algorithm)
    if (Path(cfg.output_dir) / SETTINGS).is_file():
        check_settings(cfg.output_dir, run_settings(cfg), write=False)


def main(argv: list[str] | None = None) -> int:
    try:
        check_training_inputs(parse_train_overrides(list(sys.argv[1:] if argv is None else argv)))
    except UserError as e:
        print(f"kit train: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
