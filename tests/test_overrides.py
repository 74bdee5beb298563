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
