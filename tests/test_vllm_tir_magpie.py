"""Tool-integrated reasoning against the real CPU vLLM server that serves the tiny model (tests/models/): the
requests go to vLLM, the sandbox (`--with_sandbox`) runs the code, its output is spliced in and the model goes on
in the same assistant turn, on the chat endpoint (continue_final_message) and on the text endpoint (the client
renders the chat template and appends the answer so far). Then the same run on the local Slurm, each part in a
pyxis container. And Magpie's pre-query generation (`++generation_type=magpie`) against vLLM's text endpoint,
through a proxy that logs what kit sent. One vLLM server (`kit start_server`, conftest's session-wide
`shared_vllm`) serves the module's tests on none.

The tiny model only ever answers `\\boxed{N}`, so the prompt config's `assistant_prefix` (a prefill) opens the code
block: the model's own continuation (its `\\boxed{N}`) lands in a Python comment after `print(a + b)`; the model ends
its turn inside the open block, kit runs the block and the model continues after the ```output block. What the
model writes is its own; the sum in the output block can only come from the sandbox."""

from __future__ import annotations

import json
import re
import shutil
import sys
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import SERVICES, VLLM_ARGS, addition_problems, cluster_yaml, need, rows

from pipeline_kit.inference.chat_template import ChatTemplate
from pipeline_kit.inference.magpie import row_seed

pytestmark = pytest.mark.models

LIBNUMA = Path("/lib/x86_64-linux-gnu/libnuma.so.1")  # the host's, which vLLM's venv was installed against
PREFILL = "```python\nprint({a} + {b})  # "
PROMPT = (
    "user: |-\n  Solve the following math problem. Make sure to put the answer (and only answer) inside \\boxed{{}}."
    f"\n\n  {{problem}}\nassistant_prefix: {json.dumps(PREFILL)}\n"
)


@pytest.fixture(scope="module")
def models():
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv and tiny model (tests/services/models_up.sh)")
    return SERVICES


class LoggingProxy:
    """Forwards every request to `target` (an http://host:port root) as it is, and keeps each POST's JSON body with
    the JSON the server answered (as `answer`)."""

    def __init__(self, target: str):
        bodies: list[dict] = []

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def forward(self, data: bytes | None) -> bytes:
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                request = urllib.request.Request(target + self.path, data, headers, method=self.command)
                try:
                    with urllib.request.urlopen(request, timeout=120) as r:
                        status, body = r.status, r.read()
                except urllib.error.HTTPError as e:
                    status, body = e.code, e.read()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                return body

            def do_GET(self):
                self.forward(None)

            def do_POST(self):
                data = self.rfile.read(int(self.headers["Content-Length"]))
                answer = self.forward(data)
                bodies.append({"path": self.path, **json.loads(data), "answer": json.loads(answer)})

        self.bodies = bodies
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def stop(self) -> None:
        self.server.shutdown()


def addition_inputs(folder: Path, n: int) -> tuple[Path, Path]:
    """(the problems, with their a, b and sum; the TIR prompt config) in `folder`."""
    pairs = [(i % 10, (3 * i + 1) % 10) for i in range(n)]
    problems = folder / "in.jsonl"
    problems.write_text("".join(json.dumps({"id": i, "problem": f"What is {a}+{b}?", "a": a, "b": b, "sum": a + b})
                                + "\n" for i, (a, b) in enumerate(pairs)))  # fmt: skip
    prompt = folder / "tir_prefill.yaml"
    prompt.write_text(PROMPT)
    return problems, prompt


def endpoint_counts(url: str) -> dict[str, int]:
    """{handler: successful requests} from vLLM's Prometheus metrics (/metrics beside /v1)."""
    with urllib.request.urlopen(url.removesuffix("/v1") + "/metrics", timeout=10) as r:
        text = r.read().decode()
    found = re.findall(r'^http_requests_total\{handler="([^"]+)",method="POST",status="2xx"\} (\S+)$', text, re.M)
    return {handler: int(float(count)) for handler, count in found}


