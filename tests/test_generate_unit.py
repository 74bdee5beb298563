"""The generation script of one unit (python -m pipeline_kit.inference.generate) against a stub OpenAI-compatible
server that logs every request: output records, chunks and merging, .done skipping, kill -9 and resume, server
faults, bad input. Real vLLM runs in test_generate_vllm.py."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import Stub, generate, problems, rows


def base(server: Stub, inp: Path, out: Path, *more: str) -> list[str]:
    return [
        f"++input_file={inp}",
        f"++output_file={out}",
        f"++server.base_url={server.url}",
        "++server.model=stub",
        *more,
    ]


def test_output_keeps_input_fields_and_adds_generation(stub, tmp_path):
    server = stub()
    inp, out = problems(tmp_path, 12), tmp_path / "out" / "output.jsonl"
    res = generate(*base(server, inp, out, "++prompt_config=generic/math", "++inference.temperature=0.7"))
    assert res.returncode == 0, res.stderr
    got = rows(out)
    assert [r["id"] for r in got] == list(range(12))
    assert all(r["generation"] == f"\\boxed{{{r['id']}}}" and r["problem"] and r["expected_answer"] for r in got)
    assert all(r["num_generated_tokens"] == 3 and r["generation_time"] >= 0 for r in got)
    assert (tmp_path / "out" / "output.jsonl.done").exists()
    assert not (tmp_path / "out" / "output.jsonl.in-progress").exists()
    sent = server.requests()
    assert len(sent) == 12 and sent[0]["body"]["temperature"] == 0.7
    assert "put the answer (and only answer) inside \\boxed{}" in sent[0]["prompt"]  # the generic/math prompt

    same = ("++prompt_config=generic/math", "++inference.temperature=0.7")
    again = generate(*base(server, inp, out, *same, "++max_concurrent_requests=2", "++request_timeout=5"))
    assert again.returncode == 0 and "is done; skipping" in again.stderr, again.stderr
    assert len(server.requests()) == 12  # nothing re-requested: concurrency and timeouts are not part of the key
    # the .done records what made the output; other settings (or other input) are refused, naming what changed
    other = generate(*base(server, inp, out, "++prompt_config=generic/default", "++inference.temperature=0.7"))
    assert other.returncode == 2 and len(other.stderr.strip().splitlines()) == 1, other.stderr
    assert "was made with other settings (prompt_config:" in other.stderr and "prompt_config content:" in other.stderr
    assert 'prompt_config: "generic/math" → "generic/default"' in other.stderr
    with inp.open("a") as f:
        f.write('{"id": 99, "problem": "What is 0+99?"}\n')
    changed = generate(*base(server, inp, out, *same))
    assert changed.returncode == 2 and "input_file content:" in changed.stderr, changed.stderr
    assert len(server.requests()) == 12
    assert generate(*base(server, inp, out, "++rerun_done=true")).returncode == 0
    assert len(server.requests()) == 25


def test_a_done_marker_without_a_key_still_counts_as_done(stub, tmp_path):
    server = stub()
    inp, out = problems(tmp_path, 3), tmp_path / "output.jsonl"
    out.write_text("")
    (tmp_path / "output.jsonl.done").write_text("")  # written before .done files held keys
    res = generate(*base(server, inp, out, "++inference.temperature=0.3"))
    assert res.returncode == 0 and "is done; skipping" in res.stderr and not server.requests()


def test_chunks_merge_into_one_file_in_order(stub, tmp_path):
    server = stub()
    inp = problems(tmp_path, 10)
    final = tmp_path / "output-rs3.jsonl"
    for k in (2, 0, 1):  # finishing order does not matter
        chunk = tmp_path / f"output-rs3_chunk_{k}.jsonl"
        res = generate(*base(server, inp, chunk, "++num_chunks=3", f"++chunk_id={k}", "++inference.random_seed=3"))
        assert res.returncode == 0, res.stderr
        assert (tmp_path / f"output-rs3_chunk_{k}.jsonl.done").exists() or final.exists()
    assert [r["id"] for r in rows(final)] == list(range(10))
    assert (tmp_path / "output-rs3.jsonl.done").exists()
    assert not list(tmp_path.glob("*_chunk_*"))  # chunk files and their markers are removed
    assert {r["body"]["seed"] for r in server.requests()} == {3}
    seed = "++inference.random_seed=3"
    res = generate(*base(server, inp, tmp_path / "output-rs3_chunk_1.jsonl", "++num_chunks=3", "++chunk_id=1", seed))
    assert "is done; skipping chunk 1" in res.stderr and len(server.requests()) == 10
    # rerunning one chunk cuts the others back out of the merged file (kept as they are) and merges again
    kept = rows(final)
    kept[0]["marker"] = "kept"
    final.write_text("".join(json.dumps(r) + "\n" for r in kept))
    chunk = tmp_path / "output-rs3_chunk_1.jsonl"
    res = generate(*base(server, inp, chunk, "++num_chunks=3", "++chunk_id=1", "++rerun_done=true", seed))
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "output-rs3.jsonl.done").exists() and not list(tmp_path.glob("*_chunk_*"))
    again = rows(final)
    assert [r["id"] for r in again] == list(range(10)) and again[0]["marker"] == "kept"
    assert sorted(r["prompt"] for r in server.requests()[10:]) == [f"What is 0+{i}?" for i in range(4, 8)]
    # a chunk redone with other settings is not merged with the others
    res = generate(
        *base(server, inp, chunk, "++num_chunks=3", "++chunk_id=1", "++rerun_done=true", "++inference.random_seed=4")
    )
    assert res.returncode == 2 and "was made with other settings than the chunks" in res.stderr, res.stderr
    assert "inference.random_seed: 3 → 4" in res.stderr and not (tmp_path / "output-rs3.jsonl.done").exists()


def test_kill_9_then_rerun_requests_only_the_missing_samples(stub, tmp_path):
    server = stub("--delay", "0.05")
    inp, out = problems(tmp_path, 60), tmp_path / "output.jsonl"
    args = base(server, inp, out, "++max_concurrent_requests=4")
    proc = subprocess.Popen([sys.executable, "-m", "pipeline_kit.inference.generate", *args], stderr=subprocess.PIPE)
    kill_at = random.randint(5, 40)
    progress = Path(f"{out}.in-progress")
    deadline = time.time() + 60
    while time.time() < deadline and (not progress.exists() or progress.read_text().count("\n") < kill_at):
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    first = len(server.requests())
    assert not out.exists() and 0 < first < 60

    res = generate(*args)
    assert res.returncode == 0, res.stderr
    kept = int(res.stderr.split("samples, ")[1].split(" already done")[0])
    assert kept >= kill_at
    assert len(server.requests()) - first == 60 - kept  # only the missing positions were requested
    # in-flight requests at the kill may be asked again, but never a finished one
    reasked = [r["prompt"] for r in server.requests()[first:]]
    assert len(set(reasked)) == len(reasked)

    uninterrupted = tmp_path / "clean.jsonl"
    assert generate(*base(server, inp, uninterrupted)).returncode == 0
    strip = [{k: v for k, v in r.items() if k != "generation_time"} for r in rows(out)]
    assert strip == [{k: v for k, v in r.items() if k != "generation_time"} for r in rows(uninterrupted)]


def _merge_at_once(barrier, final, n, results):
    from pipeline_kit.inference.unit_files import merge_chunks

    barrier.wait()
    results.put(merge_chunks(Path(final), n, {"inference.temperature": 0.0}))


def test_two_chunks_finishing_together_merge_once(tmp_path):
    final = tmp_path / "output.jsonl"
    for k in range(2):
        (tmp_path / f"output_chunk_{k}.jsonl").write_text(f'{{"chunk": {k}}}\n')
        (tmp_path / f"output_chunk_{k}.jsonl.done").write_text("")
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    procs = [ctx.Process(target=_merge_at_once, args=(barrier, str(final), 2, results)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert sorted([results.get(timeout=5), results.get(timeout=5)]) == [False, True]
    assert final.read_text() == '{"chunk": 0}\n{"chunk": 1}\n'


def test_finished_samples_stay_on_disk_not_in_memory_and_finish_orders_them(tmp_path):
    """The in-progress file keeps no sample's text in memory (issue 32 part 3: reasoning samples run to 32k tokens):
    200 samples of 128 KiB are appended and copied into the final file with at most a few samples' text allocated
    at once; the final file is in input order without kit's keys; a failed sample keeps the unit from being done;
    a torn last line and the failed sample are dropped on reopening."""
    import tracemalloc

    from pipeline_kit.inference.unit_files import InProgress

    final, n, size = tmp_path / "output.jsonl", 200, 128 * 1024
    progress = InProgress(final)
    tracemalloc.start()
    for position in reversed(range(n)):  # finished out of order, as requests do
        progress.add(position, {"id": position, "generation": chr(ord("a") + position % 26) * size})
    held = tracemalloc.get_traced_memory()[0]
    progress.finish(final, n, {"inference.temperature": 0.0})
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert held < 2 * size and peak < 8 * size, (held, peak)  # all of them: 200 x 128 KiB = 25 MiB
    records = [json.loads(line) for line in final.open()]
    assert [r["id"] for r in records] == list(range(n)) and all(set(r) == {"id", "generation"} for r in records)
    assert records[27]["generation"] == "b" * size and final.with_name("output.jsonl.done").exists()

    final2 = tmp_path / "second.jsonl"
    progress = InProgress(final2)
    progress.add(1, {"id": 1, "generation": "x"})
    progress.add(0, {"id": 0, "error": "refused"}, failed=True)
    progress.finish(final2, 2, {})
    assert [json.loads(line)["id"] for line in final2.open()] == [0, 1]
    assert not final2.with_name("second.jsonl.done").exists()
    with open(tmp_path / "second.jsonl.in-progress", "a") as f:
        f.write('{"_kit_position": 2, "id": 2, "generation": "torn')  # killed mid-write
    reopened = InProgress(final2)
    assert sorted(reopened.lines) == [1]  # the failed sample and the torn line are asked again
    reopened.add(0, {"id": 0, "generation": "y"})
    reopened.finish(final2, 2, {})
    assert [json.loads(line)["generation"] for line in final2.open()] == ["y", "x"]
    assert final2.with_name("second.jsonl.done").exists()


def test_server_never_ready_fails_with_log_tail_within_timeout(stub, tmp_path):
    server = stub("--never_ready")
    log = tmp_path / "server.log"
    log.write_text("loading weights\nCUDA out of memory: tried to allocate 80 GiB\n")
    inp, out = problems(tmp_path, 3), tmp_path / "output.jsonl"
    start = time.monotonic()
    res = generate(*base(server, inp, out, "++server.ready_timeout=3", f"++server.server_log={log}"))
    assert res.returncode == 1
    assert time.monotonic() - start < 30
    assert "was not ready after 3 s" in res.stderr and "CUDA out of memory" in res.stderr
    assert "Traceback" not in res.stderr


def job(args: list[str]) -> subprocess.Popen:
    """The script in a process of its own (not the fork server's, which has LiteLLM imported already)."""
    argv = [sys.executable, "-m", "pipeline_kit.inference.generate", *args]
    return subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)


