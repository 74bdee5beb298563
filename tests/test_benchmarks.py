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


def test_every_source_is_pinned_to_a_revision():
    """Every source names a commit or a dataset revision (40 hex digits) in its URL, so that the file cannot change
    under a benchmark's name: a branch name (main, master, refs/heads/...) is a moving source and fails here."""
    moving = [f"{name}: {s.url}" for name in SHIPPED_BENCHMARKS for s in get_benchmark(name).sources if not s.revision]
    assert not moving, "pin these to a commit or dataset revision (40 hex digits):\n" + "\n".join(moving)


def test_a_branch_url_is_no_revision():
    from pipeline_kit.benchmark_helpers import Source

    sha = "a45202bd16f1ec06f433442dc1152d0074773465"
    assert Source(f"https://raw.githubusercontent.com/o/r/{sha}/d/t.jsonl", "jsonl").revision == sha
    assert Source(f"https://huggingface.co/datasets/o/r/resolve/{sha}/t.parquet", "parquet").revision == sha
    for ref in ("main", "refs/heads/main", sha[:8], "v1.0"):
        assert Source(f"https://raw.githubusercontent.com/o/r/{ref}/t.jsonl", "jsonl").revision is None, ref
        assert Source(f"https://huggingface.co/datasets/o/r/resolve/{ref}/t.jsonl", "jsonl").revision is None, ref


# No copy of their upstream files could be read where kit was built: their row count is the documented one and their
# fingerprint is unknown (kit prepare_data then checks the count alone).
NO_FINGERPRINT = {"gsm-plus", "mmlu-pro", "omni-math"}


def test_every_shipped_benchmark_states_its_licence_rows_and_fingerprint():
    for name in SHIPPED_BENCHMARKS:
        bench = get_benchmark(name)
        assert bench.license != "not stated", name
        assert bench.rows, name
        assert (bench.fingerprint is None) == (name in NO_FINGERPRINT), name


def test_module_settings_for_data_are_checked(tmp_path):
    text = (ROOT / "datasets_registry" / "arith" / "__init__.py").read_text()
    (tmp_path / "rows.py").write_text(text.replace("ROWS = 50", "ROWS = 0"))
    (tmp_path / "print.py").write_text(text.replace('FINGERPRINT = "98b1225046581ae1"', 'FINGERPRINT = "98B1"'))
    with pytest.raises(UserError, match=r"rows.py: ROWS = 0 must be the positive number of records"):
        get_benchmark("rows", tmp_path)
    with pytest.raises(UserError, match=r"print.py: FINGERPRINT = '98B1' must be 12 to 64 lower-case hex digits"):
        get_benchmark("print", tmp_path)