def check_tir_records(records: list[dict], n: int) -> None:
    """Each sample: the prefill, the model's own text in the comment, the sandbox's sum in the output block, the
    model's continued turn after it, one code round counted as completed."""
    assert [r["id"] for r in records] == list(range(n))
    continued = 0
    for r in records:
        prefill = PREFILL.format(a=r["a"], b=r["b"])
        gen = r["generation"]
        assert gen.startswith(prefill), r
        written, rest = gen[len(prefill) :].split("```\n```output\n", 1)
        assert written.strip() and "\n" not in written.strip(), r  # the model's comment, on the print line
        assert rest.startswith(f"{r['sum']}\n```\n"), r  # printed by the sandbox
        continued += bool(rest.removeprefix(f"{r['sum']}\n```\n").strip())
        assert (r["code_rounds_executed"], r["num_code_timeouts"], r["code_last_status"]) == (1, 0, "completed"), r
        assert r["code_execution_time"] > 0 and r["num_generated_tokens"] > 0 and "error" not in r, r
    assert continued >= 0.9 * n, [r["generation"] for r in records]  # the model wrote after the output block


def test_tir_against_vllm_on_the_chat_and_text_endpoints(kit, shared_vllm, tmp_path):
    cluster, model, server = shared_vllm
    n = 8
    problems, prompt = addition_inputs(tmp_path, n)
    for endpoint, handler in (("chat", "/v1/chat/completions"), ("text", "/v1/completions")):
        before = endpoint_counts(server.url)
        res = kit("generate", *cluster, *model, f"--server_address={server.url}", f"--expname=tir-{endpoint}",
                  f"--input_file={problems}", f"--output_dir={tmp_path / endpoint}", f"++prompt_config={prompt}",
                  f"++server.endpoint={endpoint}", "++inference.tokens_to_generate=16", "--with_sandbox",
                  "++code_execution=true", "++max_concurrent_requests=4", timeout=300)  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
        check_tir_records(rows(tmp_path / endpoint / "output.jsonl"), n)
        after = endpoint_counts(server.url)
        sent = {h: after.get(h, 0) - before.get(h, 0) for h in after}
        # two requests per sample, all to this endpoint: the code, then the turn continued after the output
        assert {h: c for h, c in sent.items() if c} == {handler: 2 * n}, sent