def test_litellm_is_imported_while_the_server_starts(stub, tmp_path):
    """The server becomes ready only once the job says it has imported LiteLLM: a job that imported it after the
    wait (as it did) would wait out ++server.ready_timeout and fail. Its first request then needs only the server."""
    ready = tmp_path / "ready"
    server = stub("--ready_file", str(ready))
    log = tmp_path / "server.log"
    log.write_text("loading weights\n")  # a server kit started: its log is known
    inp, out = problems(tmp_path, 3), tmp_path / "output.jsonl"
    proc = job(base(server, inp, out, f"++server.server_log={log}", "++server.ready_timeout=120"))
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if "LiteLLM imported in" in line:
            ready.touch()
    assert proc.wait(timeout=60) == 0, "".join(lines)
    said = [line.split(": ", 1)[1].split(" in ")[0].split(" after ")[0] for line in lines if ": " in line]
    imported, waited = said.index("LiteLLM imported"), said.index(f"server {server.url} ready")
    assert imported < waited and said.count("LiteLLM imported") == 1, lines
    assert [r["id"] for r in rows(out)] == [0, 1, 2] and len(server.requests()) == 3


def test_a_server_never_ready_stops_the_job_with_its_error_last_while_litellm_was_importing(stub, tmp_path):
    """The wait ends (1 s) before the import does: the job still exits 1 with one error line, its last, and no
    traceback; a rerun against a ready server generates everything."""
    server = stub("--never_ready")
    log = tmp_path / "server.log"
    log.write_text("loading weights\nCUDA out of memory: tried to allocate 80 GiB\n")
    inp, out = problems(tmp_path, 3), tmp_path / "output.jsonl"
    proc = job(base(server, inp, out, "++server.ready_timeout=1", f"++server.server_log={log}"))
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 1, err
    said = [line for line in err.splitlines() if line.startswith("kit generate: ")]
    assert said[-1].startswith("kit generate: error: the server at") and "was not ready after 1 s" in said[-1], err
    assert "CUDA out of memory" in err and "Traceback" not in err and not out.exists()
    res = generate(*base(stub(), inp, out))
    assert res.returncode == 0, res.stderr
    assert [r["id"] for r in rows(out)] == [0, 1, 2]


