"""Every server type serves the name its client asks for, and every flag kit renders exists in that server's own
command line: the jobs `kit generate` builds (server and client commands, with kit's options: --served_model_name,
ports, GPUs, nodes, --server_args) checked against the real parsers where the server installs here (vLLM's venv,
the transformers venv's `transformers serve`, kit's reward server) and against the flag lists of their
documentation for SGLang and TensorRT-LLM (tests/fixtures/server_flags/<type>.txt, each naming its source)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import SERVICES, need

from pipeline_kit.cluster.config import build_cluster_config
from pipeline_kit.components.server import SERVER_NAME
from pipeline_kit.errors import UserError
from pipeline_kit.jobs import GenerateSpec, JobOptions, generate_jobs
from pipeline_kit.overrides import take_override
from pipeline_kit.pipeline.model import Endpoint
from pipeline_kit.servers import SERVER_TYPES, ServerSpec, get_server_type
from pipeline_kit.servers.reward_server import build_parser

FIXTURES = Path(__file__).parent / "fixtures" / "server_flags"
SERVED = "qwen-math"  # the --served_model_name each type that takes one is asked for
# what the user passes through --server_args: real options of each server
SERVER_ARGS = {
    "vllm": "--max-model-len 4096 --seed 3",
    "sglang": "--mem-fraction-static 0.8 --random-seed 3",
    "trtllm": "--max_batch_size 64 --kv_cache_free_gpu_memory_fraction 0.8",
    "transformers": "--dtype bfloat16",
}
# where each server's own command line starts in kit's command (a type kit starts that is missing here fails
# test_every_server_type_is_checked): the program's marker, and how that server names the model it serves
PROGRAMS = {
    "vllm": {"vllm.entrypoints.openai.api_server": "vllm"},
    "sglang": {"sglang.launch_server": "sglang"},
    "trtllm": {"trtllm-serve": "trtllm"},
    "transformers": {
        "pipeline_kit.servers.transformers_seeded_serve": "transformers_seeded_serve",
        "pipeline_kit.servers.reward_server": "reward_server",
    },
}


def served_by(program: str, tokens: list[str]) -> str:
    """The model name the server answers to, by that server's own rule, from its argument list."""
    flags = {tokens[i]: tokens[i + 1] for i in range(len(tokens) - 1) if tokens[i].startswith("--")}
    positional = tokens[0]  # kit puts the model first where the server takes it as an argument
    if program == "vllm":
        return flags.get("--served-model-name", flags["--model"])
    if program == "sglang":
        return flags.get("--served-model-name", flags["--model-path"])
    if program == "trtllm":  # OpenAIServer: a folder's name, else the argument
        return Path(positional).name if Path(positional).is_dir() else positional
    if program == "transformers_seeded_serve":  # answers only requests for its model argument
        return positional
    if program == "reward_server":
        return flags.get("--served-model-name", positional)
    raise AssertionError(program)


def server_and_client(tmp_path: Path, spec: ServerSpec) -> tuple[str, str]:
    """The server's and the client's command lines of the job `kit generate` builds for `spec` on Slurm."""
    cluster = build_cluster_config({"executor": "slurm", "job_dir": str(tmp_path / "jobs")}, str(tmp_path / "c.yaml"))
    data = tmp_path / "in.jsonl"
    data.write_text('{"problem": "1+1"}\n')
    gen = GenerateSpec(spec, str(data), str(tmp_path / "out"), server_port=5000)
    (job,) = generate_jobs(cluster, gen, JobOptions("flags"))
    commands = {c.name: c for c in job.commands}
    client = commands["client"].command({SERVER_NAME: Endpoint("127.0.0.1", 5000)})
    return commands[SERVER_NAME].command, client


def client_model(client: str) -> str:
    """The model name in the client's requests: its ++server.model, read as the generation script reads it."""
    value, _ = take_override(shlex.split(client.splitlines()[-1]), "server.model")
    assert value is not None, client
    return value


def programs_in(command: str, server_type: str) -> list[tuple[str, list[str]]]:
    """Each server program kit's command runs (a type may choose one where the job runs) and its argument list."""
    found = []
    for marker, program in PROGRAMS[server_type].items():
        match = re.search(re.escape(marker) + r"(?: serve)?\s([^;&\n]*)", command)
        assert match, f"{marker} not in {command}"
        found.append((program, shlex.split(match.group(1), posix=True)))
    return found


def option_strings(tokens: list[str]) -> set[str]:
    return {t.split("=", 1)[0] for t in tokens if t.startswith("--")}


def fixture_flags(name: str) -> set[str]:
    lines = (FIXTURES / f"{name}.txt").read_text().splitlines()
    assert lines[0].startswith("#") and any("https://" in line for line in lines if line.startswith("#")), name
    return {line.strip() for line in lines if line.strip() and not line.startswith("#")}


def python_flags(python: str, script: str) -> set[str]:
    proc = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stdout.strip().splitlines()[-1]))


