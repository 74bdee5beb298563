"""A reasoning model end to end on real parts: the tiny model taught to think first (tests/services/models_up.sh's
tiny-think: "<think>Add 3 and 4.</think>" then \\boxed{7}, its tokenizer holding both tags), served by the CPU
vLLM with `--reasoning-parser deepseek_r1` and by `transformers serve` with kit's own split (++parse_reasoning)."""

from __future__ import annotations

import json

import pytest
from conftest import SERVICES, VLLM_ARGS, cluster_yaml, need, rows

PROBLEMS = 12


def eval_records(out) -> list[dict]:
    return rows(out / "eval-results" / "arith" / "output.jsonl")


def split_of(record: dict) -> tuple[str, str, bool]:
    return record["reasoning_content"].strip(), record["generation"].strip(), record["finished_reasoning"]


@pytest.mark.models
def test_a_reasoning_model_split_by_vllms_parser_and_by_kit_alike_and_a_cut_trace_has_no_answer(kit, configs, tmp_path):
    """`kit eval` on arith (the first 12 problems) against vLLM with the deepseek_r1 parser: each record keeps the
    trace and the answer apart, with the server's count of thinking tokens; the answers are right. With 4 tokens the
    traces never end: no answer, and `kit summarize` counts them as truncated_reasoning. The same eval on `transformers
    serve` with ++parse_reasoning=True gives the same split, record by record: on its text endpoint (kit renders the
    chat template), where kit itself cuts the text at </think> (on the chat endpoint LiteLLM would split it first)."""
    from foreground_server import ForegroundServer

    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv (tests/services/models_up.sh)")
    need("KIT_TEST_TINY_THINK", "the reasoning tiny model (tests/services/models_up.sh)")
    model = SERVICES["KIT_TEST_TINY_THINK"]
    vllm = configs("vllm", cluster_yaml("none", SERVICES["KIT_TEST_VLLM_PYTHON"]))
    hf = configs("hf", cluster_yaml("none", SERVICES["KIT_TEST_HF_PYTHON"]))
    data = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data}").returncode == 0
    common = ["--benchmarks=arith", f"--data_dir={data}", f"++max_samples={PROBLEMS}", "++max_concurrent_requests=4"]
    parser = f"{VLLM_ARGS} --reasoning-parser deepseek_r1"
    server = ForegroundServer(tmp_path, "--cluster=vllm", f"--config_dir={vllm}", "--server_type=vllm",
                              f"--model={model}", parser, timeout=480)  # fmt: skip
    try:
        at = ["--cluster=vllm", f"--config_dir={vllm}", "--server_type=vllm", f"--server_address={server.url}"]
        for name, budget in (("parsed", 40), ("cut", 4)):
            res = kit("eval", *at, f"--model={model}", f"--output_dir={tmp_path / name}", *common,
                      f"++inference.tokens_to_generate={budget}", f"--expname={name}", timeout=600)  # fmt: skip
            assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    finally:
        assert server.interrupt() == 130

    parsed = eval_records(tmp_path / "parsed")
    assert len(parsed) == PROBLEMS
    assert all(r["finished_reasoning"] and "</think>" not in r["generation"] for r in parsed), parsed
    assert all(r.get("reasoning_tokens_estimated") is None for r in parsed)  # vLLM counted the thinking tokens
    assert all(r["num_reasoning_tokens"] + r["num_answer_tokens"] == r["num_generated_tokens"] for r in parsed)
    assert sum(r["symbolic_correct"] for r in parsed) >= PROBLEMS * 0.5, [split_of(r) for r in parsed]
    metrics = json.loads((tmp_path / "parsed" / "metrics.json").read_text())["arith"]
    assert metrics["reasoning"]["truncated_reasoning"] == 0 and metrics["reasoning"]["samples"] == PROBLEMS

    cut = eval_records(tmp_path / "cut")
    assert all(r["generation"] == "" and not r["finished_reasoning"] for r in cut), cut
    assert not any(r["symbolic_correct"] for r in cut) and all(r["predicted_answer"] is None for r in cut)
    summary = json.loads((tmp_path / "cut" / "metrics.json").read_text())["arith"]
    assert summary["reasoning"]["truncated_reasoning"] == PROBLEMS and summary["greedy"]["no_answer"] == 100

    res = kit("eval", "--cluster=hf", f"--config_dir={hf}", "--server_type=transformers", f"--model={model}",
              f"--output_dir={tmp_path / 'kit-split'}", *common, "++inference.tokens_to_generate=40",
              "++parse_reasoning=True", "++server.endpoint=text", "--expname=kit-split", timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-2000:]
    by_kit = eval_records(tmp_path / "kit-split")
    assert [split_of(r) for r in by_kit] == [split_of(r) for r in parsed]
    # kit counted the thinking with the model's tokenizer.json: exact, not estimated. vLLM counts the tokens inside
    # the tags, kit the text before the answer, tags included: the same generation and total, 2 tokens apart
    assert all(r.get("reasoning_tokens_estimated") is None for r in by_kit)
    assert [r["num_generated_tokens"] for r in by_kit] == [r["num_generated_tokens"] for r in parsed]
    gaps = [k["num_reasoning_tokens"] - v["num_reasoning_tokens"] for k, v in zip(by_kit, parsed, strict=True)]
    assert gaps == [2] * PROBLEMS, gaps
