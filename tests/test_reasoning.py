"""A reasoning model's thinking apart from its answer (pipeline_kit/inference/reasoning.py), against the stub's
reasoning model (--think: `<think>Maybe \\boxed{N+1}? No, recount.</think>` then `\\boxed{N}`, a token a character):
split by kit (++parse_reasoning), by the server's parser (--reasoning_parser, vLLM's `reasoning` field), or by
LiteLLM for a chat answer that opens with <think>; a trace cut by the budget has no answer."""

from __future__ import annotations

import json

import pytest
from conftest import generate, problems, rows

from pipeline_kit.inference.reasoning import ReasoningSettings, record_fields, split_reasoning

TRACE = "Maybe \\boxed{%d}? No, recount."


def base(server, inp, out, *more: str) -> list[str]:
    return [
        f"++input_file={inp}",
        f"++output_file={out}",
        f"++server.base_url={server.url}",
        "++server.model=stub",
        *more,
    ]


def test_a_split_keeps_every_character_and_a_trace_without_its_end_has_no_answer():
    whole = split_reasoning("<think>a</think>b</think>\n\\boxed{2}", "</think>")
    assert (whole.trace, whole.answer, whole.finished) == ("a</think>b", "\n\\boxed{2}", True)  # at the last end
    cut = split_reasoning("<think>Maybe \\boxed{3}? No", "</think>")
    assert (cut.trace, cut.answer, cut.finished) == ("Maybe \\boxed{3}? No", "", False)
    assert split_reasoning("no tags</think>x", "</think>").trace == "no tags"
    fields = record_fields(whole, 40, None)  # no tokenizer: estimated by characters, and said so
    assert fields["num_reasoning_tokens"] + fields["num_answer_tokens"] == 40 and fields["reasoning_tokens_estimated"]
    assert record_fields(whole, 40, 9) == {
        "reasoning_content": "a</think>b",
        "finished_reasoning": True,
        "num_reasoning_tokens": 9,
        "num_answer_tokens": 31,
    }


def test_the_answers_tokens_are_counted_with_the_models_tokenizer(tmp_path):
    """A model folder with tokenizer.json (the `tokenizers` package comes with LiteLLM): exact counts."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    tokenizer = Tokenizer(models.WordLevel({"[UNK]": 0, "x": 1}, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.save(str(tmp_path / "tokenizer.json"))

    class Config:
        parse_reasoning, end_reasoning_string = True, "</think>"
        server = type("Server", (), {"chat_template": None, "model": str(tmp_path)})

    class Done:  # a client Completion without the server's split
        text, num_generated_tokens, reasoning, reasoning_tokens = "<think>a b c</think> x x y", 12, None, None

    answer, fields = ReasoningSettings.of(Config).apply(Done)
    assert answer == " x x y" and fields["num_answer_tokens"] == 3 and fields["num_reasoning_tokens"] == 9
    assert "reasoning_tokens_estimated" not in fields


@pytest.mark.parametrize("split_by", ["kit", "server parser", "litellm"])
def test_records_keep_the_trace_and_the_answer_apart(stub, tmp_path, split_by):
    flags = ["--think", "--reasoning_parser"] if split_by == "server parser" else ["--think"]
    server = stub(*flags)
    inp, out = problems(tmp_path, 3), tmp_path / "out.jsonl"
    parse = ["++parse_reasoning=True"] if split_by == "kit" else []
    text = ["++server.endpoint=text", f"++server.chat_template={chat_template(tmp_path)}"] if split_by == "kit" else []
    res = generate(*base(server, inp, out, *parse, *text))
    assert res.returncode == 0, res.stderr
    for i, record in enumerate(rows(out)):
        assert record["generation"].strip() == f"\\boxed{{{i}}}"
        assert record["reasoning_content"] == TRACE % (i + 1) and record["finished_reasoning"] is True
        total = len(f"<think>{TRACE % (i + 1)}</think>\n\\boxed{{{i}}}")
        assert record["num_generated_tokens"] == total
        assert record["num_reasoning_tokens"] + record["num_answer_tokens"] == total
        # the server counted its split; kit and LiteLLM's split have no tokenizer here: estimated, and said so
        assert record.get("reasoning_tokens_estimated") is (None if split_by == "server parser" else True)
        if split_by == "server parser":
            assert record["num_answer_tokens"] == len(f"\n\\boxed{{{i}}}")


@pytest.mark.parametrize("split_by", ["kit", "server parser"])
def test_a_trace_cut_by_the_budget_has_no_answer_though_it_wrote_a_boxed_guess(kit, stub, tmp_path, split_by):
    """Cut at 24 tokens, each trace holds a boxed guess and no end: no answer, counted as truncated_reasoning by
    `kit summarize` (beside thinking and answer tokens per sample); a full budget answers every problem."""
    server = stub("--think", *(["--reasoning_parser"] if split_by == "server parser" else []))
    inp, results = problems(tmp_path, 2), tmp_path / "results"
    cut, whole = results / "cut" / "output.jsonl", results / "whole" / "output.jsonl"
    res = generate(*base(server, inp, cut, "++parse_reasoning=True", "++inference.tokens_to_generate=24"))
    assert res.returncode == 0, res.stderr
    for record in rows(cut):
        assert "\\boxed{" in record["reasoning_content"]  # the guess is in the trace, cut before its end
        assert record["generation"] == "" and record["finished_reasoning"] is False
        assert record["num_generated_tokens"] == 24 and record["num_answer_tokens"] == 0
    assert generate(*base(server, inp, whole, "++parse_reasoning=True")).returncode == 0

    summary = kit("summarize", str(results))
    assert summary.returncode == 0, summary.stderr
    tables = summary.stdout.split("\n\n")
    cut_table, whole_table = (next(t for t in tables if f" {name} " in t.splitlines()[0]) for name in ("cut", "whole"))
    assert greedy_row(cut_table)[-2:] == ["0.00%", "100.00%"]  # symbolic_correct, no_answer
    assert greedy_row(whole_table)[-2:] == ["100.00%", "0.00%"]
    assert "24 thinking + 0 answer tokens per sample, 2 of 2 traces never reached their end" in cut_table
    assert "0 of 2 traces never reached their end" in whole_table
    metrics = json.loads((results / "metrics.json").read_text())
    assert metrics["cut"]["reasoning"] == {
        "samples": 2,
        "avg_reasoning_tokens": 24,
        "avg_answer_tokens": 0,
        "truncated_reasoning": 2,
    }


def greedy_row(table: str) -> list[str]:
    return [cell.strip() for cell in next(line for line in table.splitlines() if line.startswith("greedy")).split("|")]


def chat_template(tmp_path):
    path = tmp_path / "template.jinja"
    path.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    return path