def test_a_live_server_that_resets_connections_is_retried_not_called_gone(stub, tmp_path):
    """For 3 s the server reads each request and closes its connection unanswered (alive, starved of CPU): past
    ++server.gone_after=1 a fresh connection to its port is still taken, so the job keeps retrying and ends with every
    sample; the dropped requests were really tried (and counted as retries)."""
    dropping = stub("--drop_for", "3")
    inp, out = problems(tmp_path, 4), tmp_path / "output.jsonl"
    more = ("++server.gone_after=1", "++retry_delay=0.3", "++max_retries=8", "++max_concurrent_requests=2")
    res = generate(*base(dropping, inp, out, *more))
    assert res.returncode == 0, res.stderr
    assert [r["id"] for r in rows(out)] == [0, 1, 2, 3] and "is gone" not in res.stderr
    log = dropping.requests()
    assert any(r["dropped"] for r in log) and sum(not r["dropped"] for r in log) == 4, log


def test_a_server_no_connection_reaches_is_gone_after_gone_after(stub, tmp_path):
    """The server's process is killed after 3 samples: nothing takes a connection, so the job stops once
    ++server.gone_after (1 s) has passed, naming the server, with the 3 samples kept."""
    dying = stub("--die_after", "3")
    inp, out = problems(tmp_path, 8), tmp_path / "output.jsonl"
    more = ("++server.gone_after=1", "++retry_delay=0.3", "++max_retries=30", "++max_concurrent_requests=1")
    res = generate(*base(dying, inp, out, *more))
    assert res.returncode == 1
    assert f"the server at {dying.url} is gone: no request reached it for" in res.stderr, res.stderr
    assert "Traceback" not in res.stderr and len(Path(f"{out}.in-progress").read_text().splitlines()) == 3


