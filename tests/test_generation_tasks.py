"""Generation types as task classes (pipeline_kit/inference/tasks.py: GenerationTask; names in registry.py): each
names what it reads, its prompt config's key and its own `.done` key fields; a type of one's own is
`++generation_type=package.module:Class`, run end to end; no code compares type names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import generate_config, problems, rows

from pipeline_kit.errors import UserError


def test_each_generation_type_names_its_input_and_key_fields(tmp_path):
    from pipeline_kit.inference import GENERATION_TYPES, done_key
    from pipeline_kit.inference.registry import task_class

    cfg = generate_config(tmp_path, "++server.model=m", "++generation_type=reward")
    key = done_key.key_fields(cfg, task_class("reward"), "digest")
    assert key["generation_type"] == "reward" and key["prompt_config"] == "generic/default"
    assert "prompt_config content" in key and key["input_file content"] == "digest"
    cfg = generate_config(tmp_path, "++server.model=m")
    assert "generation_type" not in done_key.key_fields(cfg, task_class("generate"), "digest")  # older keys stay
    genselect = task_class("genselect")
    assert (genselect.input_key, genselect.prompt_key) == ("input_dir", "genselect.prompt_config")
    assert task_class("magpie").prompt_key is None
    for name in GENERATION_TYPES:
        task = task_class(name)
        assert all(callable(getattr(task, m)) for m in ("check_inputs", "input_digest", "done_key_fields", "sample"))


def test_a_generation_type_of_ones_own_is_module_colon_class(tmp_path):
    from pipeline_kit.inference.magpie import MagpieTask
    from pipeline_kit.inference.registry import task_class

    assert task_class("pipeline_kit.inference.magpie:MagpieTask") is MagpieTask
    cfg = generate_config(tmp_path, "++server.model=m", "++generation_type=pipeline_kit.inference.magpie:MagpieTask")
    assert cfg.generation_type == "pipeline_kit.inference.magpie:MagpieTask"
    with pytest.raises(UserError, match=r"is not one of generate, reward, genselect, magpie\. Did you mean 'reward'"):
        task_class("rewrad")
    with pytest.raises(UserError, match=r"cannot import no_such_pkg\.mod \(ModuleNotFoundError"):
        task_class("no_such_pkg.mod:Task")
    with pytest.raises(UserError, match=r"module pipeline_kit\.inference\.magpie has no 'Nope'"):
        task_class("pipeline_kit.inference.magpie:Nope")


PLUGIN = """
from pipeline_kit.inference.generate_task import GenerateTask


class ShoutTask(GenerateTask):
    async def sample(self, i, model):
        record = await super().sample(i, model)
        return {**record, "generation": record["generation"].upper()}
"""


def test_a_plugged_in_generation_type_runs_end_to_end(kit, none_cluster, stub, tmp_path):
    server = stub()
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "my_tasks.py").write_text(PLUGIN)
    inp, out = problems(tmp_path, 2), tmp_path / "out"
    args = ["--server_type=openai", f"--server_address={server.url}", "--model=stub"]
    res = kit(
        "generate", *none_cluster, *args, f"--input_file={inp}", f"--output_dir={out}",
        "++generation_type=my_tasks:ShoutTask", env={"PYTHONPATH": str(plugins)},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    generated = rows(out / "output.jsonl")
    assert len(generated) == 2 and all(r["generation"] == r["generation"].upper() for r in generated)
    key = json.loads((out / "output.jsonl.done").read_text())["key"]
    assert key["generation_type"] == "my_tasks:ShoutTask" and key["prompt_config"] == "generic/default"


def test_no_code_compares_generation_type_names():
    package = Path(__file__).parent.parent / "pipeline_kit"
    hits = [
        f"{p}:{n}"
        for p in package.rglob("*.py")
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if "generation_type ==" in line or 'generation_type != "' in line
    ]  # (the ledger leaves the default type out of older keys: a compare with registry.DEFAULT_GENERATION_TYPE)
    assert not hits, hits
