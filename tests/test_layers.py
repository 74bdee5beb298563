"""The import layers (pyproject.toml's [tool.importlinter], run by .ci/run): the contract holds for the package, and
a copy of the package with one forbidden import (upward, into grading, round a cycle, an unplaced module) breaks it."""

from __future__ import annotations

import ast
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import BIN, skip_or_fail

ROOT = Path(__file__).resolve().parents[1]


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    if not (BIN / "lint-imports").exists():
        skip_or_fail(f"import-linter is not installed in {BIN.parent}: pip install -e '.[test]'")
    # its own folder first on the path (lint-imports puts the working folder there too): this copy is what it reads
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "PYTHONPATH": str(cwd)}
    return subprocess.run(
        [str(BIN / "lint-imports"), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def test_the_package_keeps_its_layers_and_has_no_import_cycle():
    res = lint_imports(ROOT)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "Contracts: 2 kept, 0 broken." in res.stdout


@pytest.mark.parametrize(
    ("module", "line", "needle"),
    [
        # code that runs in jobs reaching up into the submission side
        ("inference/units.py", "from pipeline_kit.cluster import ClusterConfig", "pipeline_kit.inference.units -> pipeline_kit.cluster"),
        # grading uses only errors, atomic and jsonl
        ("grading/numeric.py", "from pipeline_kit.resources import resource_dir", "pipeline_kit.grading.numeric -> pipeline_kit.resources"),
        # two modules of one package that import each other (inside a function counts)
        ("servers/base.py", "from pipeline_kit.servers.vllm import VLLM", "pipeline_kit.servers.base -> pipeline_kit.servers.vllm -> pipeline_kit.servers.base"),
        # a new top-level module must be given its layer
        ("unplaced.py", "", "pipeline_kit.unplaced"),
    ],
)  # fmt: skip
def test_a_forbidden_import_breaks_the_contract(tmp_path, module, line, needle):
    shutil.copytree(ROOT / "pipeline_kit", tmp_path / "pipeline_kit", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "tests").mkdir()
    shutil.copy(ROOT / "tests" / "import_contracts.py", tmp_path / "tests")
    path = tmp_path / "pipeline_kit" / module
    text = path.read_text() if path.exists() else '"""A module no layer names."""\n'
    if line:
        text += f"\n\ndef _forbidden():\n    {line}\n"
    path.write_text(text)
    res = lint_imports(tmp_path)
    assert res.returncode != 0 and needle in res.stdout, res.stdout + res.stderr


def test_shipped_benchmark_modules_import_only_the_helpers_of_kit():
    """A benchmark module imports Source and its prepare() helpers from benchmark_helpers, never the registry
    (pipeline_kit.benchmarks) that loads it."""
    modules = sorted((ROOT / "datasets_registry").glob("*/__init__.py"))
    assert len(modules) >= 10
    for path in modules:
        for node in ast.walk(ast.parse(path.read_text())):
            names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
            kit = [n for n in names if n.split(".")[0] == "pipeline_kit"]
            assert all(n == "pipeline_kit.benchmark_helpers" for n in kit), f"{path}: imports {kit}"