def test_server_dying_mid_run_keeps_finished_samples(stub, tmp_path):
    dying = stub("--die_after", "7")
    inp, out = problems(tmp_path, 20), tmp_path / "output.jsonl"
    res = generate(*base(dying, inp, out, "++max_concurrent_requests=1", "++max_retries=2", "++retry_delay=0.05"))
    assert res.returncode == 1
    assert f"the server at {dying.url} stopped answering" in res.stderr and "Traceback" not in res.stderr
    assert len(Path(f"{out}.in-progress").read_text().splitlines()) == 7
    healthy = stub()
    res = generate(*base(healthy, inp, out, "++max_concurrent_requests=1"))
    assert res.returncode == 0, res.stderr
    assert len(healthy.requests()) == 13 and [r["id"] for r in rows(out)] == list(range(20))


@pytest.mark.parametrize("style", ["vllm", "vllm_old", "sglang"])
def test_a_budget_over_the_window_is_clamped_and_counted_and_a_prompt_over_it_is_an_error(stub, tmp_path, style):
    """A 60-token window (the stub's tokens are the prompt's characters): a prompt of 7 with max_tokens 50 fits; a
    prompt of 30 does not, and is fitted to 30 tokens, by the server itself (vLLM 0.11+, which says max_model_len on
    /v1/models) or by kit asking once more after the 400 of vLLM 0.6-0.9 or SGLang; a prompt of 201 alone overruns
    the window: an error sample, not a failed job, and the rerun asks nothing again. With tokens_to_generate=null no
    max_tokens is sent at all."""
    server = stub("--context_limit", "60", "--context_style", style)
    inp, out = tmp_path / "in.jsonl", tmp_path / "output.jsonl"
    problems = ["short 1", "medium " + "x" * 21 + " 2", "long " * 40 + "3"]
    inp.write_text("".join(json.dumps({"problem": p}) + "\n" for p in problems))
    res = generate(*base(server, inp, out, "++inference.tokens_to_generate=50", "++max_concurrent_requests=1"))
    assert res.returncode == 0, res.stderr
    short, medium, long = rows(out)
    assert short["generation"] == "\\boxed{1}" and "clamped_max_tokens" not in short and "error" not in short
    assert medium["generation"] == "\\boxed{2}" and medium["clamped_max_tokens"] == 30 and "error" not in medium
    assert long["generation"] == "" and "clamped_max_tokens" not in long
    assert long["error"].startswith("context length exceeded: HTTP 400: This model's maximum context length is 60")
    asked = [(r["prompt"][-1], r["body"]["max_tokens"]) for r in server.requests()]
    again = [("2", 30)] if style != "vllm" else []  # kit asks with what fits; vLLM fitted it itself
    assert asked == [("1", 50), ("2", 50), *again, ("3", 50)]
    assert Path(f"{out}.done").exists()  # not a failure: the same model refuses that prompt again
    assert generate(*base(server, inp, out, "++inference.tokens_to_generate=50")).returncode == 0
    assert len(server.requests()) == len(asked)

    whatever = tmp_path / "whatever.jsonl"
    res = generate(*base(server, inp, whatever, "++inference.tokens_to_generate=null"))
    assert res.returncode == 0, res.stderr
    assert all("max_tokens" not in r["body"] for r in server.requests()[len(asked) :])
    assert [("clamped_max_tokens" in r, "error" in r) for r in rows(whatever)] == [
        (False, False),
        (False, False),
        (False, True),
    ]


