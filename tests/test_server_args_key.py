"""--server_args in the `.done` key (pipeline_kit/inference/done_key.py): `--flag=value` and `--flag value` read the
same, the flags that cannot change a sample (UNKEYED_SERVER_ARGS) are left out, empty server args keep the older
keys, and through the real CLI a changed dtype is refused (exit 2, naming it) while a changed GPU memory fraction
reuses the outputs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import generate_config, problems, stub_server_type

from pipeline_kit.errors import UserError
from pipeline_kit.inference import done_key
from pipeline_kit.inference.registry import task_class

STUB = Path(__file__).parent / "stub_openai_server.py"


@pytest.mark.parametrize(
    "text, want",
    [
        ("--dtype float32", [("--dtype", "float32")]),
        ("--dtype=float32", [("--dtype", "float32")]),
        ("--max_model_len 4096", [("--max-model-len", "4096")]),  # `_` reads as `-` in a long flag
        ("--enforce-eager --seed -1", [("--enforce-eager", True), ("--seed", "-1")]),  # a negative number is a value
        ("-tp 2 --quantization 'awq marlin'", [("-tp", "2"), ("--quantization", "awq marlin")]),
        ("--chat-template=a=b", [("--chat-template", "a=b")]),
        ("stray --x", [("", "stray"), ("--x", True)]),
        ("", []),
    ],
)
def test_server_args_are_parsed_with_shlex_and_normalised(text, want):
    assert done_key.parse_server_args(text) == want


def test_keyed_fields_leave_out_what_cannot_change_a_sample():
    given = "--gpu-memory-utilization 0.5 --tensor_parallel_size=2 -pp 2 --port 8000 --host 0.0.0.0 --dtype half"
    given += " --disable-log-requests --uvicorn-log-level=warning --lora-modules a --lora-modules b"
    assert done_key.server_arg_fields(given) == {
        "server_args --dtype": "half",
        "server_args --lora-modules": ["a", "b"],
    }
    same = "--dtype=half --lora-modules=a --lora-modules=b"
    assert done_key.server_arg_fields(same) == done_key.server_arg_fields(given)
    assert done_key.server_arg_fields("--gpu-memory-utilization=0.9") == {}
    # batching and scheduling: what one changes to bring a crashed server back (vLLM CPU's seeded chunked prefill)
    scheduling = "--no-enable-chunked-prefill --max_num_seqs 8 --max-num-batched-tokens=4096 --enforce-eager -dp 2"
    assert done_key.server_arg_fields(scheduling + " --chunked-prefill-size 512 --disable-cuda-graph") == {}
    # a key recorded while such a flag was still keyed matches the key without it
    old = {"server.model": "m", "server_args --enforce-eager": True, "server_args --dtype": "half"}
    assert done_key.changed_fields(old, {"server.model": "m", "server_args --dtype": "half"}) == []
    assert done_key.changed_fields(old, {"server.model": "m"}) == ['server_args --dtype: "half" → null']
    # what the client is passed: the keyed flags, normalised, reading back as the same fields
    passed = done_key.keyed_server_args(given + " -q awq stray --note 'a b'")
    assert passed == "--dtype=half --lora-modules=a --lora-modules=b -q awq stray '--note=a b'"
    assert done_key.server_arg_fields(passed) == done_key.server_arg_fields(given + " -q awq stray --note 'a b'")
    assert done_key.keyed_server_args("--port 1 -tp 2") == ""
    with pytest.raises(UserError, match="--server_args=.*fix its quotes"):
        done_key.parse_server_args("--dtype 'half")


def test_empty_server_args_keep_the_older_keys(tmp_path):
    cfg = generate_config(tmp_path, "++server.model=m")
    key = done_key.key_fields(cfg, task_class("generate"), "digest")
    assert not any(name.startswith("server_args") for name in key)
    unkeyed = done_key.key_fields(
        generate_config(tmp_path, "++server.model=m", "++server.server_args='--port 1 -tp 2'"),
        task_class("generate"),
        "digest",
    )
    assert unkeyed == key
    keyed = done_key.key_fields(
        generate_config(tmp_path, "++server.model=m", "++server.server_args='--dtype float32'"),
        task_class("generate"),
        "digest",
    )
    assert keyed == {**key, "server_args --dtype": "float32"}


def test_a_changed_server_arg_is_refused_and_an_unkeyed_one_reuses_the_outputs(kit, none_cluster, tmp_path):
    requests = tmp_path / "requests.jsonl"
    env = stub_server_type(tmp_path, requests)
    inp, out = problems(tmp_path, 3), tmp_path / "out"
    args = [*none_cluster, "--server_type=stub_type:STUB", "--model=stub", f"--input_file={inp}", f"--output_dir={out}"]
    first = kit("generate", *args, "--server_args=--dtype bfloat16 --tensor-parallel-size 1", env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    assert json.loads((out / "output.jsonl.done").read_text())["key"]["server_args --dtype"] == "bfloat16"
    sent = len(requests.read_text().splitlines())

    changed = kit("generate", *args, "--server_args=--dtype=float32", env=env)
    assert changed.returncode == 2, changed.stdout + changed.stderr
    line = changed.stderr.strip()
    assert "\n" not in line and "Traceback" not in line, line
    assert 'server_args --dtype: "bfloat16" → "float32"' in line and "--rerun_done" in line

    same = kit("generate", *args, "--server_args=--dtype=bfloat16 --gpu-memory-utilization 0.5", env=env)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "units in" in same.stdout + same.stderr and "are done" in same.stdout + same.stderr
    assert len(requests.read_text().splitlines()) == sent  # nothing asked again
