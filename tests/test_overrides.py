"""The one `++key=value` grammar (pipeline_kit/overrides.py): what counts as an override, a flag of several, the
routing to inner scripts, and that no other module parses the grammar itself."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline_kit.errors import UserError
from pipeline_kit.overrides import is_override, override_key, split_overrides, take_override


def test_what_counts_as_an_override():
    assert is_override("++a.b=1") and is_override("++a=")
    assert not any(is_override(a) for a in ("+a=1", "a=1", "++a", "++=1", "--a=1"))
    assert [override_key(a) for a in ("++a.b=1", "+c=2", "d=3=4")] == ["a.b", "c", "d"]
    assert take_override(("++x=1", "++y=a b", "++x=2"), "x") == ("2", ("++y=a b",))
    assert take_override(("++y='a b'",), "y") == ("a b", ())


def test_a_flag_of_several_overrides_is_split_like_a_shell_and_checked():
    assert split_overrides("--sft_args", "++lr=1e-5 ++name='a b'") == ("++lr=1e-5", "++name=a b")
    with pytest.raises(UserError, match=r"--sft_args: 'lr=1' is not \+\+key=value"):
        split_overrides("--sft_args", "++a=1 lr=1")
    with pytest.raises(UserError, match="--sft_args: cannot split"):
        split_overrides("--sft_args", "++a='1")


def test_training_and_generation_share_the_grammar_and_its_errors():
    from pipeline_kit.inference.config import check_generate_overrides
    from pipeline_kit.training.config import check_train_overrides

    with pytest.raises(UserError, match=r"training: unknown key \+\+lrate"):
        check_train_overrides(["++lrate=1"])
    with pytest.raises(UserError, match=r"generation: unknown key \+\+temperature\. Did you mean"):
        check_generate_overrides(["++temperature=1"])


def test_only_the_grammar_module_parses_overrides():
    package = Path(__file__).parent.parent / "pipeline_kit"
    parsers = [p.relative_to(package).as_posix() for p in package.rglob("*.py") if "OverridesParser" in p.read_text()]
    assert parsers == ["overrides.py"], parsers


# plain overrides of scalar fields, as researchers pass them: each list is parsed with and without hydra
PLAIN_CASES = {
    "generation": [
        ["++input_file=/d/in.jsonl", "++output_dir=/o", "++server.base_url=http://h:8000/v1", "++server.model=/m"],
        ["++inference.temperature=0.7", "++inference.tokens_to_generate=4096", "++prompt_config=generic/math"],
        ["++inference.temperature=1", "++inference.top_p=.95", "++inference.top_k=-1", "++inference.random_seed=null"],
        ["++max_concurrent_requests=1_024", "++prompt_config=generic/math", "++code_execution=True"],
        ["++server.ready_timeout=600", "++server.gpus=8", "++inference.tokens_to_generate=1e4"],  # 1e4: not an int
        ["++prompt_config=1e-5", "++server.model=007", "++code_execution=yes"],  # hydra reads these otherwise
        ["++input_file='/d/my in.jsonl'", "++server.model='8'", "++server.gpus='8'", "++prompt_config='a${b}'"],
        ["++units=[rs0_chunk_1,rs1_chunk_1]", "++server.server_log=/logs/server.log"],  # a job's own arguments
        ["++units=[]"],
        ["++units=[rs0,7]"],  # 7 is an int to hydra, made a string by OmegaConf
    ],
    "training": [
        ["++algorithm=sft", "++model=/m", "++training_data=/d.jsonl", "++output_dir=/o", "++learning_rate=1e-5"],
        ["++algorithm=grpo", "++model=/m", "++training_data=/d", "++output_dir=/o", "++num_generations=8"],
        ["++algorithm=dpo", "++model=/m", "++training_data=/d", "++output_dir=/o", "++beta=0.1", "++max_steps=3"],
    ],
}


@pytest.mark.parametrize("what", sorted(PLAIN_CASES))
def test_plain_overrides_give_the_object_hydra_gives(monkeypatch, what):
    """parse_overrides sets plain values without hydra; the object must equal the one hydra and OmegaConf build
    (its fields feed the .done keys of finished units), for every field, and required keys left out still fail."""
    from pipeline_kit import overrides
    from pipeline_kit.inference.config import GenerateConfig
    from pipeline_kit.training.config import TrainConfig

    schema = {"generation": GenerateConfig, "training": TrainConfig}[what]
    base = PLAIN_CASES[what][0][:4]
    for case in PLAIN_CASES[what]:
        args = [*base, *case] if what == "generation" else case
        try:
            fast = overrides.parse_overrides(args, schema, what)
        except UserError as e:
            fast = f"error: {e}"
        with monkeypatch.context() as m:
            m.setattr(overrides, "_plain_config", lambda *a: None)
            try:
                full = overrides.parse_overrides(args, schema, what)
            except UserError as e:
                full = f"error: {e}"
        assert fast == full, args
        assert type(fast) is type(full)
    with pytest.raises(UserError, match=r"\+\+model is required"):
        overrides.parse_overrides(["++algorithm=sft"], TrainConfig, "training")


def test_plain_overrides_need_no_hydra():
    import subprocess
    import sys

    probe = (
        "import sys; from pipeline_kit.overrides import parse_overrides; from pipeline_kit.inference.config import "
        "GenerateConfig; parse_overrides(['++input_file=/i', '++output_dir=/o', '++server.server_type=vllm', "
        "'++server.model=/m', '++server.base_url=http://h:1/v1', '++inference.temperature=0.7'], GenerateConfig, 'generation'); print('hydra' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
