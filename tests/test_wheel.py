"""The wheel: built from this checkout, installed into a fresh venv outside the repo, it carries the prompts, the
cluster config examples and the recipes as regular files, and `kit` works from there (a dry run, a recipe's dry run,
and a job that runs in the packed code folder and finds the prompts and code tags there)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from importlib.metadata import version
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
# not copied into the build: the checkout's own builds, venvs, caches and VCS data
SKIP_TOP = {".git", ".venv", "build", "dist", ".kit", ".cache", ".pytest_cache", ".ruff_cache"}
SKIP_ANY = ("__pycache__", "*.egg-info", "*.pyc")


def _ignore(dirpath: str, names: list[str]) -> set[str]:
    skipped = set(shutil.ignore_patterns(*SKIP_ANY)(dirpath, names))
    if Path(dirpath) == REPO:
        skipped |= SKIP_TOP & set(names)
    return skipped


def run(cmd: list, timeout: int = 60, **kw) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} -> {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    return proc


def build_wheel(tmp_path: Path) -> Path:
    """pip wheel, without build isolation (no index needed), from a copy of the checkout: an in-tree build would
    write build/ and *.egg-info into the checkout, and a stale build/ could leak deleted files into the wheel."""
    setuptools_version = tuple(int(p) for p in version("setuptools").split(".")[:2])
    if setuptools_version < (70, 1):
        pytest.fail(f"setuptools {version('setuptools')} has no bdist_wheel; `pip install -e '.[test]'` installs 70.1+")
    src = tmp_path / "src"
    shutil.copytree(REPO, src, ignore=_ignore, symlinks=True)
    dist = tmp_path / "dist"
    run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index", "-w", dist, src]
    )
    (wheel,) = dist.glob("pipeline_kit-*.whl")
    return wheel


def fresh_venv(tmp_path: Path, wheel: Path) -> tuple[Path, Path]:
    """A venv outside the repo with the wheel installed and this venv's dependencies importable, but not this
    checkout's editable pipeline_kit: a .pth line adds a folder to sys.path without processing the .pth files in it
    (the editable install's finder is one)."""
    venv = tmp_path / "venv"
    run([sys.executable, "-m", "venv", "--without-pip", venv])
    python = venv / "bin" / "python"
    run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-deps", "--no-index", wheel])
    site = Path(run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip())
    deps = dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib"))
    (site / "zz-kit-test-deps.pth").write_text("".join(f"{d}\n" for d in deps))
    return venv, site


def test_wheel_installed_outside_the_repo_has_prompts_and_configs(tmp_path):
    wheel = build_wheel(tmp_path)
    venv, site = fresh_venv(tmp_path, wheel)
    installed = site / "pipeline_kit"

    for name in ("prompts", "cluster_configs"):
        files = sorted(p.relative_to(REPO / name) for p in (REPO / name).rglob("*") if p.is_file())
        assert files, name
        for rel in files:
            path = installed / name / rel
            assert path.is_file() and not path.is_symlink(), f"{path}: not a regular file"
        assert not (installed / name).is_symlink()
    assert not (site / "prompts").exists() and not (site / "cluster_configs").exists()  # only inside the package
    # kit report's page: its styles and script are package data (pyproject.toml)
    assets = REPO / "pipeline_kit" / "evaluation" / "report" / "assets"
    for asset in ("report.css", "report.js"):
        assert (installed / "evaluation" / "report" / "assets" / asset).read_bytes() == (assets / asset).read_bytes()

    work = tmp_path / "work"  # a user's folder that is no git repo (kit packs only itself from there)
    home = tmp_path / "home"
    work.mkdir()
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KIT_", "PYTHON", "VIRTUAL_ENV", "GIT_"))}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",
        HOME=str(home),  # the packaged none.yaml keeps its jobs under ${HOME}/.kit/jobs
        KIT_HOME=str(home / ".kit"),
        GIT_CEILING_DIRECTORIES=str(tmp_path),  # even when tmp_path lies inside a git repo
    )
    python = venv / "bin" / "python"

    probe = textwrap.dedent(
        """
        import json, pipeline_kit
        from pipeline_kit.cluster.lookup import find_cluster_config, load_cluster_config
        from pipeline_kit.inference.prompts import load_prompt_config
        from pipeline_kit.inference.tir_settings import load_code_tags
        from pipeline_kit.resources import resource_dir
        load_cluster_config("example-slurm")
        print(json.dumps({
            "package": pipeline_kit.__file__,
            "prompts": str(resource_dir("prompts")),
            "math": load_prompt_config("generic/math").source,
            "math_path": load_prompt_config("generic/math").path,
            "qwen": load_code_tags("qwen").code_begin,
            "configs": [str(find_cluster_config(n)) for n in ("none", "example-slurm", "example-local")],
        }))
        """
    )
    got = json.loads(run([python, "-c", probe], cwd=work, env=env).stdout)
    assert Path(got["package"]).parent == installed, "pipeline_kit must come from the wheel, not the checkout"
    assert Path(got["prompts"]) == installed / "prompts"
    assert got["math"] == "prompts/generic/math.yaml"  # a shipped prompt is named as users know it
    assert Path(got["math_path"]) == installed / "prompts" / "generic" / "math.yaml"
    assert got["qwen"].startswith("```python")
    assert [Path(p) for p in got["configs"]] == [
        installed / "cluster_configs" / f"{n}.yaml" for n in ("none", "example-slurm", "example-local")
    ]

    (work / "in.jsonl").write_text(json.dumps({"problem": "What is 1+1?", "expected_answer": "2"}) + "\n")
    kit = venv / "bin" / "kit"
    server = ["--server_type=openai", "--server_address=http://127.0.0.1:1/v1", "--model=m"]
    res = run(
        [kit, "generate", "--dry_run", "--cluster=none", *server, "--input_file=in.jsonl", "--output_dir=out"]
        + ["++prompt_config=generic/math"],
        cwd=work,
        env=env,
    )
    assert "generic/math" in res.stdout + res.stderr

    # the recipes ship as pipeline_kit/bundled_recipes (pipeline_kit/recipes is the recipe machinery's package), and
    # `kit run_recipe NAME` finds them there
    for rel in ("aimo/pipeline.py", "metamath/pipeline.py", "magpie_math/pipeline.py", "quickstart/run.sh"):
        assert (installed / "bundled_recipes" / rel).is_file(), rel
    assert not (installed / "recipes" / "aimo").exists() and not (site / "recipes").exists()
    res = run([kit, "run_recipe", "--help"], cwd=work, env=env)
    assert all(name in res.stdout for name in ("aimo", "metamath", "magpie_math")), res.stdout
    res = run([kit, "run_recipe", "metamath", "--dry_run", "--cluster=none", *server, "--input_file=in.jsonl",
               "--output_dir=mm"], cwd=work, env=env)  # fmt: skip
    assert "metamath: stage prepare: run (not done yet)" in res.stderr, res.stderr
    assert "pipeline_kit.recipes.metamath_data prepare" in res.stdout, res.stdout

    # A job runs in the packed code folder, where the packed pipeline_kit must carry the prompts and code tags.
    job = (
        "python -c 'import pipeline_kit.inference.prompts as p, pipeline_kit.inference.tir as t; "
        'print("JOB", p.load_prompt_config("generic/math").path, t.load_code_tags("tool_call").code_begin.strip())\''
    )
    res = run([kit, "run_cmd", "--cluster=none", "--expname=wheel", f"--command={job}"], cwd=work, env=env)
    (line,) = [ln for ln in res.stdout.splitlines() if ln.startswith("JOB ")]
    _, source, tag = line.split(" ", 2)
    code_dir = home / ".kit" / "jobs" / "code"
    assert Path(source).is_relative_to(code_dir), f"the job read {source}, not the packed copy under {code_dir}"
    assert Path(source).relative_to(code_dir).parts[1:] == ("pipeline_kit", "prompts", "generic", "math.yaml")
    assert tag == "<tool_call>"
