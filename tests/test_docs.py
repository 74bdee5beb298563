"""The docs: README.md stays a short front page, every page under docs/ is in mkdocs.yml's nav, and the site builds
with `mkdocs build --strict` (a broken link or anchor, or a page left out of the nav, fails it)."""

from __future__ import annotations

import re
import subprocess
import sys

import yaml
from conftest import EXAMPLE_MARKER, REPO_ROOT, doc_pages, example_blocks, need_module

README_MAX_LINES = 150


def nav_pages(nav) -> list[str]:
    """Every page path named in a mkdocs nav (nested sections included)."""
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in nav_pages(value)]
    raise AssertionError(f"mkdocs.yml: unexpected nav entry {nav!r}")


def test_readme_is_at_most_150_lines():
    lines = (REPO_ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"


def test_every_docs_page_is_in_the_nav_and_every_nav_entry_exists():
    nav = nav_pages(yaml.safe_load((REPO_ROOT / "mkdocs.yml").read_text())["nav"])
    pages = sorted(str(p.relative_to(REPO_ROOT / "docs")) for p in (REPO_ROOT / "docs").rglob("*.md"))
    assert sorted(set(nav)) == pages, f"not in nav: {set(pages) - set(nav)}; in nav, no file: {set(nav) - set(pages)}"
    assert len(nav) == len(set(nav)), f"a page is in the nav twice: {nav}"


def test_every_example_marker_is_found_once_with_its_code():
    markers = {m for page in doc_pages() for m in re.findall(r"<!-- example: ([\w-]+) -->", page.read_text())}
    assert {"stages", "few-shot", "few-shot-rendered", "slurm-container"} <= markers, markers
    for marker in markers:
        assert example_blocks(marker), EXAMPLE_MARKER.format(marker)


def test_the_site_builds_with_strict(tmp_path):
    need_module("mkdocs", "the docs build (pip install -e '.[docs]')")
    need_module("material", "the docs theme (pip install -e '.[docs]')")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "index.html").exists()
