"""The AIMO recipe's TIR filter (pipeline_kit.recipes.tir_filter) on hand-made TIR records: each drop reason, the
kept SFT records, the summary's counts, and 0 kept as one error line naming the counts. Also the TIR loop against a
server that returns the stop string it matched (transformers serve, which the recipe's end-to-end test uses)."""

from __future__ import annotations

import json

from pipeline_kit.recipes import tir_filter

CODE = "```python\nprint(3+4)\n```\n```output\n7\n```\n"


def tir(generation: str, rounds: int = 1, last: str | None = "completed", **more) -> dict:
    """One TIR record as `kit generate ++code_execution=true` writes it."""
    return {"id": more.pop("id", "p"), "problem": "What is 3+4?", "expected_answer": more.pop("answer", "7"),
            "generation": generation, "num_generated_tokens": 20, "generation_time": 0.1, "code_rounds_executed": rounds,
            "num_code_timeouts": int(last == "timeout"), "code_execution_time": 0.01, "code_last_status": last,
            "code_limit_reached": False, **more}  # fmt: skip


RECORDS = {
    "kept": tir(CODE + "\\boxed{7}", id="a"),
    "kept, an equivalent form": tir(CODE + "so \\boxed{7.0}", id="b"),
    "generation_error": tir(CODE, error="code execution failed: the sandbox did not answer"),
    "no_code_ran": tir("\\boxed{7}", rounds=0, last=None),
    "last_execution_failed": tir("```python\n1/0\n```\n```output\nZeroDivisionError\n```\n\\boxed{7}", last="error"),
    "last_execution_failed (timeout)": tir(CODE + "\\boxed{7}", rounds=2, last="timeout"),
    "no_answer": tir(CODE + "The answer is seven."),
    "wrong_answer": tir(CODE + "\\boxed{8}"),
}


def write_run(folder, records_per_file: dict[str, list[dict]]) -> None:
    folder.mkdir()
    for name, records in records_per_file.items():
        (folder / name).write_text("".join(json.dumps(r) + "\n" for r in records))


def test_each_drop_reason_is_counted_and_the_correct_solutions_whose_code_ran_are_kept(tmp_path):
    gen = tmp_path / "tir_generate"
    records = list(RECORDS.values())
    write_run(gen, {"output-rs0.jsonl": records[:4], "output-rs1.jsonl": records[4:],
                    "output-rs0.jsonl.tmp": records, "output-rs1_chunk_0.jsonl": records})  # fmt: skip
    sft, summary = tmp_path / "f" / "tir_sft.jsonl", tmp_path / "f" / "summary.json"
    assert tir_filter.main([str(gen), str(sft), str(summary)]) == 0
    counts = json.loads(summary.read_text())
    assert counts["records"] == len(RECORDS) and counts["kept"] == 2
    assert counts["dropped"] == {"generation_error": 1, "no_code_ran": 1, "last_execution_failed": 2, "no_answer": 1,
                                 "wrong_answer": 1}  # fmt: skip
    kept = [json.loads(line) for line in sft.read_text().splitlines()]
    assert [r["id"] for r in kept] == ["a", "b"]
    assert kept[0] == {"id": "a", "problem": "What is 3+4?", "generation": CODE + "\\boxed{7}", "expected_answer": "7"}


def test_nothing_kept_is_one_error_line_naming_the_counts(tmp_path, capsys):
    gen = tmp_path / "tir_generate"
    write_run(gen, {"output-rs0.jsonl": [RECORDS["wrong_answer"], RECORDS["no_code_ran"]]})
    sft, summary = tmp_path / "tir_sft.jsonl", tmp_path / "summary.json"
    assert tir_filter.main([str(gen), str(sft), str(summary)]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    assert "0 of 2 TIR solutions" in err and "no_code_ran 1" in err and "wrong_answer 1" in err, err
    assert not sft.exists() and json.loads(summary.read_text())["kept"] == 0


def test_a_generation_without_code_execution_or_no_outputs_is_an_error(tmp_path, capsys):
    gen = tmp_path / "tir_generate"
    plain = {k: v for k, v in RECORDS["kept"].items() if not k.startswith("code_")}
    write_run(gen, {"output-rs0.jsonl": [plain]})
    assert tir_filter.main([str(gen), str(tmp_path / "s.jsonl"), str(tmp_path / "c.json")]) == 2
    assert "output-rs0.jsonl:1: no 'code_rounds_executed'" in capsys.readouterr().err
    assert tir_filter.main([str(tmp_path / "none"), str(tmp_path / "s.jsonl"), str(tmp_path / "c.json")]) == 2
    assert "no output.jsonl or output-rs*.jsonl" in capsys.readouterr().err


class EchoingStopServer:
    """A model server as `transformers serve` answers: the stop string it matched stays in the text, less its
    trailing newline. Its first part writes a code block; the next, after the output, a box."""

    def __init__(self):
        self.prefixes: list[str] = []

    async def generate(self, messages, prefix="", stop=None, max_tokens=None):
        from pipeline_kit.inference.client import Completion

        self.prefixes.append(prefix)
        text = "```python\nprint(3+4)\n```" if not prefix else "\\boxed{7}"
        return Completion(text, 5, 0.0, finish_reason="stop")


class Sandbox:
    def __init__(self):
        self.ran: list[str] = []

    async def execute(self, code, **_):
        self.ran.append(code)
        return {"stdout": "7\n", "stderr": "", "status": "completed", "wall_seconds": 0.01}

    async def delete_session(self, session):
        pass


def test_a_code_block_closed_by_a_returned_stop_string_is_run():
    """TIR against a server that returns the matched stop string (transformers serve): the block still runs, and
    the solution has one closing tag, not two."""
    import asyncio

    from pipeline_kit.inference.tir import CodeSettings, generate_with_code
    from pipeline_kit.inference.tir_settings import load_code_tags

    server, sandbox = EchoingStopServer(), Sandbox()
    settings = CodeSettings(max_code_executions=2, timeout=5, max_output_characters=100, language="ipython",
                            budget_note=False)  # fmt: skip
    done = asyncio.run(generate_with_code(server, sandbox, [], load_code_tags("qwen"), settings, [], 100))
    assert sandbox.ran == ["print(3+4)\n"] and done.extra["code_rounds_executed"] == 1
    assert done.text == CODE + "\\boxed{7}"
