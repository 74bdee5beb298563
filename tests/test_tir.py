"""Tool-integrated reasoning through `kit generate --with_sandbox` on none: the model is the scripted
OpenAI-compatible stub (tests/stub_openai_server.py --tir_rounds), which writes a ```python block and then answers
with whatever the ```output block says, so only a real sandbox round trip gives the right answers. TIR against the
real vLLM server (chat and text endpoints, none and Slurm containers) is in test_vllm_tir_magpie.py; the sandbox is
the real server, started by the job."""

from __future__ import annotations

import json

import pytest
from conftest import problems, rows

from pipeline_kit.errors import UserError
from pipeline_kit.inference.tir import format_result
from pipeline_kit.inference.tir_settings import CodeTags, load_code_tags

SESSION_CODE = "x = ({numbers}) if {round} == 0 else x * 2\nprint(x)"  # round 2 needs round 1's x


def generate(kit, none_cluster, stub_server, tmp_path, n: int, *extra: str):
    inp, out = problems(tmp_path, n), tmp_path / "out"
    args = ["--server_type=openai", f"--server_address={stub_server.url}", "--model=stub"]
    res = kit("generate", *none_cluster, *args, f"--input_file={inp}", f"--output_dir={out}", *extra)
    return res, out


def test_code_rounds_run_in_one_session_and_their_output_is_spliced_in(kit, none_cluster, stub, tmp_path):
    server = stub("--tir_rounds", "2", "--tir_code", SESSION_CODE)
    res, out = generate(kit, none_cluster, server, tmp_path, 6, "--with_sandbox", "++code_execution=true")
    assert res.returncode == 0, res.stdout + res.stderr
    got = rows(out / "output.jsonl")
    for r in got:
        i = r["id"]  # the problem is "What is 0+i?"
        assert f"```output\n{i}\n```\n" in r["generation"] and f"```output\n{2 * i}\n```\n" in r["generation"]
        assert r["generation"].endswith(f"\\boxed{{{2 * i}}}.")
        assert (r["code_rounds_executed"], r["num_code_timeouts"]) == (2, 0) and r["code_execution_time"] > 0
        assert (r["code_last_status"], r["code_limit_reached"]) == ("completed", False)  # SC-TIR keeps it
    sent = server.requests()
    assert len(sent) == 3 * 6  # three requests per sample: code, code, answer
    assert all("```\n" in r["body"]["stop"] for r in sent)
    continued = [r["body"] for r in sent if r["body"]["messages"][-1]["role"] == "assistant"]
    assert len(continued) == 12 and all(
        b["continue_final_message"] and not b["add_generation_prompt"] for b in continued
    )


def test_text_endpoint_continues_the_prompt_with_the_answer_so_far(kit, none_cluster, stub, tmp_path):
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant: ")
    server = stub("--tir_rounds", "1", "--tir_code", "print(({numbers}) * 10)")
    text = ["++server.endpoint=text", f"++server.chat_template={template}", "++code_execution=true"]
    res, out = generate(kit, none_cluster, server, tmp_path, 3, "--with_sandbox", *text)
    assert res.returncode == 0, res.stdout + res.stderr
    for r in rows(out / "output.jsonl"):
        assert r["generation"].endswith(f"\\boxed{{{10 * r['id']}}}.") and r["code_rounds_executed"] == 1
    second = [r["body"]["prompt"] for r in server.requests() if "```output" in str(r["body"]["prompt"])]
    assert len(second) == 3 and all(p.startswith("user: What is 0+") for p in second)


def test_max_code_executions_timeouts_and_the_budget_note(kit, none_cluster, stub, tmp_path):
    server = stub("--tir_rounds", "5", "--tir_code", "import time\ntime.sleep({round} * 10)\nprint('round', {round})")
    overrides = ["++code_execution=true", "++max_code_executions=2", "++code_timeout=1", "++code_budget_note=true"]
    res, out = generate(kit, none_cluster, server, tmp_path, 2, "--with_sandbox", *overrides)
    assert res.returncode == 0, res.stdout + res.stderr
    for r in rows(out / "output.jsonl"):
        assert (r["code_rounds_executed"], r["num_code_timeouts"]) == (2, 1)
        assert (r["code_last_status"], r["code_limit_reached"]) == ("timeout", True)  # SC-TIR drops it
        assert "```output\nround 0\n```\nYou have 1 code execution left.\n" in r["generation"]
        assert "Execution timed out after 1 s\n```\nYou have 0 code executions left.\n" in r["generation"]
    last_requests = [r["body"] for r in server.requests()][-2:]
    assert all("```\n" not in (b.get("stop") or []) for b in last_requests)  # no code stop phrase once spent


def test_code_execution_without_a_sandbox_is_one_clear_error(kit, none_cluster, stub, tmp_path):
    server = stub("--tir_rounds", "1")
    res, _ = generate(kit, none_cluster, server, tmp_path, 1, "++code_execution=true")
    assert res.returncode != 0
    assert "++code_execution=true needs a sandbox: pass --with_sandbox" in res.stdout + res.stderr
    assert server.requests() == []


def test_tool_call_tags_with_json_arguments():
    tags = load_code_tags("tool_call")
    text = 'Thinking.\n<tool_call>\n{"name": "python", "arguments": {"code": "print(3)"}}\n'
    assert tags.last_open_block(text) == "print(3)"
    assert tags.last_open_block("<tool_call>\nprint(4)\n") == "print(4)\n"
    assert tags.last_open_block("<tool_call>\nprint(4)\n</tool_call>\n") is None
    assert tags.output_block("4") == "<tool_response>\n4\n</tool_response>\n"


def test_qwen_tags_find_only_an_unclosed_last_block():
    tags = load_code_tags("qwen")
    assert tags.last_open_block("a\n```python\nprint(1)\n") == "print(1)\n"
    assert tags.last_open_block("```python\nprint(1)\n```\n```output\n1\n```\ndone") is None
    assert tags.last_open_block("no code here") is None
    result = {"status": "timeout", "stdout": "partial", "stderr": ""}
    assert format_result(result, 2) == "partial\nExecution timed out after 2 s"


def test_code_tags_from_a_user_file_and_bad_files(tmp_path):
    good = tmp_path / "mine.yaml"
    good.write_text(
        json.dumps({"code_begin": "<c>", "code_end": "</c>", "code_output_begin": "<o>", "code_output_end": "</o>"})
    )
    assert load_code_tags(str(good)) == CodeTags("<c>", "</c>", "<o>", "</o>")
    bad = tmp_path / "bad.yaml"
    bad.write_text("code_begin: '<c>'\ncode_ends: '</c>'\n")
    with pytest.raises(UserError, match="unknown key 'code_ends'"):
        load_code_tags(str(bad))
    with pytest.raises(UserError, match=r"no such tag set \(shipped: qwen, tool_call\)"):
        load_code_tags("nope")
