"""The test suite's own rules: a test module never imports another test module (shared helpers live in conftest.py
or in a helper module whose name does not start with `test_`), so each file can move or go without breaking others."""

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def test_modules_imported(tmp_path):
    """imports_of_test_modules finds every form of import, also one inside a function."""
    sample = tmp_path / "test_sample.py"
    sample.write_text(
        "import test_a\nimport os, test_b as b\nfrom test_c import x\nfrom conftest import rows\n"
        "def f():\n    from test_d import y\n"
    )
    assert imports_of_test_modules(sample) == ["test_a", "test_b", "test_c", "test_d"]


def test_no_test_module_imports_another():
    found = {
        path.name: names for path in sorted(TESTS.rglob("*.py")) if (names := imports_of_test_modules(path))
    }  # fmt: skip
    assert not found, f"test modules import test modules (move the shared helpers to conftest.py): {found}"


def imports_of_test_modules(path: Path) -> list[str]:
    """The `test_*` modules that `path` imports."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return [n for n in names if n.split(".")[-1].startswith("test_")]