@pytest.mark.slurm
def test_tir_against_vllm_on_slurm_in_containers(kit, configs, models, tmp_path):
    """One Slurm job, each part in a pyxis container of the base image: vLLM with the vLLM venv mounted, the client
    and the sandbox with this test's venv mounted (the image has neither vLLM nor kit's dependencies). The image also
    lacks libnuma, which vLLM's CPU kernels link against: the host's copy is mounted and put on LD_LIBRARY_PATH, and
    vLLM's cache goes to a mounted folder (the container's /root is read-only)."""
    need("SLURM_CONF", "the local Slurm cluster")
    need("KIT_TEST_PYXIS", "pyxis + enroot on the local Slurm")
    vllm_python, model = models["KIT_TEST_VLLM_PYTHON"], models["KIT_TEST_TINY_MODEL"]
    image, vllm_venv = SERVICES["KIT_TEST_BASE_SQSH"], Path(vllm_python).parent.parent
    home = re.search(r"^home = (.+)$", (vllm_venv / "pyvenv.cfg").read_text(), re.M)[1].strip()
    data = tmp_path / "data"
    (data / "lib").mkdir(parents=True)
    shutil.copy(LIBNUMA, data / "lib" / "libnuma.so.1")
    n = 4
    problems, prompt = addition_inputs(data, n)
    venv = Path(sys.executable).parent.parent
    mounts = [data, venv, Path(sys.base_prefix), vllm_venv, Path(home).parent, Path(model)]
    listed = ", ".join(f"'{m}:{m}'" for m in dict.fromkeys(mounts))
    extra = (
        f"account: root\npartition: debug\ncontainers:\n  vllm: {image}\n  kit: {image}\n  sandbox: {image}\n"
        f"mounts: [{listed}]\n"
    )
    env = [f"KIT_SANDBOX_PYTHON={sys.executable}", f"LD_LIBRARY_PATH={data / 'lib'}", f"VLLM_CACHE_ROOT={data}/cache"]
    env += [f"KIT_CLIENT_PYTHON={sys.executable}"]  # the mounted venv's, in the container (after cluster_yaml's)
    yaml = cluster_yaml("slurm", vllm_python, extra) + "".join(f"  - {e}\n" for e in env)
    d = configs("pyxvllm", yaml)
    res = kit("generate", "--cluster=pyxvllm", f"--config_dir={d}", "--expname=ctir", "--wait", "--server_type=vllm",
              f"--model={model}", VLLM_ARGS, f"--input_file={problems}", f"--output_dir={data / 'out'}",
              f"++prompt_config={prompt}", "++inference.tokens_to_generate=16", "--with_sandbox",
              "++code_execution=true", timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    check_tir_records(rows(data / "out" / "output.jsonl"), n)
    script = next((configs.job_dir / "experiments" / "ctir").glob("*/*_sbatch.sh")).read_text()
    assert re.findall(r"--container-image (\S+)", script) == [image] * 3, script
    server_log = next((configs.job_dir / "logs" / "ctir").glob("*/ctir/server.log")).read_text()
    assert server_log.count('"POST /v1/chat/completions HTTP/1.1" 200') == 2 * n  # the code, the continued turn


def test_magpie_pre_query_generation_against_vllm(kit, shared_vllm, models, tmp_path):
    """Each row's request is a text completion of the tiny model's template cut where the user's text would start,
    stopped at the end of the user turn, with the row's own seed; the problems come back, one per row, counted."""
    cluster, model, server = shared_vllm
    systems = ["You are a helpful assistant for algebra.", "You are a helpful assistant for number theory.", ""]
    requests = tmp_path / "requests.jsonl"
    requests.write_text("".join(json.dumps({"id": f"r{i}", "system": s}) + "\n" for i, s in enumerate(systems * 2)))
    proxy = LoggingProxy(server.url.removesuffix("/v1"))
    try:
        res = kit("generate", *cluster, *model, f"--server_address={proxy.url}", "--expname=magpie",
                  f"--input_file={requests}", f"--output_dir={tmp_path / 'out'}", "++generation_type=magpie",
                  "++server.endpoint=text", "++inference.temperature=1.0", "++inference.tokens_to_generate=16",
                  "--random_seeds=3", timeout=300)  # fmt: skip
    finally:
        proxy.stop()
    assert res.returncode == 0, res.stdout + res.stderr
    template = ChatTemplate(models["KIT_TEST_TINY_MODEL"])
    sent = sorted((b for b in proxy.bodies), key=lambda b: b["seed"])
    assert len(sent) == 6 and {b["path"] for b in sent} == {"/v1/completions"}, sent  # no chat request
    want = sorted((row_seed(3, line), template.pre_query(system)[0]) for line, system in enumerate(systems * 2, 1))
    assert [(b["seed"], b["prompt"]) for b in sent] == want, sent
    assert all(b["prompt"].endswith("<|im_start|>user\n") and "<|im_end|>" in b["stop"] for b in sent), sent
    assert all(b["add_special_tokens"] is False for b in sent), sent  # the prefix is whole: no second BOS
    written = rows(tmp_path / "out" / "output-rs3.jsonl")
    assert [r["id"] for r in written] == [f"r{i}" for i in range(6)]
    assert all(isinstance(r["problem"], str) and r["num_generated_tokens"] > 0 and "error" not in r for r in written)
    answered = {b["seed"]: b["answer"]["choices"][0]["text"].strip() for b in sent}
    assert {r["seed"]: r["problem"] for r in written} == answered  # each row's problem is vLLM's completion
    assert any(r["problem"] for r in written), written  # the model wrote text where the user's query goes
    logs = kit("logs", *cluster, "magpie").stdout
    assert re.search(r"wrote \S+output-rs3\.jsonl: 6 samples, 0 failed", logs), logs


def test_request_options_reach_vllm_and_it_applies_them(kit, shared_vllm, tmp_path):
    """Through a logging proxy in front of the real vLLM server: ++max_samples=4 of 6 problems sends exactly 4
    requests; each carries top_k, min_p, repetition_penalty, chat_template_kwargs, reasoning_effort and the stop
    list, and vLLM accepts them all (200). It applies them: with the stop string `boxed` every sample ends before it,
    while the same run without it writes `\\boxed` (the tiny model's answer format)."""
    cluster, model, server = shared_vllm
    problems = addition_problems(tmp_path / "in.jsonl", 6)
    options = ["++max_samples=4", "++inference.top_k=5", "++inference.min_p=0.05", "++inference.repetition_penalty=1.1",
               "++chat_template_kwargs.enable_thinking=false", "++inference.reasoning_effort=low",
               "++inference.tokens_to_generate=16", "++prompt_config=generic/math"]  # fmt: skip
    proxy = LoggingProxy(server.url.removesuffix("/v1"))
    try:
        for name, stop in (("stopped", ["++inference.stop_phrases=[boxed]"]), ("control", [])):
            res = kit("generate", *cluster, *model, f"--server_address={proxy.url}", f"--expname={name}",
                      f"--input_file={problems}", f"--output_dir={tmp_path / name}", *options, *stop, timeout=300)  # fmt: skip
            assert res.returncode == 0, res.stdout + res.stderr
    finally:
        proxy.stop()
    asked_stopped, asked_control = proxy.bodies[:4], proxy.bodies[4:]
    assert len(asked_stopped) == len(asked_control) == 4 and {b["path"] for b in proxy.bodies} == {
        "/v1/chat/completions"
    }
    want = {"top_k": 5, "min_p": 0.05, "repetition_penalty": 1.1, "reasoning_effort": "low",
            "chat_template_kwargs": {"enable_thinking": False}}  # fmt: skip
    assert all({k: b.get(k) for k in want} == want for b in proxy.bodies), proxy.bodies
    assert all(b["stop"] == ["boxed"] for b in asked_stopped) and all("stop" not in b for b in asked_control)
    assert all("error" not in b["answer"] for b in proxy.bodies), proxy.bodies  # every field accepted
    stopped, control = (rows(tmp_path / name / "output.jsonl") for name in ("stopped", "control"))
    assert [r["id"] for r in stopped] == [r["id"] for r in control] == [0, 1, 2, 3]
    assert not any("boxed" in r["generation"] for r in stopped), stopped
    assert sum("boxed" in r["generation"] for r in control) >= 3, control  # the tiny model boxes ~all its answers


def test_a_budget_over_vllms_window_is_clamped_and_counted_and_a_prompt_over_it_is_an_error(kit, shared_vllm, tmp_path):
    """The real vLLM, --max-model-len 512, asked for 500 tokens: a short prompt plus 500 overruns the window, and
    the sample records the max_tokens it was fitted to (512 - its prompt's tokens as vLLM counted them, whether vLLM
    cut it itself or kit asked again after a 400); a 600-word prompt alone overruns it: an error sample, the job
    succeeds. `kit status --verbose` counts the clamped requests."""
    cluster, model, server = shared_vllm
    problems = addition_problems(tmp_path / "in.jsonl", 2)
    with problems.open("a") as f:
        f.write(json.dumps({"id": 2, "problem": "add " * 600 + "1 and 2", "expected_answer": "3"}) + "\n")
    proxy = LoggingProxy(server.url.removesuffix("/v1"))
    try:
        res = kit("generate", *cluster, *model, f"--server_address={proxy.url}", "--expname=window",
                  f"--input_file={problems}", f"--output_dir={tmp_path / 'out'}", "++inference.tokens_to_generate=500",
                  "++prompt_config=generic/math", "++max_concurrent_requests=1", timeout=300)  # fmt: skip
        assert res.returncode == 0, res.stdout + res.stderr
    finally:
        proxy.stop()
    short, _, long = rows(tmp_path / "out" / "output.jsonl")
    answered = [b for b in proxy.bodies if "usage" in b["answer"]]
    prompt_tokens = answered[0]["answer"]["usage"]["prompt_tokens"]
    assert short["clamped_max_tokens"] == 512 - prompt_tokens and "error" not in short, short
    assert short["num_generated_tokens"] <= 512 - prompt_tokens
    assert long["generation"] == "" and "clamped_max_tokens" not in long
    assert long["error"].startswith("context length exceeded: HTTP 400: "), long
    assert "maximum context length is 512 tokens" in long["error"], long
    status = kit("status", "--verbose", "window", *cluster).stdout
    assert ", 2 max_tokens clamped to the context window" in status, status
