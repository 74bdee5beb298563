"""Training backends (`pipeline_kit.training.BACKENDS` and training/backends.py): the literal mapping names the
built-in ones, a user's `module:Class` plugs in its own trainer command, and a bad one is one line."""

from __future__ import annotations

import json
import textwrap

import pytest

from pipeline_kit.errors import UserError
from pipeline_kit.training import BACKENDS
from pipeline_kit.training.backends import TrainingBackend, load_backend

USER_BACKEND = textwrap.dedent(
    """
    from pipeline_kit.training.backends import TrainingBackend


    class EchoBackend(TrainingBackend):
        name = "echo"
        save_before_timeout = 45
        container_keys = ("echo",)

        def command(self, launch):
            return f"echo training {launch.cfg.algorithm} of {launch.cfg.model} on {launch.num_gpus} GPUs"
    """
)


def test_the_built_in_backends_load_without_their_libraries():
    for name in BACKENDS:
        backend = load_backend(name)
        assert isinstance(backend, TrainingBackend) and backend.name == name
    assert load_backend("nemo_rl").needs_container and not load_backend("nemo_rl").saves_on_signal
    assert load_backend("trl").container_keys == ("trainer", "kit")


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("trll", "--backend=trll is not one of trl, nemo_rl. Did you mean 'trl'?"),
        ("no_such_module:Backend", "--backend=no_such_module:Backend: cannot import no_such_module"),
        ("pipeline_kit.errors:UserError", "pipeline_kit.errors:UserError is not a TrainingBackend subclass"),
    ],
)
def test_a_bad_backend_is_one_error(name, needle):
    with pytest.raises(UserError) as e:
        load_backend(name)
    assert needle in str(e.value)


def test_a_users_backend_makes_the_trainer_command(kit, tmp_path):
    (tmp_path / "my_backend.py").write_text(USER_BACKEND)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    data = tmp_path / "sft.jsonl"
    data.write_text(
        "".join(json.dumps({"problem": f"{i}+1?", "generation": f"\\boxed{{{i + 1}}}"}) + "\n" for i in range(4))
    )
    res = kit("sft", "--backend=my_backend:EchoBackend", f"--model={model}", f"--training_data={data}",
              f"--output_dir={tmp_path / 'out'}", "--dry_run", env={"PYTHONPATH": str(tmp_path)})  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert f"echo training sft of {model} on 0 GPUs" in res.stdout, res.stdout