def test_whatever_fits_is_refused_for_transformers_serve(stub, tmp_path):
    """transformers serve stops a request without max_tokens at the model's max_new_tokens (20 by default)."""
    server = stub()
    inp, out = problems(tmp_path, 2), tmp_path / "out.jsonl"
    budget = ["++server.server_type=transformers", "++inference.tokens_to_generate=null"]
    res = generate(*base(server, inp, out, *budget))
    assert res.returncode == 2 and not server.requests(), res.stderr
    assert res.stderr.count("\n") == 1 and "++inference.tokens_to_generate=null" in res.stderr
    assert "give a number" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize(
    "content, overrides, needles",
    [
        ('{"problem": "a"}\n{"problem": \n', [], ["in.jsonl:2", "not valid JSON"]),
        (
            '{"question": "a"}\n',
            ["++prompt_config=generic/math"],
            ["in.jsonl:1", "'problem'", "prompt config generic/math"],
        ),
        ('{"problem": "a"}\n', ["++inference.temprature=0.5"], ["++inference.temprature", "temperature"]),
        ('{"problem": "a"}\n', ["++prompt_config=generic/nope"], ["generic/nope", "generic/math"]),
        ('{"problem": "a"}\n', ["++server.api_key_env=KIT_NO_SUCH_KEY"], ["KIT_NO_SUCH_KEY", "not set"]),
        ('{"problem": "a"}\n', ["++inference.tokens_to_generate=0"], ["++inference.tokens_to_generate=0", "or null"]),
        (
            '{"problem": "a"}\n',
            ["++parse_reasoning=true", "++end_reasoning_string="],
            ["++end_reasoning_string is empty"],
        ),
    ],
)
def test_bad_input_is_one_line_exit_2(stub, tmp_path, content, overrides, needles):
    server = stub()
    inp = tmp_path / "in.jsonl"
    inp.write_text(content)
    res = generate(*base(server, inp, tmp_path / "o.jsonl", *overrides))
    assert res.returncode == 2, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert all(n in res.stderr for n in needles), res.stderr
    assert server.requests() == []  # nothing was sent before the input was checked


def test_text_endpoint_applies_the_chat_template_on_the_client(stub, tmp_path):
    server = stub()
    model = tmp_path / "model"
    model.mkdir()
    (model / "chat_template.jinja").write_text(
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    )
    inp, out = problems(tmp_path, 2), tmp_path / "o.jsonl"
    res = generate(*base(server, inp, out, "++server.endpoint=text", f"++server.chat_template={model}"))
    assert res.returncode == 0, res.stderr
    sent = server.requests()
    assert {r["path"] for r in sent} == {"/v1/completions"}
    assert sorted(r["prompt"] for r in sent) == [  # requests go out concurrently, in any order
        f"<|im_start|>user\nWhat is 0+{i}?<|im_end|>\n<|im_start|>assistant\n" for i in range(2)
    ]
    assert rows(out)[1]["generation"] == "\\boxed{1}"


@pytest.mark.parametrize(
    ("override", "hint"),
    [
        ("++tokens_to_generate=10", "Did you mean ++inference.tokens_to_generate?"),  # NeMo-Skills' flat key
        ("++temperature=0.5", "Did you mean ++inference.temperature?"),
        ("++inference.temprature=0.5", "Did you mean ++inference.temperature?"),  # the full key, not the leaf
        ("++max_concurent_requests=4", "Did you mean ++max_concurrent_requests?"),
    ],
)
def test_a_misplaced_or_misspelled_override_suggests_the_full_key(override, hint):
    from pipeline_kit.errors import UserError
    from pipeline_kit.inference.config import check_generate_overrides

    with pytest.raises(UserError) as err:
        check_generate_overrides([override])
    assert f"unknown key {override.split('=')[0]}. {hint}" in str(err.value)


