"""`++generation_type=reward`: (prompt, generation) pairs scored by a reward model. The tiny reward model
(tests/models/make_tiny_rm.py: the tiny model under a seeded scalar head) runs for real on vLLM's pooling runner and
on kit's reward server (--server_type=transformers); each score must equal what transformers computes for the same
conversation. A recording server checks the exact request, retries, resume and the per-row errors."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import SERVICES, VLLM_ARGS, cluster_yaml, generate, need, rows

PAIRS = [("What is 2+3?", "\\boxed{5}"), ("What is 2+3?", "\\boxed{6}"), ("What is 7+1?", "I think 8.")]

# transformers' own score of each conversation (the test's oracle), in the model venv
ORACLE = """
import json, sys, torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer
model_dir, conversations = sys.argv[1], json.loads(sys.stdin.read())
tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForSequenceClassification.from_pretrained(model_dir).eval()
scores = []
for messages in conversations:
    ids = tok(tok.apply_chat_template(messages, tokenize=False), return_tensors="pt", add_special_tokens=False)
    with torch.no_grad():
        scores.append(model(**ids).logits[0, 0].item())
print(json.dumps(scores))
"""
MATH_USER = "Solve the following math problem. Make sure to put the answer (and only answer) inside \\boxed{{}}.\n\n{p}"


def solutions(path: Path, pairs=PAIRS) -> Path:
    path.write_text(
        "".join(json.dumps({"id": i, "problem": p, "generation": g}) + "\n" for i, (p, g) in enumerate(pairs))
    )
    return path


def oracle(model_dir: str, conversations: list[list[dict]]) -> list[float]:
    res = subprocess.run(
        [SERVICES["KIT_TEST_HF_PYTHON"], "-c", ORACLE, model_dir],
        input=json.dumps(conversations),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


def math_conversation(problem: str, generation: str) -> list[dict]:
    prompt = Path(__file__).parents[1] / "prompts" / "generic" / "math.yaml"
    import yaml

    user = yaml.safe_load(prompt.read_text())["user"].format(problem=problem)
    return [{"role": "user", "content": user}, {"role": "assistant", "content": generation}]


# --- the scoring script against a recording server ---------------------------------------------------------------


class Recorder:
    """Records every POST body; answers /pooling with len(last message) as the score, or `status` codes in turn (a
    400 says the conversation is over the context length, as vLLM does)."""

    def __init__(self, statuses: list[int] | None = None, values: int = 1):
        self.bodies: list[dict] = []
        self.statuses = list(statuses or [])
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._send(200, {"data": [{"id": "rm"}]})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                recorder.bodies.append({"path": self.path, **body})
                status = recorder.statuses.pop(0) if recorder.statuses else 200
                if status != 200:
                    too_long = " (over the maximum context length)" if status == 400 else ""
                    return self._send(status, {"error": {"message": f"status {status}{too_long}"}})
                score = float(len(body["messages"][-1]["content"]))
                self._send(200, {"data": [{"index": 0, "data": [score] * values}]})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def recorder():
    made = []

    def make(*args, **kw):
        made.append(Recorder(*args, **kw))
        return made[-1]

    yield make
    for r in made:
        r.close()


def score(url: str, inp: Path, out: Path, *more: str) -> subprocess.CompletedProcess:
    args = [f"++input_file={inp}", f"++output_file={out}", f"++server.base_url={url}", "++server.model=rm"]
    args += ["++generation_type=reward", "++retry_delay=0.01", *more]
    return generate(*args, timeout=60)


def test_the_request_is_the_prompt_and_the_generation_as_a_chat_on_pooling(recorder, tmp_path):
    server = recorder()
    inp, out = solutions(tmp_path / "in.jsonl"), tmp_path / "out" / "output.jsonl"
    res = score(server.url, inp, out, "++prompt_config=generic/math")
    assert res.returncode == 0, res.stderr
    first = next(b for b in server.bodies if b["messages"][-1]["content"] == "\\boxed{5}")
    assert first == {
        "path": "/pooling",  # vLLM's pooling API sits at the server's root, beside /v1
        "model": "rm",
        "messages": [
            {"role": "user", "content": MATH_USER.format(p="What is 2+3?")},
            {"role": "assistant", "content": "\\boxed{5}"},
        ],
        "use_activation": False,  # the raw logit, as transformers returns it
    }
    got = rows(out)
    assert [(r["id"], r["generation"], r["reward_model_score"]) for r in got] == [
        (i, g, float(len(g))) for i, (_, g) in enumerate(PAIRS)
    ]
    key = json.loads((tmp_path / "out" / "output.jsonl.done").read_text())["key"]
    assert key["generation_type"] == "reward" and key["prompt_config"] == "generic/math"
    # a done reward output is not taken for a generation output (nor the other way round)
    again = score(server.url, inp, out, "++prompt_config=generic/math", "++generation_type=generate")
    assert again.returncode == 2 and 'generation_type: "reward" → null' in again.stderr, again.stderr


def test_transient_errors_are_retried_a_too_long_pair_gets_an_error_and_resume_skips_scored_rows(recorder, tmp_path):
    server = recorder(statuses=[503, 200, 400])  # the first request is retried; the next one is refused
    inp, out = solutions(tmp_path / "in.jsonl"), tmp_path / "output.jsonl"
    res = score(server.url, inp, out, "++max_concurrent_requests=1")
    assert res.returncode == 0, res.stderr
    got = rows(out)
    assert len(server.bodies) == 4 and server.bodies[0] == server.bodies[1]
    assert got[0]["reward_model_score"] == 9.0 and "error" not in got[0]  # len("\\boxed{5}")
    assert got[1]["reward_model_score"] is None and got[1]["error"].startswith("context length exceeded: HTTP 400:")

    # a killed run keeps the rows it scored: only the rest is requested again
    second = recorder()
    out2 = tmp_path / "resumed.jsonl"
    done = {
        "_kit_position": 1,
        "id": 1,
        "problem": "What is 2+3?",
        "generation": "\\boxed{6}",
        "reward_model_score": 0.5,
    }
    Path(f"{out2}.in-progress").write_text(json.dumps(done) + "\n" + '{"_kit_pos')  # torn last line
    assert score(second.url, inp, out2).returncode == 0
    assert sorted(b["messages"][-1]["content"] for b in second.bodies) == ["I think 8.", "\\boxed{5}"]
    assert [r["reward_model_score"] for r in rows(out2)] == [9.0, 0.5, 10.0]


def test_a_refused_pair_fails_and_a_rerun_scores_only_it(recorder, tmp_path):
    server = recorder(statuses=[422])  # the first request is refused for that pair alone
    inp, out = solutions(tmp_path / "in.jsonl"), tmp_path / "output.jsonl"
    res = score(server.url, inp, out, "++max_concurrent_requests=1")
    assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
    assert "kit generate: error: 1 sample failed in" in res.stderr.strip().splitlines()[-1]
    refused = server.bodies[0]["messages"][-1]["content"]
    errors = {r["generation"]: r.get("error") for r in rows(out)}
    assert errors == {g: ("HTTP 422: status 422" if g == refused else None) for _, g in PAIRS}
    assert not Path(f"{out}.done").exists()

    again = recorder()
    assert score(again.url, inp, out).returncode == 0
    assert [b["messages"][-1]["content"] for b in again.bodies] == [refused]
    assert Path(f"{out}.done").exists() and all(r["reward_model_score"] is not None for r in rows(out))


def test_bad_inputs_are_one_line_errors(recorder, tmp_path):
    server = recorder()
    inp = solutions(tmp_path / "in.jsonl")
    bad = score(server.url, inp, tmp_path / "o.jsonl", "++generation_type=rewrad")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert (
        "++generation_type=rewrad is not one of generate, reward, genselect, magpie. Did you mean 'reward'?"
        in bad.stderr
    )

    no_generation = tmp_path / "gen.jsonl"
    no_generation.write_text('{"problem": "1+1", "generation": "2"}\n{"problem": "2+2"}\n')
    res = score(server.url, no_generation, tmp_path / "o.jsonl")
    assert res.returncode == 2 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert f"{no_generation}: line 2 has no 'generation'" in res.stderr
    assert not server.bodies  # every row is checked before any request

    tir = score(server.url, inp, tmp_path / "o.jsonl", "++code_execution=true")
    assert tir.returncode == 2 and "does not apply to ++generation_type=reward" in tir.stderr, tir.stderr


def test_a_classifier_with_several_labels_or_a_server_without_pooling_stops_the_run(recorder, tmp_path):
    inp = solutions(tmp_path / "in.jsonl")
    two = score(recorder(values=2).url, inp, tmp_path / "a.jsonl")
    assert two.returncode == 2 and "returned 2 values per conversation, not one score" in two.stderr, two.stderr
    missing = score(recorder(statuses=[404] * 3).url, inp, tmp_path / "b.jsonl")
    assert missing.returncode == 2 and missing.stderr.strip().splitlines()[-1].startswith("kit generate: error: ")
    assert "answered 404" in missing.stderr and "must be a reward model" in missing.stderr


# --- real servers: the tiny reward model --------------------------------------------------------------------------


@pytest.fixture
def reward_model():
    need("KIT_TEST_TINY_RM", "the tiny reward model (tests/services/models_up.sh)")
    return SERVICES["KIT_TEST_TINY_RM"]


def kit_reward(kit, configs, tmp_path: Path, server_python: str, *server: str, pairs=PAIRS):
    d = configs("local", cluster_yaml("none", server_python))
    inp, out = solutions(tmp_path / "solutions.jsonl", pairs), tmp_path / "scored"
    res = kit(
        "generate",
        "--cluster=local",
        f"--config_dir={d}",
        f"--input_file={inp}",
        f"--output_dir={out}",
        "++generation_type=reward",
        "++prompt_config=generic/math",
        *server,
        timeout=400,
    )
    return res, out / "output.jsonl"


@pytest.mark.models
def test_vllm_scores_equal_transformers(kit, configs, reward_model, tmp_path):
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv (tests/services/models_up.sh)")
    server = ["--server_type=vllm", f"--model={reward_model}", VLLM_ARGS]
    res, out = kit_reward(kit, configs, tmp_path, SERVICES["KIT_TEST_VLLM_PYTHON"], *server)
    assert res.returncode == 0, res.stdout + res.stderr
    got = [r["reward_model_score"] for r in rows(out)]
    expected = oracle(reward_model, [math_conversation(p, g) for p, g in PAIRS])
    assert got == pytest.approx(expected, abs=1e-4), (got, expected)
    assert len({round(s, 3) for s in got}) == len(PAIRS)  # the pairs get different scores


@pytest.mark.models
def test_transformers_server_type_serves_a_reward_model_with_kits_reward_server(kit, configs, reward_model, tmp_path):
    need("KIT_TEST_HF_PYTHON", "the model venv (tests/services/models_up.sh)")
    res, out = kit_reward(
        kit, configs, tmp_path, SERVICES["KIT_TEST_HF_PYTHON"], "--server_type=transformers", f"--model={reward_model}"
    )
    assert res.returncode == 0, res.stdout + res.stderr
    got = [r["reward_model_score"] for r in rows(out)]
    assert got == pytest.approx(oracle(reward_model, [math_conversation(p, g) for p, g in PAIRS]), abs=1e-5)


@pytest.mark.models
def test_a_generative_model_on_the_vllm_reward_path_fails_with_one_clear_line(kit, configs, tmp_path):
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv and tiny model (tests/services/models_up.sh)")
    server = ["--server_type=vllm", f"--model={SERVICES['KIT_TEST_TINY_MODEL']}", VLLM_ARGS]
    res, out = kit_reward(kit, configs, tmp_path, SERVICES["KIT_TEST_VLLM_PYTHON"], *server, pairs=PAIRS[:1])
    assert res.returncode != 0 and not out.exists()
    assert "must be a reward model (a *ForSequenceClassification with num_labels=1)" in res.stdout + res.stderr
