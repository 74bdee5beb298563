"""`kit prepare_sft_data` and `kit prepare_rl_data`: training JSONL from generation outputs or problem files,
filtered, deduplicated, decontaminated against the benchmarks and mixed by weight (pipeline_kit.training.data)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

Opt = typer.Option

DECONTAMINATE_HELP = "Benchmarks to decontaminate against: NAME,NAME or 'all' (default: all prepared ones)."
NO_DECONTAMINATE_HELP = "Skip decontamination (no report is written)."
NGRAM_HELP = "Word n-gram length of decontamination (a shorter problem is compared whole)."
REASONING_HELP = (
    "keep|drop: a sample whose thinking was split from its answer (reasoning_content) trains on the start string, "
    "the trace, the end string and the answer (keep), or on the answer alone (drop)."
)
DATA_DIR_HELP = "Where the benchmarks were prepared (`kit prepare_data --data_dir`; default: the registry folder)."


def register(app: typer.Typer) -> None:
    @app.command(
        name="prepare_sft_data",
        help="SFT JSONL from graded generation outputs: correct, deduplicated, length-capped, decontaminated, mixed.",
    )
    def prepare_sft_data(
        input_dir: Annotated[
            list[Path], Opt("--input_dir", help="Folder of output*.jsonl (repeat the flag for several sources).")
        ],
        output_file: Annotated[Path, Opt("--output_file", help="The SFT JSONL to write.")],
        weights: Annotated[
            str | None, Opt("--weights", help="One weight per --input_dir, e.g. 1,0.5 (w keeps round(w*n) records).")
        ] = None,
        max_length: Annotated[
            int | None, Opt("--max_length", help="Drop generations longer than this many characters.")
        ] = None,
        keep_incorrect: Annotated[bool, Opt("--keep_incorrect", help="Keep records not graded correct.")] = False,
        no_dedupe: Annotated[bool, Opt("--no_dedupe", help="Keep repeated (problem, generation) pairs.")] = False,
        decontaminate: Annotated[str | None, Opt("--decontaminate", help=DECONTAMINATE_HELP)] = None,
        no_decontaminate: Annotated[bool, Opt("--no_decontaminate", help=NO_DECONTAMINATE_HELP)] = False,
        ngram: Annotated[int, Opt("--ngram", help=NGRAM_HELP)] = 13,
        data_dir: Annotated[str | None, Opt("--data_dir", help=DATA_DIR_HELP)] = None,
        seed: Annotated[int, Opt("--seed", help="Seed of the weighted sampling and the final shuffle.")] = 0,
        reasoning: Annotated[str, Opt("--reasoning", help=REASONING_HELP)] = "keep",
        end_reasoning_string: Annotated[
            str, Opt("--end_reasoning_string", help="What closes a kept trace (as ++end_reasoning_string).")
        ] = "</think>",
        start_reasoning_string: Annotated[
            str,
            Opt(
                "--start_reasoning_string",
                help="What opens a kept trace; '' for a model whose chat template puts <think> in the prompt "
                "(DeepSeek-R1).",
            ),
        ] = "<think>",
    ) -> None:
        from pipeline_kit.training.data import prepare_sft

        print(
            prepare_sft(
                input_dir,
                output_file,
                weights=weights,
                max_length=max_length,
                keep_incorrect=keep_incorrect,
                dedupe=not no_dedupe,
                decontaminate=decontaminate,
                do_decontaminate=not no_decontaminate,
                ngram=ngram,
                data_dir=data_dir,
                seed=seed,
                reasoning=reasoning,
                end_reasoning_string=end_reasoning_string,
                start_reasoning_string=start_reasoning_string,
            )
        )

    @app.command(
        name="prepare_rl_data",
        help="RL prompt JSONL (id, problem, expected_answer) from problem files, decontaminated against benchmarks.",
    )
    def prepare_rl_data(
        input_file: Annotated[
            list[Path], Opt("--input_file", help="JSONL with problem and expected_answer (repeat for several).")
        ],
        output_file: Annotated[Path, Opt("--output_file", help="The RL JSONL to write.")],
        decontaminate: Annotated[str | None, Opt("--decontaminate", help=DECONTAMINATE_HELP)] = None,
        no_decontaminate: Annotated[bool, Opt("--no_decontaminate", help=NO_DECONTAMINATE_HELP)] = False,
        ngram: Annotated[int, Opt("--ngram", help=NGRAM_HELP)] = 13,
        data_dir: Annotated[str | None, Opt("--data_dir", help=DATA_DIR_HELP)] = None,
    ) -> None:
        from pipeline_kit.training.data import prepare_rl

        print(
            prepare_rl(
                input_file,
                output_file,
                decontaminate=decontaminate,
                do_decontaminate=not no_decontaminate,
                ngram=ngram,
                data_dir=data_dir,
            )
        )