@pytest.mark.parametrize("status", [400, 413, 422])
def test_a_refused_sample_is_failed_the_rest_goes_on_and_a_rerun_asks_again(stub, tmp_path, status):
    server = stub("--fail_status", str(status), "--fail_when", "0+3?")  # only problem 3 is refused
    inp, out = problems(tmp_path, 6), tmp_path / "output.jsonl"
    res = generate(*base(server, inp, out))
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    message = f"HTTP {status}: stub refuses this request (status {status})"
    assert f"wrote {out}: 6 samples, 1 failed (first: {message})" in res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        f"kit generate: error: 1 sample failed in {out} (first: {message}); the rest are kept, and a rerun requests "
        "only the failed ones (see their 'error')"
    )
    got = rows(out)  # written, so that the failure shows, but not done
    assert [r.get("error") for r in got] == [None, None, None, message, None, None]
    assert got[3]["generation"] == "" and got[3]["num_generated_tokens"] == 0
    assert all(r["generation"] == f"\\boxed{{{r['id']}}}" for r in got if r["id"] != 3)
    assert not Path(f"{out}.done").exists() and Path(f"{out}.in-progress").exists()

    healthy = stub()
    again = generate(*base(healthy, inp, out))
    assert again.returncode == 0, again.stderr
    assert [r["prompt"] for r in healthy.requests()] == ["What is 0+3?"]  # only the failed sample is asked again
    assert [r["generation"] for r in rows(out)] == [f"\\boxed{{{i}}}" for i in range(6)]
    assert "error" not in rows(out)[3] and Path(f"{out}.done").exists()


def test_a_run_whose_every_request_is_refused_stops_with_one_line(stub, tmp_path):
    server = stub("--fail_status", "400")
    inp, out = problems(tmp_path, 100), tmp_path / "output.jsonl"
    res = generate(*base(server, inp, out, "++max_concurrent_requests=4"))
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert res.stderr.strip().splitlines()[-1] == (
        f"kit generate: error: the server at {server.url} refused the first 32 requests of this run (first: HTTP 400: "
        "stub refuses this request (status 400)); check the request settings (++inference.*, ++server.endpoint, "
        "++server.model) and the server's log; finished samples are kept."
    )
    assert len(server.requests()) <= 32 + 4  # it stopped early: at most the requests in flight went on
    assert not out.exists() and not Path(f"{out}.done").exists()

    few = generate(*base(server, problems(tmp_path, 3, "few.jsonl"), tmp_path / "few.jsonl"))
    assert few.returncode == 1 and "refused every request of this run (first: HTTP 400:" in few.stderr, few.stderr


@pytest.mark.parametrize(
    "flags, needle",
    [
        # at the readiness check (the stub, like an external API, has no open /health)
        (["--fail_status", "401"], "is up but refuses the key ({url}/models answered HTTP 401): check the API key"),
        (["--fail_status", "403", "--fail_when", "0+"], "refused the request with HTTP 403 (stub refuses this request"),
        (["--fail_status", "404"], "answered HTTP 404 (stub refuses this request (status 404)): it serves no model"),
    ],
)
def test_a_refused_key_or_model_stops_the_run_at_once_with_one_line(stub, tmp_path, flags, needle):
    server = stub(*flags)
    inp, out = problems(tmp_path, 50), tmp_path / "output.jsonl"
    res = generate(*base(server, inp, out, "++max_concurrent_requests=2"))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert (
        last.startswith(f"kit generate: error: the server at {server.url} ") and needle.format(url=server.url) in last
    )
    assert len(server.requests()) <= 2  # the first refusal stops it: only what was in flight was sent