VLLM_FLAGS = """
import json
try:
    from vllm.utils.argparse_utils import FlexibleArgumentParser
except ImportError:
    from vllm.utils import FlexibleArgumentParser
try:  # what `python -m vllm.entrypoints.openai.api_server` parses with (moved in vLLM 0.3x)
    from vllm.entrypoints.launchers.cli_args import make_arg_parser
except ImportError:
    from vllm.entrypoints.openai.cli_args import make_arg_parser
print(json.dumps(sorted(make_arg_parser(FlexibleArgumentParser())._option_string_actions)))
"""
# `transformers serve` is a click command of transformers' CLI app (the one kit's launcher hands its arguments to)
TRANSFORMERS_FLAGS = """
import json
from transformers.cli.transformers import app
serve = app.commands["serve"]
print(json.dumps(sorted(o for p in serve.params for o in (*p.opts, *p.secondary_opts) if o.startswith("--"))))
"""


def real_flags(program: str) -> set[str]:
    """The option strings of the server's own parser, or of its documentation's list."""
    if program == "vllm":
        need("KIT_TEST_VLLM_PYTHON", "the vLLM venv")
        return python_flags(SERVICES["KIT_TEST_VLLM_PYTHON"], VLLM_FLAGS)
    if program == "transformers_seeded_serve":
        need("KIT_TEST_HF_PYTHON", "the transformers venv")
        return python_flags(SERVICES["KIT_TEST_HF_PYTHON"], TRANSFORMERS_FLAGS)
    if program == "reward_server":
        return set(build_parser()._option_string_actions)
    return fixture_flags(program)


def specs(server_type: str, model: str) -> list[ServerSpec]:
    """The runs of a type: one node and (where it spreads) two, with --served_model_name where it takes one."""
    kind = get_server_type(server_type)
    named = {"served_model_name": SERVED}
    try:
        kind.served_name(ServerSpec(server_type, model, **named))
    except UserError:
        named = {}
    out = [ServerSpec(server_type, model, gpus=2, server_args=SERVER_ARGS[server_type], **named)]
    if kind.multi_node:
        out.append(ServerSpec(server_type, model, gpus=8, nodes=2, server_args=SERVER_ARGS[server_type], **named))
    return out


def test_every_server_type_is_checked():
    started = {name for name in SERVER_TYPES if get_server_type(name).runs_locally}
    assert started == set(PROGRAMS) == set(SERVER_ARGS), "add the new server type to PROGRAMS and SERVER_ARGS"


@pytest.mark.parametrize("server_type", sorted(PROGRAMS))
def test_the_client_asks_for_the_name_the_server_serves_and_every_flag_exists(tmp_path, server_type):
    model = tmp_path / "models" / "Qwen2.5-Math-7B"
    model.mkdir(parents=True)
    for spec in specs(server_type, str(model)):
        server, client = server_and_client(tmp_path, spec)
        for program, tokens in programs_in(server, server_type):
            assert served_by(program, tokens) == client_model(client), (program, server, client)
            unknown = option_strings(tokens) - real_flags(program)
            assert not unknown, f"{program} has no {sorted(unknown)}: {server}"


def test_the_checks_catch_a_dropped_name_and_an_unknown_flag(tmp_path):
    """The checks above can fail: a server that serves another name than the client asks for, a flag it lacks."""
    tokens = ["--model", "/m/qwen", "--served-model-name", "other", "--tp", "2"]
    assert served_by("vllm", tokens) == "other" != client_model("x '++server.model=/m/qwen'")
    assert option_strings(tokens) - fixture_flags("sglang") == {"--model", "--tp"} - fixture_flags("sglang")
    assert "--tp" not in fixture_flags("sglang") and "--tp_size" in fixture_flags("trtllm")


def test_trtllm_serves_its_folders_name_and_refuses_another(tmp_path):
    """trtllm-serve takes no --served_model_name (up to 1.2) and names a local folder by its base name."""
    trtllm = get_server_type("trtllm")
    assert ServerSpec("trtllm", "/models/Qwen2.5-Math-7B/").name == "Qwen2.5-Math-7B"
    assert ServerSpec("trtllm", "Qwen/Qwen2.5-Math-7B").name == "Qwen/Qwen2.5-Math-7B"  # a Hugging Face id
    assert ServerSpec("trtllm", "/m/qwen", served_model_name="qwen").name == "qwen"
    with pytest.raises(UserError, match=r"serves /m/qwen as 'qwen' .* drop --served_model_name=x"):
        trtllm.command(ServerSpec("trtllm", "/m/qwen", served_model_name="x"))
    with pytest.raises(UserError, match=r"serves the model under its path .* drop --served_model_name=x"):
        ServerSpec("transformers", "/m/qwen", served_model_name="x").name  # noqa: B018


def test_an_external_endpoint_is_asked_for_the_name_given(tmp_path):
    spec = ServerSpec("openai", "gpt-x", address="http://api.example:8000/v1", served_model_name="gpt-y")
    cluster = build_cluster_config({"executor": "slurm", "job_dir": str(tmp_path)}, str(tmp_path / "c.yaml"))
    data = tmp_path / "in.jsonl"
    data.write_text('{"problem": "1+1"}\n')
    (job,) = generate_jobs(cluster, GenerateSpec(spec, str(data), str(tmp_path / "out")), JobOptions("ext"))
    assert client_model(job.commands[0].command({})) == "gpt-y"
    assert os.path.basename(str(tmp_path)) not in client_model(job.commands[0].command({}))
