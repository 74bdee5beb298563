"""Tool-integrated reasoning against the real CPU vLLM server that serves the tiny model (tests/models/): the
requests go to vLLM, the sandbox (`--with_sandbox`) runs the code, its output is spliced in and the model goes on
in the same assistant turn, on the chat endpoint (continue_final_message) and on the text endpoint (the client
renders the chat template and appends the answer so far). Then the same run on the local Slurm, each part in a
pyxis container. Also Magpie's pre-query generation against vLLM's text endpoint.

The tiny model only ever answers `\\boxed{N}`, so the prompt config's `assistant_prefix` (a prefill) opens the code
block: the model's own continuation (its `\\boxed{N}`) lands in a Python comment after `print(a + b)`; the model ends
its turn inside the open block, kit runs the block and the model continues after the ```output block. What the
model writes is its own; the sum in the output block can only come from the sandbox."""

from __future__ import annotations

import json
import re
import sys
import urllib.request
from pathlib import Path

import pytest
from conftest import SERVICES, VLLM_ARGS, cluster_yaml, need, rows
from test_generate_vllm import ForegroundServer

pytestmark = pytest.mark.models

PREFILL = "```python\nprint({a} + {b})  # "
PROMPT = (
    "user: |-\n  Solve the following math problem. Make sure to put the answer (and only answer) inside \\boxed{{}}."
    f"\n\n  {{problem}}\nassistant_prefix: {json.dumps(PREFILL)}\n"
)


@pytest.fixture
def models():
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv and tiny model (tests/services/models_up.sh)")
    return SERVICES


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


def test_tir_against_vllm_on_the_chat_and_text_endpoints(kit, configs, models, tmp_path):
    d = configs("local", cluster_yaml("none", models["KIT_TEST_VLLM_PYTHON"]))
    cluster = ["--cluster=local", f"--config_dir={d}"]
    model = ["--server_type=vllm", f"--model={models['KIT_TEST_TINY_MODEL']}"]
    server = ForegroundServer(tmp_path, *cluster, *model, VLLM_ARGS)
    n = 8
    problems, prompt = addition_inputs(tmp_path, n)
    try:
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
    finally:
        assert server.interrupt() == 130


@pytest.mark.slurm
def test_tir_against_vllm_on_slurm_in_containers(kit, configs, models, tmp_path):
    """One Slurm job: vLLM in the base image with the vLLM venv mounted, the client and the sandbox in the base
    image with this test's venv mounted (the image has neither vLLM nor kit's dependencies)."""
    need("SLURM_CONF", "the local Slurm cluster")
    need("KIT_TEST_PYXIS", "pyxis + enroot on the local Slurm")
    vllm_python, model, image = (
        models["KIT_TEST_VLLM_PYTHON"],
        models["KIT_TEST_TINY_MODEL"],
        SERVICES["KIT_TEST_BASE_SQSH"],
    )
    vllm_base = Path(vllm_python).parent.parent / "pyvenv.cfg"
    home = re.search(r"^home = (.+)$", vllm_base.read_text(), re.M)[1].strip()  # the vLLM venv's interpreter
    data = tmp_path / "data"
    data.mkdir()
    n = 4
    problems, prompt = addition_inputs(data, n)
    venv = Path(sys.executable).parent.parent
    mounts = [data, venv, Path(sys.base_prefix), Path(vllm_python).parent.parent, Path(home).parent, Path(model)]
    listed = ", ".join(f"'{m}:{m}'" for m in dict.fromkeys(mounts))
    extra = (
        f"account: root\npartition: debug\ncontainers:\n  vllm: {image}\n  kit: {image}\n  sandbox: {image}\n"
        f"mounts: [{listed}]\n"
    )
    yaml = cluster_yaml("slurm", vllm_python, extra).rstrip("\n") + f"\n  - KIT_SANDBOX_PYTHON={sys.executable}\n"
    d = configs("pyxvllm", yaml)
    res = kit("generate", "--cluster=pyxvllm", f"--config_dir={d}", "--expname=ctir", "--wait", "--server_type=vllm",
              f"--model={model}", VLLM_ARGS, f"--input_file={problems}", f"--output_dir={data / 'out'}",
              f"++prompt_config={prompt}", "++inference.tokens_to_generate=16", "--with_sandbox",
              "++code_execution=true", timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    check_tir_records(rows(data / "out" / "output.jsonl"), n)
    script = next((configs.job_dir / "experiments" / "ctir").glob("*/*_sbatch.sh")).read_text()
    assert re.findall(r"--container-image (\S+)", script) == [image] * 3, script
