"""A budget over the server's context window: the refusals' wordings kit reads (pipeline_kit/inference/context_window.py)
and a run on none whose clamped requests are counted in the job's figures, `kit status` and `kit summarize`. The
client's requests themselves are in test_generate_unit.py (test_a_budget_over_the_window_...)."""

from __future__ import annotations

import json

import pytest
from conftest import problems

from pipeline_kit.inference.context_window import ContextRefusal, fitted, parse_refusal
from pipeline_kit.measurements import stored_figures


@pytest.mark.parametrize(
    "message, window, prompt",
    [
        (  # SGLang
            "Requested token count exceeds the model's maximum context length of 32,768 tokens. You requested a total "
            "of 33000 tokens: 1000 tokens from the input messages and 32000 tokens for the completion.",
            32768,
            1000,
        ),
        (  # vLLM 0.6-0.9, OpenAI
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (1200 in the "
            "messages, 3800 in the completion). Please reduce the length of the messages or completion.",
            4096,
            1200,
        ),
        (
            "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens in the messages",
            4096,
            5000,
        ),
        (  # vLLM 0.10
            "This model's maximum context length is 4096 tokens. However, you requested 4000 output tokens and your "
            "prompt contains 300 input tokens, for a total of 4300 tokens.",
            4096,
            300,
        ),
        (  # vLLM 0.11+, the prompt alone
            "This model's maximum context length is 64 tokens. However, your prompt contains at least 65 input tokens, "
            "which exceeds this limit even without any output tokens.",
            64,
            65,
        ),
        ("The input (9000 tokens) is longer than the model's context length (8192 tokens).", 8192, 9000),  # SGLang
        (
            "'max_tokens=100000 cannot be greater than max_model_len=8192. Please request fewer output tokens.",
            8192,
            None,
        ),
        ("This model's maximum context length is 2048 tokens. However, you requested more.", 2048, None),
    ],
)
def test_each_servers_wording_names_the_window_and_the_prompt(message, window, prompt):
    assert parse_refusal(f"litellm.BadRequestError: OpenAIException - {message}") == ContextRefusal(window, prompt)


def test_what_is_asked_again():
    """Once, with what the window leaves the prompt; never when the prompt alone fills it, when the request asked
    for whatever fits already, or for a message that is no context-length refusal."""
    assert parse_refusal("Error code: 400 - top_k must be a positive integer") is None
    assert fitted(ContextRefusal(4096, 1000), 8000) == {"max_tokens": 3096}
    assert fitted(ContextRefusal(4096, None), 8000) == {"max_tokens": None}  # the server's own "whatever fits"
    assert fitted(ContextRefusal(4096, 4096), 8000) is None
    assert fitted(ContextRefusal(4096, 5000), 8000) is None
    assert fitted(ContextRefusal(4096, 1000), None) is None
    assert fitted(ContextRefusal(4096, 1000), 2000) is None  # it fitted: the refusal is about something else
    assert fitted(None, 8000) is None


def test_clamped_requests_are_counted_in_the_figures_status_and_summary(kit, none_cluster, configs, stub, tmp_path):
    """A 40-token window, max_tokens 30, prompts of 12 tokens ('What is 0+i?'): each request overruns, gets SGLang's
    400 and is asked once more with 28; the job's figures, `kit status --verbose` and `kit summarize` count them."""
    server = stub("--context_limit", "40", "--context_style", "sglang")
    inp, out = problems(tmp_path, 4), tmp_path / "out"
    endpoint = ["--server_type=openai", f"--server_address={server.url}", "--model=stub"]
    args = [*none_cluster, *endpoint, f"--input_file={inp}", f"--output_dir={out}", "--expname=fitted"]
    res = kit("generate", *args, "++inference.tokens_to_generate=30")
    assert res.returncode == 0, res.stdout + res.stderr
    records = [json.loads(line) for line in (out / "output.jsonl").read_text().splitlines()]
    assert [r["clamped_max_tokens"] for r in records] == [28, 28, 28, 28]  # 40 - len("What is 0+i?")
    assert sorted(r["body"]["max_tokens"] for r in server.requests()) == [28] * 4 + [30] * 4

    [figures] = stored_figures(configs.job_dir)
    assert figures.clamped == 4 and figures.retries == 0
    status = kit("status", "--verbose", "fitted", *none_cluster)
    assert status.stdout.rstrip().endswith("0 retries, 4 max_tokens clamped to the context window"), status.stdout

    summary = kit("summarize", str(out))
    assert summary.returncode == 0, summary.stderr
    assert (
        "4 samples were generated with max_tokens clamped to what the context window left the prompt" in summary.stdout
    )
    audit = kit("summarize", str(out), "--audit").stdout
    assert "max_tokens clamped to the context window (clamped_max_tokens): 4 samples, e.g. 0 (output.jsonl)" in audit