@pytest.mark.parametrize("endpoint", ["chat", "text"])
def test_sampling_fields_follow_the_server_type(stub, tmp_path, endpoint):
    """vLLM/SGLang/TensorRT-LLM read `top_k`, `min_p` and `repetition_penalty` as fields of their own, and on the
    chat endpoint `chat_template_kwargs` and `reasoning_effort`; on the text endpoint those two go into the prompt
    kit renders with the model's template. `transformers serve` refuses a `top_k` field (HTTP 422) and samples only
    when its `generation_config` field says do_sample, so that is where the sampling options go for it. A text
    prompt kit rendered is whole: vLLM is told not to add special tokens (a second BOS) to it."""
    server = stub()
    model = tmp_path / "model"
    model.mkdir()
    (model / "chat_template.jinja").write_text(
        "{% for m in messages %}{{ m['content'] }}{% endfor %}"
        "{% if enable_thinking is defined and not enable_thinking %}[no think]{% endif %}"
        "{% if reasoning_effort is defined %}[effort {{ reasoning_effort }}]{% endif %}"
    )
    inp = problems(tmp_path, 1)
    text = ["++server.endpoint=text", f"++server.chat_template={model}"] if endpoint == "text" else []
    options = ["++inference.min_p=0.05", "++inference.repetition_penalty=1.1"]
    template = ["++inference.reasoning_effort=low", "++chat_template_kwargs.enable_thinking=false"]
    bodies, prompts = [], []
    for kind, settings in [
        ("vllm", ["++inference.temperature=0.7", "++inference.top_k=5"]),
        ("vllm", ["++inference.temperature=0.7", *options, *template]),
        ("transformers", ["++inference.temperature=0.7", "++inference.top_k=5", *options]),
        ("transformers", ["++inference.temperature=0.7"]),
        ("transformers", []),  # greedy
    ]:
        out = tmp_path / f"out{len(bodies)}.jsonl"
        overrides = [f"++server.server_type={kind}", "++inference.random_seed=3", *settings, *text]
        res = generate(*base(server, inp, out, *overrides))
        assert res.returncode == 0, res.stderr
        body = server.requests()[-1]["body"]
        bodies.append({k: v for k, v in body.items() if k not in ("model", "messages", "prompt", "max_tokens")})
        prompts.append(body.get("prompt") or body["messages"][-1]["content"])
    whole = {"add_special_tokens": False} if endpoint == "text" else {}
    chat = {"chat_template_kwargs": {"enable_thinking": False}, "reasoning_effort": "low"} if endpoint == "chat" else {}
    sampled = '{"do_sample": true, "top_k": 5, "min_p": 0.05, "repetition_penalty": 1.1}'
    assert bodies == [
        {"temperature": 0.7, "top_p": 0.95, "seed": 3, "top_k": 5, **whole},
        {"temperature": 0.7, "top_p": 0.95, "seed": 3, "min_p": 0.05, "repetition_penalty": 1.1, **whole, **chat},
        {"temperature": 0.7, "top_p": 0.95, "seed": 3, "generation_config": sampled},
        {"temperature": 0.7, "top_p": 0.95, "seed": 3, "generation_config": '{"do_sample": true}'},
        {"temperature": 0.0, "top_p": 0.95, "seed": 3, "generation_config": '{"do_sample": false}'},
    ]
    rendered = [p.endswith("[no think][effort low]") for p in prompts]
    assert rendered == [False, endpoint == "text", False, False, False], prompts


def test_a_template_option_transformers_serve_cannot_take_is_refused_and_max_samples_sends_n(stub, tmp_path):
    """On the chat endpoint `transformers serve` takes neither chat_template_kwargs nor reasoning_effort: one line
    naming the key and the fix, before any request. ++max_samples=N sends exactly the first N records, cut into
    the chunks as usual, and is part of the .done key."""
    server = stub()
    inp = problems(tmp_path, 10)
    out = tmp_path / "out.jsonl"
    refused = generate(*base(server, inp, out, "++server.server_type=transformers", "++chat_template_kwargs.x=1"))
    assert refused.returncode == 2 and len(server.requests()) == 0, refused.stderr
    assert "++chat_template_kwargs.x: server type 'transformers'" in refused.stderr
    assert "++server.endpoint=text" in refused.stderr and "Traceback" not in refused.stderr
    chunk = [tmp_path / f"out_chunk_{k}.jsonl" for k in (0, 1)]
    for k in (0, 1):
        res = generate(*base(server, inp, chunk[k], "++max_samples=4", "++num_chunks=2", f"++chunk_id={k}"))
        assert res.returncode == 0, res.stderr
    assert [r["id"] for r in rows(out)] == [0, 1, 2, 3] and len(server.requests()) == 4
    again = generate(*base(server, inp, chunk[0], "++max_samples=5", "++num_chunks=2", "++chunk_id=0"))
    assert again.returncode == 2 and "max_samples" in again.stderr, again.stderr


def test_retries_name_their_most_common_causes_and_count_the_rest():
    from pipeline_kit.inference.retry import Retries, describe

    retried = Retries()
    assert retried.describe() == ""
    causes = ["APIConnectionError: Server disconnected"] * 5 + ["HTTP 503: busy"] * 3 + ["ReadTimeout"] * 2
    causes += ["HTTP 500: oops", "HTTP 429: slow down"]
    for cause in causes:
        retried.add(cause)
    assert retried.count == 12
    assert retried.describe() == (
        "12 requests retried (5 x APIConnectionError: Server disconnected; 3 x HTTP 503: busy; 2 x ReadTimeout; "
        "2 other)"
    )

    # what a retry is counted as: the error and the exception at the bottom of its chain (LiteLLM's wrappers say
    # only "Connection error.")
    try:
        try:
            try:
                raise ConnectionResetError(104, "Connection reset by peer")
            except OSError as e:
                raise RuntimeError("wrapped") from e
        except RuntimeError as e:
            raise ValueError("Connection error.\nmore lines") from e
    except ValueError as outer:
        assert describe(outer) == (
            "ValueError: Connection error. (from ConnectionResetError: [Errno 104] Connection reset by peer)"
        )
    assert describe(TimeoutError()) == "TimeoutError"


