"""The import layers (pyproject.toml's [tool.importlinter], run by .ci/run): the contract holds for the package, and
a copy of the package with one forbidden import (upward, into grading, round a cycle, an unplaced module) breaks it."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
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


def test_benchmark_helpers_import_no_module_named_as_a_benchmark_folder():
    """`import math` in benchmark_helpers is datasets_registry/math where that folder is on sys.path, which imports
    benchmark_helpers: the two would import each other. The helpers import no name of a shipped benchmark's folder."""
    folders = {p.parent.name for p in (ROOT / "datasets_registry").glob("*/__init__.py")}
    tree = ast.parse((ROOT / "pipeline_kit" / "benchmark_helpers.py").read_text())
    names = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    names |= {(n.module or "").split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert "math" in folders and not names & folders, names & folders


# Imports inside functions (docs/architecture.md, "Imports inside functions"): each keeps a third-party library out of
# modules that do not need it (heavy to import, or in an extra the process may not have), loads a CLI command's
# implementation only when it runs, or says why on its line (`# lazy: <reason>`).
PACKAGE = ROOT / "pipeline_kit"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _top_level_imports(tree: ast.Module) -> set[str]:
    """What a module imports when it is imported: its top-level statements, those under if/try included."""
    names: set[str] = set()
    for stmt in tree.body:
        if not isinstance(stmt, (ast.Import, ast.ImportFrom, ast.If, ast.Try)):
            continue
        for node in ast.walk(stmt):
            if isinstance(node, ast.Import):
                names |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
    return names


def _kit_modules_named(name: str, modules: dict) -> list[str]:
    """The kit modules importing NAME runs: the package path down to it (`a.b.c` imports a, a.b, a.b.c)."""
    parts = name.split(".")
    return [m for m in (".".join(parts[:i]) for i in range(2, len(parts) + 1)) if m in modules]


def _third_party(name: str) -> bool:
    top = name.split(".")[0]
    return top not in sys.stdlib_module_names and top not in ("pipeline_kit", "__future__")


def _says_why(source: list[str], node: ast.stmt) -> bool:
    """A `# lazy: <reason>` on the import's own lines, or on the comment line over the run of imports it is in."""
    if any("# lazy:" in line for line in source[node.lineno - 1 : node.end_lineno]):
        return True
    above = node.lineno - 2
    while above >= 0 and source[above].strip().startswith(("from ", "import ")):
        above -= 1
    return above >= 0 and source[above].strip().startswith("# lazy:")


def test_imports_inside_functions_have_a_reason():
    modules = {_module_name(p): ast.parse(p.read_text()) for p in PACKAGE.rglob("*.py")}
    top = {m: _top_level_imports(tree) for m, tree in modules.items()}
    reaches: dict[str, bool] = {}

    def reaches_third_party(module: str, seen: frozenset = frozenset()) -> bool:
        if module not in reaches:
            imported = top.get(module, set())
            inner = {k for n in imported if n.startswith("pipeline_kit.") for k in _kit_modules_named(n, modules)}
            reaches[module] = any(_third_party(n) for n in imported) or any(
                reaches_third_party(k, seen | {module}) for k in inner - seen - {module}
            )
        return reaches[module]

    unexplained = []
    for module, tree in sorted(modules.items()):
        lines = (PACKAGE.parent / (module.replace(".", "/"))).with_suffix(".py")
        source = (lines if lines.exists() else lines.with_suffix("") / "__init__.py").read_text().splitlines()
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if not isinstance(node, (ast.Import, ast.ImportFrom)) or _says_why(source, node):
                    continue
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                if isinstance(node, ast.ImportFrom):
                    names += [f"{node.module}.{a.name}" for a in node.names]
                kit = [k for n in names for k in _kit_modules_named(n, modules)]
                if any(_third_party(n) for n in names) or module.startswith("pipeline_kit.cli"):
                    continue
                if kit and any(reaches_third_party(k) for k in kit):
                    continue
                unexplained.append(f"{module}:{node.lineno}: {source[node.lineno - 1].strip()}")
    assert not unexplained, (
        "imports inside functions that neither keep a third-party library out nor say why (`# lazy: <reason>`); "
        "move them to the top of the module:\n" + "\n".join(unexplained)
    )
