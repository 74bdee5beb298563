"""The benchmark registry (pipeline_kit/benchmarks/): its literal list of shipped benchmarks agrees with the modules
in datasets_registry/, and an unknown name is one line that suggests the closest. Loading and preparing the
benchmarks themselves: test_prepare_data.py."""

import ast
from pathlib import Path

import pytest

import pipeline_kit.benchmarks as registry
from pipeline_kit.benchmarks import SHIPPED_BENCHMARKS, get_benchmark
from pipeline_kit.errors import UserError

ROOT = Path(__file__).resolve().parent.parent


def test_shipped_benchmarks_is_a_literal_mapping():
    """A reader sees every shipped benchmark in one place: a dict literal of strings, not a folder scan."""
    tree = ast.parse(Path(registry.__file__).read_text())
    (node,) = [
        n.value
        for n in tree.body
        if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") == "SHIPPED_BENCHMARKS"
    ]
    assert isinstance(node, ast.Dict)
    assert all(isinstance(x, ast.Constant) and isinstance(x.value, str) for x in [*node.keys, *node.values])
    assert list(SHIPPED_BENCHMARKS) == sorted(SHIPPED_BENCHMARKS)


def test_shipped_benchmarks_and_datasets_registry_folders_agree():
    folder = ROOT / "datasets_registry"
    modules = {
        p.name: f"{p.name}/__init__.py" for p in folder.iterdir() if p.is_dir() and (p / "__init__.py").is_file()
    }
    modules.update({p.stem: p.name for p in folder.glob("*.py")})
    modules = {name: module for name, module in modules.items() if not name.startswith("_")}
    assert SHIPPED_BENCHMARKS == modules, (
        "add the benchmark to SHIPPED_BENCHMARKS (pipeline_kit/benchmarks/__init__.py)"
    )


def test_every_shipped_benchmark_loads():
    for name in SHIPPED_BENCHMARKS:
        assert get_benchmark(name).name == name


def test_unknown_benchmark_is_one_line_with_a_suggestion():
    with pytest.raises(UserError) as err:
        get_benchmark("gsm8")
    line = str(err.value)
    assert "\n" not in line and "unknown benchmark 'gsm8'" in line and "Did you mean 'gsm8k'?" in line
    assert "--extra_datasets DIR" in line


def test_user_folder_adds_benchmarks_beside_the_shipped_ones(tmp_path):
    """The user plug-in form: a folder of benchmark modules (--extra_datasets DIR)."""
    (tmp_path / "_helper.py").write_text("X = 1\n")
    (tmp_path / "mine.py").write_text((ROOT / "datasets_registry" / "arith" / "__init__.py").read_text())
    names = registry.benchmark_names(tmp_path)
    assert "mine" in names and "_helper" not in names and set(SHIPPED_BENCHMARKS) <= set(names)
    mine = get_benchmark("mine", tmp_path)
    assert mine.home == tmp_path and mine.data_file() == tmp_path / "mine" / f"{mine.split}.jsonl"