@pytest.mark.parametrize(
    ("server_keepalive", "busy"),
    [
        (3.0, 3.5),  # the loop busy past the server's keep-alive: the pool's own clock says 3.5 s idle
        (0.5, 1.0),  # the pool's clock says 1 s (under KEEPALIVE_S), as when answers were read seconds after they came
    ],
)
def test_a_connection_the_server_closed_while_the_loop_was_busy_is_not_reused(server_keepalive, busy):
    """A server that closes keep-alive connections idle for `server_keepalive` s (uvicorn: 5 s), and a client whose
    event loop was busy for `busy` s after its first requests, so that the server's FINs were not read yet: aiohttp's
    default connector sends the next POSTs on the dead connections (reset: retried in a job). The job's connector
    does not: it keeps a connection idle at most KEEPALIVE_S, and checks one from its pool before reusing it (the
    second case: in a job, the pool's clock starts when the client's code got to the answer, which under load is
    seconds after the server sent it)."""
    import asyncio
    import threading

    import aiohttp

    from pipeline_kit.inference import retry

    ready, ports = threading.Event(), []

    def serve() -> None:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout=server_keepalive)
                    length = next(
                        int(h.split(b":")[1]) for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")
                    )
                    await reader.readexactly(length)
                    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                    await writer.drain()
            except (asyncio.TimeoutError, asyncio.IncompleteReadError, ConnectionError):
                writer.close()

        async def main() -> None:
            server = await asyncio.start_server(handle, "127.0.0.1", 0)
            ports.append(server.sockets[0].getsockname()[1])
            ready.set()
            await asyncio.sleep(30)

        asyncio.run(main())

    threading.Thread(target=serve, daemon=True).start()
    assert ready.wait(10)
    url = f"http://127.0.0.1:{ports[0]}/"

    async def failures(connector_of) -> int:
        async with aiohttp.ClientSession(connector=connector_of()) as session:

            async def post() -> int:
                try:
                    async with session.post(url, data=b"x") as resp:
                        await resp.read()
                    return 0
                except aiohttp.ClientError:
                    return 1

            assert sum(await asyncio.gather(*(post() for _ in range(16)))) == 0
            time.sleep(busy)  # the loop busy (parsing answers, building requests) while the server's keep-alive ran out
            return sum(await asyncio.gather(*(post() for _ in range(16))))

    assert asyncio.run(failures(lambda: aiohttp.TCPConnector(limit=16))) > 0  # the case is real with the default
    assert asyncio.run(failures(lambda: retry.pool_connector(16))) == 0


def test_a_dotenv_file_above_litellms_package_stays_out_of_the_job(tmp_path):
    """LiteLLM in its default mode loads the first .env in the folders above its package (a venv inside the user's
    repository finds the repository's .env). The job's import of LiteLLM must not: its environment is what kit gave
    it. LiteLLM is reached through a symlink in tmp_path/site, beside a .env, so that the search finds that file; the
    probe is a script (as the job's module is), run from another folder."""
    import importlib.util

    site, work = tmp_path / "site", tmp_path / "work"
    site.mkdir()
    work.mkdir()
    (site / "litellm").symlink_to(Path(importlib.util.find_spec("litellm").origin).parent)
    (tmp_path / ".env").write_text("KIT_TEST_FROM_DOTENV=loaded\n")
    env = {k: v for k, v in os.environ.items() if k != "LITELLM_MODE"}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(Path(__file__).parent.parent)])
    seen = {}
    for name, importer in (
        ("litellm alone", "import litellm"),
        ("kit", "from pipeline_kit.inference import client\nclient.import_litellm()"),
    ):
        probe = work / "probe.py"
        probe.write_text(
            f"import os, sys\n{importer}\n"
            f"assert sys.modules['litellm'].__file__.startswith({str(site)!r}), sys.modules['litellm'].__file__\n"
            "print(os.environ.get('KIT_TEST_FROM_DOTENV'))\n"
        )
        res = subprocess.run([sys.executable, str(probe)], env=env, capture_output=True, text=True, cwd=work)
        assert res.returncode == 0, res.stderr
        seen[name] = res.stdout.split()[-1]
    assert seen == {"litellm alone": "loaded", "kit": "None"}  # the case is real, and kit's import keeps it out


def test_a_request_that_got_no_answer_is_tried_again_at_once_the_first_time_only():
    from pipeline_kit.inference.retry import backoff

    assert backoff(0, 0.5, unanswered=True) == 0.0  # a kept-alive connection the server had just closed
    assert 1.0 <= backoff(1, 0.5, unanswered=True) <= 1.5  # then as any other transient error
    assert 0.5 <= backoff(0, 0.5) <= 0.75  # a 429 or 5xx waits from the first retry on
