"""Server types: the exact command lines each one would run (GPU servers cannot run here), TP and multi-node
flags, --server_args pass-through, and the errors for impossible requests."""

from __future__ import annotations

import re

import pytest

from pipeline_kit.errors import UserError
from pipeline_kit.servers import SERVER_TYPES, ServerSpec, ServerType, get_server_type
from pipeline_kit.servers.base import HEAD_HOST


def command(kind: str, **kw) -> str:
    return get_server_type(kind).command(ServerSpec(kind, "/models/qwen", **kw), port="8000")


def test_every_registered_name_is_a_server_type_of_that_name_and_others_are_refused():
    assert sorted(SERVER_TYPES) == ["openai", "sglang", "transformers", "trtllm", "vllm"]
    for name in SERVER_TYPES:
        server_type = get_server_type(name)
        assert isinstance(server_type, ServerType) and server_type.name == name
    with pytest.raises(UserError, match=r"--server_type=vlm is not one of openai, .*Did you mean 'vllm'\?"):
        get_server_type("vlm")


def test_a_users_server_type_is_module_colon_object(tmp_path, monkeypatch):
    """The registry style of every kit registry: a shipped name, or the user's own `package.module:OBJECT`."""
    (tmp_path / "my_servers.py").write_text(
        "from pipeline_kit.servers.vllm import VLLM\n"
        "import dataclasses\n"
        "MINE = dataclasses.replace(VLLM, name='mine')\n"
        "NOT_ONE = 3\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    assert get_server_type("my_servers:MINE").name == "mine"
    with pytest.raises(UserError, match=r"my_servers:NOT_ONE is of type int, not a ServerType"):
        get_server_type("my_servers:NOT_ONE")
    with pytest.raises(UserError, match=r"cannot import no_such_module"):
        get_server_type("no_such_module:X")


KEEP_ALIVE = 'VLLM_HTTP_TIMEOUT_KEEP_ALIVE="${VLLM_HTTP_TIMEOUT_KEEP_ALIVE:-30}" '


def test_vllm_single_node_tensor_parallel_and_args():
    assert command("vllm", gpus=8, server_args="--max-model-len 4096") == (
        KEEP_ALIVE + '"${KIT_SERVER_PYTHON:-python3}" -m vllm.entrypoints.openai.api_server --model /models/qwen'
        " --served-model-name /models/qwen --host 0.0.0.0 --port 8000 --tensor-parallel-size 8 --max-model-len 4096"
    )


def test_vllm_on_cpu_gets_a_kv_cache_that_fits_unless_the_user_sized_it():
    """vLLM CPU would reserve 0.9 of the node's memory and refuse to start when less is free."""
    kv_cache = 'VLLM_CPU_KVCACHE_SPACE="${VLLM_CPU_KVCACHE_SPACE:-2}" '
    assert command("vllm", gpus=0).startswith(kv_cache + KEEP_ALIVE + '"${KIT_SERVER')
    for own in ("--kv-cache-memory-bytes 1073741824", "--gpu-memory-utilization 0.5"):
        assert command("vllm", gpus=0, server_args=own).startswith(KEEP_ALIVE + '"${KIT_SERVER_PYTHON')
    assert command("vllm", gpus=1).startswith(KEEP_ALIVE + '"${KIT_SERVER_PYTHON')


def test_vllm_on_cpu_prefills_whole_prompts_unless_the_user_chose():
    """A CPU engine dies on a seeded request whose prompt was prefilled in parts ("CPU Generator does not use
    offset"): kit turns chunked prefill off there; a GPU keeps vLLM's default, and the user's own flag wins."""
    assert command("vllm", gpus=0).endswith("--tensor-parallel-size 1 --no-enable-chunked-prefill")
    assert command("vllm", gpus=0, server_args="--dtype float32").endswith(
        "--no-enable-chunked-prefill --dtype float32"
    )
    for own in ("--enable-chunked-prefill", "--enable_chunked_prefill=True", "--no-enable-chunked-prefill"):
        assert command("vllm", gpus=0, server_args=own).count("chunked") == 1, own
    assert "chunked" not in command("vllm", gpus=8)


def test_vllm_multi_node_goes_through_ray():
    cmd = command("vllm", gpus=8, nodes=2, served_model_name="qwen")
    assert cmd.startswith('if [ "${SLURM_PROCID:-0}" = 0 ]; then ray start --head --port=6379 && ')
    assert "--tensor-parallel-size 8 --pipeline-parallel-size 2 --distributed-executor-backend ray" in cmd
    assert cmd.endswith(f"else ray start --address={HEAD_HOST}:6379 --block; fi")


def test_sglang_multi_node_uses_dist_init_flags():
    assert command("sglang", gpus=8, nodes=2) == (
        '"${KIT_SERVER_PYTHON:-python3}" -m sglang.launch_server --model-path /models/qwen'
        " --served-model-name /models/qwen --host 0.0.0.0 --port 8000 --tp-size 16"
        f" --nnodes 2 --node-rank ${{SLURM_PROCID:-0}} --dist-init-addr {HEAD_HOST}:20000"
    )


def test_trtllm_and_transformers_commands():
    assert command("trtllm", gpus=4) == "trtllm-serve /models/qwen --host 0.0.0.0 --port 8000 --tp_size 4"
    # a reward model (config.json names a *ForSequenceClassification) gets kit's reward server, decided in the job
    where = "/models/qwen --device cpu --host 0.0.0.0 --port 8000"
    assert command("transformers") == (
        'if grep -qs ForSequenceClassification /models/qwen/config.json; then "${KIT_SERVER_PYTHON:-python3}" -m '
        f"pipeline_kit.servers.reward_server {where}; else "
        'export HF_HUB_CACHE="${HF_HUB_CACHE:-$KIT_LOG_DIR/hf-cache}" && mkdir -p "$HF_HUB_CACHE" && '
        f'"${{KIT_SERVER_PYTHON:-python3}}" -m pipeline_kit.servers.transformers_seeded_serve {where}; fi'
    )


def test_external_endpoint_starts_nothing_and_needs_an_address():
    openai = get_server_type("openai")
    spec = ServerSpec("openai", "gpt-x", address="http://api.example:8000/v1")
    assert openai.base_url(spec, "ignored", 1) == "http://api.example:8000/v1"
    with pytest.raises(UserError, match="nothing to start"):
        openai.command(spec)
    with pytest.raises(UserError, match="--server_address"):
        openai.base_url(ServerSpec("openai", "gpt-x"), "h", 1)


@pytest.mark.parametrize(
    "kind, kw, needle",
    [
        ("vlm", {}, "Did you mean 'vllm'"),
        ("trtllm", {"nodes": 2}, "one node only"),
        ("transformers", {"nodes": 3}, "one node"),
    ],
)
def test_impossible_requests_are_user_errors(kind, kw, needle):
    with pytest.raises(UserError, match=needle):
        command(kind, **kw)


@pytest.mark.slurm
def test_multi_node_head_is_the_first_node_of_the_servers_step(kit, configs):
    """The head address a multi-node server's other nodes join, evaluated inside a real 2-node Slurm step."""
    from conftest import need

    need("SLURM_CONF", "the local Slurm cluster")
    d = configs("slurm", "executor: slurm\njob_dir: JOB_DIR\naccount: root\npartition: debug\n")
    res = kit(
        "run_cmd",
        "--cluster=slurm",
        f"--config_dir={d}",
        "--expname=heads",
        "--num_nodes=2",
        "--wait",
        f"--command=echo head=$SLURMD_NODENAME:{HEAD_HOST}",
    )
    assert res.returncode == 0, res.stdout + res.stderr
    logs = kit("logs", "--cluster=slurm", f"--config_dir={d}", "heads").stdout
    heads = sorted(set(re.findall(r"head=(\S+)", logs)))
    assert len(heads) == 2 and {h.split(":")[1] for h in heads} == {heads[0].split(":")[0]}, logs
