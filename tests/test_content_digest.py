"""The one content digest (pipeline_kit/content_digest.py) behind generation `.done` keys and recipe stages: a file's
bytes, cached by (path, size, mtime_ns, ctime_ns) so a rerun costs a stat, not a read; a checkpoint rewritten in
place with the same size is a new digest, so the dependent recipe stage and the generation `.done` key change."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import generate_config

from pipeline_kit import content_digest
from pipeline_kit.errors import UserError


@pytest.fixture(autouse=True)
def digest_cache(tmp_path, monkeypatch):
    cache = tmp_path / "cache" / "digests.json"
    monkeypatch.setenv(content_digest.CACHE_VAR, str(cache))
    return cache


def count_reads(monkeypatch) -> list[Path]:
    reads: list[Path] = []
    real = content_digest.hash_bytes

    def counting(path):
        reads.append(path)
        return real(path)

    monkeypatch.setattr(content_digest, "hash_bytes", counting)
    return reads


def rewrite_same_size(path: Path, data: bytes) -> None:
    """A checkpoint replaced in place: same size, other bytes, a later mtime."""
    before = path.stat()
    path.write_bytes(data)
    assert path.stat().st_size == before.st_size
    if path.stat().st_mtime_ns == before.st_mtime_ns:  # a coarse clock: make the rewrite visible as a real one would
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000))


def test_a_file_digest_is_its_bytes_sha256_and_an_unchanged_200mb_file_is_not_read_again(
    tmp_path, monkeypatch, digest_cache
):
    big = tmp_path / "model.safetensors"
    block = os.urandom(1 << 20)
    with big.open("wb") as f:
        for i in range(200):
            f.write(block[:-1] + bytes([i]))
    reads = count_reads(monkeypatch)
    try:
        start = time.perf_counter()
        first = content_digest.file_digest(big)
        first_s = time.perf_counter() - start
        start = time.perf_counter()
        second = content_digest.file_digest(big)
        second_s = time.perf_counter() - start
        assert first == second and len(reads) == 1, reads
        assert second_s < first_s / 10, (first_s, second_s)
        # a fresh process (the cache file, not this process's memory) does not read it either
        code = (
            "import sys, pipeline_kit.content_digest as c\n"
            "c.hash_bytes = lambda path: sys.exit(f'read {path}')\n"
            f"print(c.file_digest({str(big)!r}))"
        )
        again = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert again.returncode == 0 and again.stdout.strip() == first, again.stderr
        assert str(big.resolve()) in json.loads(digest_cache.read_text())
    finally:
        big.unlink()
    small = tmp_path / "in.jsonl"
    small.write_text('{"a": 1}\n')
    assert content_digest.file_digest(small) == hashlib.sha256(small.read_bytes()).hexdigest()[:16]


def test_a_checkpoint_rewritten_in_place_with_the_same_size_is_a_new_digest(tmp_path, monkeypatch):
    model = tmp_path / "ckpt"
    (model / "sub").mkdir(parents=True)
    (model / "config.json").write_text("{}")
    weights = model / "sub" / "weights.bin"
    weights.write_bytes(b"A" * 4096)
    reads = count_reads(monkeypatch)
    before = content_digest.folder_digest(model)
    assert content_digest.folder_digest(model) == before and len(reads) == 2  # the second costs stats only
    rewrite_same_size(weights, b"B" * 4096)
    after = content_digest.folder_digest(model)
    assert after != before and len(reads) == 3  # only the rewritten file is read again
    # a folder's digest covers the files' relative paths too
    (model / "sub" / "weights.bin").rename(model / "weights.bin")
    assert content_digest.folder_digest(model) != after
    assert content_digest.path_digest(tmp_path / "elsewhere") is None


def test_an_unreadable_file_is_one_line_naming_it(tmp_path):
    with pytest.raises(UserError, match=r"\+\+input_file=.*missing.jsonl: cannot read it"):
        content_digest.file_digest(tmp_path / "missing.jsonl", "++input_file=")


def test_a_broken_or_unwritable_cache_only_costs_reads(tmp_path, monkeypatch, digest_cache):
    digest_cache.parent.mkdir(parents=True)
    digest_cache.write_text("not json")
    data = tmp_path / "d.txt"
    data.write_text("x")
    assert content_digest.file_digest(data) == hashlib.sha256(b"x").hexdigest()[:16]
    monkeypatch.setenv(content_digest.CACHE_VAR, str(tmp_path / "a-file" / "sub" / "digests.json"))
    (tmp_path / "a-file").write_text("")
    assert content_digest.file_digest(data) == hashlib.sha256(b"x").hexdigest()[:16]


def test_the_dependent_recipe_stage_reruns_when_its_checkpoint_is_rewritten_in_place(tmp_path):
    from pipeline_kit.recipes.stages import DONE, Stage, plan_stages

    model = tmp_path / "sft" / "final"
    model.mkdir(parents=True)
    (model / "model.safetensors").write_bytes(b"\x00" * 1024)

    def stages():
        return [
            Stage("eval", {"benchmarks": "arith"}, str(tmp_path / "eval"), [], [str(model)]),
            Stage("report", {"table": True}, str(tmp_path / "report"), []),
        ]

    first = plan_stages("r", stages())
    for plan in first:
        Path(plan.stage.folder).mkdir()
        (Path(plan.stage.folder) / DONE).write_text(json.dumps({"key": plan.key}))
    assert [p.action for p in plan_stages("r", stages())] == ["skip", "skip"]
    rewrite_same_size(model / "model.safetensors", b"\x01" * 1024)
    again = plan_stages("r", stages())
    assert [(p.action, p.reason) for p in again] == [
        ("rerun", "its settings changed"),
        ("rerun", "an earlier stage changed"),
    ]


def test_a_generation_done_key_holds_a_visible_model_folders_content(tmp_path):
    from pipeline_kit.inference import done_key
    from pipeline_kit.inference.registry import task_class

    model = tmp_path / "model"
    model.mkdir()
    (model / "weights.bin").write_bytes(b"A" * 64)
    cfg = generate_config(tmp_path, f"++server.model={model}")
    task = task_class(cfg.generation_type)
    key = done_key.key_fields(cfg, task, task.input_digest(cfg))
    assert key["server.model"] == str(model) and key["server.model content"] == content_digest.folder_digest(model)
    assert key["input_file content"] == content_digest.file_digest(cfg.input_file)
    out = tmp_path / "output.jsonl"
    out.write_text("")
    done_key.write_done(out, key)
    rewrite_same_size(model / "weights.bin", b"B" * 64)
    changed = done_key.key_fields(cfg, task, task.input_digest(cfg))
    with pytest.raises(UserError, match="server.model content"):
        done_key.check_done(out, changed, "--rerun_done")
    # a served name, or a path kit cannot see from here, is keyed by its name alone
    for name in ("Qwen/Qwen3-8B", "/models/on/the/cluster"):
        cfg = generate_config(tmp_path, f"++server.model={name}")
        assert "server.model content" not in done_key.key_fields(cfg, task, "x")
