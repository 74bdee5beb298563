"""Code packaging (launch/packaging.py): the packed copy of an installed kit carries the resource folders, the
fingerprint sees every file of them, two submissions of the same code at the same moment share one folder, and a
user repo's uncommitted changes and untracked code files (not ignored ones) are named and refused unless allowed,
while data, outputs and kit's own folders are left out with a note (launch/worktree.py)."""

from __future__ import annotations

import os
import subprocess
import threading
from pathlib import Path

import pytest

from pipeline_kit import resources
from pipeline_kit.cluster.config import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.launch import packaging, records, worktree


def fake_kit(root: Path, inside: bool) -> Path:
    """A kit install under root: resource folders inside the package (a wheel) or at the top (a checkout)."""
    pkg = root / "pipeline_kit"
    (pkg / "cli").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "cli" / "main.py").write_text("print('main')\n")
    base = pkg if inside else root
    if not inside:
        (root / "pyproject.toml").write_text("[project]\nname = 'x'\n")
    (base / "prompts" / "generic").mkdir(parents=True)
    (base / "prompts" / "generic" / "math.yaml").write_text("user: '{problem}'\n")
    (base / "cluster_configs").mkdir()
    (base / "cluster_configs" / "none.yaml").write_text("executor: none\njob_dir: /tmp/jobs\n")
    return pkg


@pytest.mark.parametrize("inside", [True, False], ids=["wheel-layout", "checkout-layout"])
def test_fingerprint_changes_when_a_prompt_or_cluster_config_changes(tmp_path, monkeypatch, inside):
    pkg = fake_kit(tmp_path, inside)
    monkeypatch.setattr(packaging, "KIT_PACKAGE_DIR", pkg)
    monkeypatch.setattr(resources, "PACKAGE_DIR", pkg)
    base = pkg if inside else tmp_path
    seen = {packaging._kit_fingerprint()}
    (base / "prompts" / "generic" / "math.yaml").write_text("user: 'Solve {problem}'\n")
    seen.add(packaging._kit_fingerprint())
    assert len(seen) == 2, "an edited prompt config must give new packed code"
    (base / "cluster_configs" / "none.yaml").write_text("executor: none\njob_dir: /tmp/jobs2\n")
    seen.add(packaging._kit_fingerprint())
    assert len(seen) == 3, "an edited cluster config must give new packed code"
    (base / "prompts" / "generic" / "new.yaml").write_text("user: '{problem}'\n")
    seen.add(packaging._kit_fingerprint())
    assert len(seen) == 4, "a new prompt config must give new packed code"
    # bytecode caches are not code: writing one keeps the fingerprint
    (pkg / "__pycache__").mkdir()
    (pkg / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"\0")
    assert packaging._kit_fingerprint() in seen


@pytest.fixture
def not_a_repo(tmp_path, monkeypatch) -> Path:
    """A folder outside any git repo (kit run from there packs only itself), even when tmp_path lies in one."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    cwd = tmp_path / "not_a_repo"
    cwd.mkdir()
    return cwd


def cluster_at(tmp_path: Path) -> ClusterConfig:
    return ClusterConfig(source="test", executor="none", job_dir=str(tmp_path / "jobs"))


def test_packed_code_of_an_installed_kit_has_the_resource_folders(tmp_path, not_a_repo):
    cwd = not_a_repo
    code = packaging.package_code(cluster_at(tmp_path), str(cwd), allow_uncommitted=False, reuse_code=True)
    packed = Path(code.local_dir) / "pipeline_kit"
    for rel in ("prompts/generic/math.yaml", "prompts/code_tags/qwen.yaml"):
        assert (packed / rel).is_file() and not (packed / rel).is_symlink(), rel
    assert sorted(p.name for p in (packed / "cluster_configs").glob("*.yaml")) == sorted(
        p.name for p in resources.resource_dir("cluster_configs").glob("*.yaml")
    )
    assert not list(packed.rglob("__pycache__"))
    # the recipes go beside the recipe machinery's package, not into it
    assert (packed / "bundled_recipes" / "aimo" / "pipeline.py").is_file() and (
        packed / "recipes" / "stages.py"
    ).is_file()
    assert not (packed / "recipes" / "aimo").exists()
    again = packaging.package_code(cluster_at(tmp_path), str(cwd), allow_uncommitted=False, reuse_code=True)
    assert again.reused and again.local_dir == code.local_dir


def test_two_submissions_of_the_same_code_at_once_share_the_packed_folder(tmp_path, monkeypatch, not_a_repo):
    """Both pack into their temp folders before either renames it into place; the second rename finds the
    target there (not empty) and must reuse it instead of failing with a raw OSError."""
    cwd = not_a_repo
    cluster = cluster_at(tmp_path)
    barrier = threading.Barrier(2, timeout=60)
    real_replace = os.replace

    def racing_replace(src, dst):
        barrier.wait()  # both submissions have packed; now both rename
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", racing_replace)
    results, errors = [], []

    def submit():
        try:
            results.append(packaging.package_code(cluster, str(cwd), allow_uncommitted=False, reuse_code=True))
        except BaseException as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=submit) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors, f"a racing submission failed: {errors[0]!r}"
    assert len(results) == 2 and results[0].local_dir == results[1].local_dir
    assert sorted(r.reused for r in results) == [False, True]
    root = Path(cluster.job_dir) / "code"
    assert [p.name for p in root.iterdir()] == [results[0].key], "the loser's temp folder is removed"
    assert (Path(results[0].local_dir) / "pipeline_kit" / "prompts" / "generic" / "math.yaml").is_file()


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "-C", str(repo), *args], check=True)


@pytest.fixture
def repo(tmp_path, monkeypatch) -> Path:
    """A committed user repo with a .gitignore, outside any other repo."""
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    repo = tmp_path / "proj"
    (repo / "pkg").mkdir(parents=True)
    (repo / "pkg" / "main.py").write_text("print('main')\n")
    (repo / ".gitignore").write_text("outputs/\n*.log\n")
    git(repo, "init", "-q")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "init")
    return repo


def test_untracked_code_is_named_like_uncommitted_changes_and_refused(tmp_path, repo, capsys):
    (repo / "pkg" / "new module.py").write_text("VALUE = 1\n")  # new, not added: the packed commit lacks it
    (repo / "outputs").mkdir()
    (repo / "outputs" / "result.jsonl").write_text("{}\n")  # ignored: neither named nor packed
    (repo / "run.log").write_text("log\n")  # ignored too
    (repo / "notes.txt").write_text("todo\n")  # untracked, not code: left out, said in a note
    with pytest.raises(UserError) as refused:
        packaging.package_code(cluster_at(tmp_path), str(repo), allow_uncommitted=False, reuse_code=True)
    assert str(refused.value) == (
        f"{repo} has untracked code files pkg/new module.py; jobs run committed code only. Commit them (untracked "
        "files: git add, or list them in .gitignore), or pass --allow_uncommitted to run the last commit anyway."
    )
    assert not (tmp_path / "jobs").exists()  # nothing packed

    (repo / "pkg" / "main.py").write_text("print('edited')\n")
    with pytest.raises(UserError, match=r"has uncommitted changes in pkg/main.py; untracked code files pkg/new mod"):
        packaging.plan_code(str(repo), allow_uncommitted=False)  # what --dry_run checks
    capsys.readouterr()

    code = packaging.package_code(cluster_at(tmp_path), str(repo), allow_uncommitted=True, reuse_code=True)
    assert capsys.readouterr().err == (
        "kit: left out of the packed code (untracked, not code): notes.txt\n"
        "kit: warning: --allow_uncommitted: the jobs run the last commit, without uncommitted changes in pkg/main.py; "
        "untracked code files pkg/new module.py\n"
    )
    packed = Path(code.local_dir)
    assert (packed / "pkg" / "main.py").read_text() == "print('main')\n"  # the commit, not the edit
    assert not (packed / "pkg" / "new module.py").exists() and not (packed / "outputs").exists()
    assert not (packed / "run.log").exists() and not (packed / "notes.txt").exists()

    git(repo, "add", "pkg")
    git(repo, "commit", "-q", "-m", "new module")
    again = packaging.package_code(cluster_at(tmp_path), str(repo), allow_uncommitted=False, reuse_code=True)
    assert capsys.readouterr().err == "kit: left out of the packed code (untracked, not code): notes.txt\n"
    assert (Path(again.local_dir) / "pkg" / "new module.py").read_text() == "VALUE = 1\n"


@pytest.mark.parametrize(
    "path, code",
    [
        ("pkg/helper.py", True),
        ("scripts/run.sh", True),
        ("prompts/mine.yaml", True),  # a prompt config read as ++prompt_config=prompts/mine.yaml
        ("recipes/mine/config.yml", True),
        ("templates/chat.jinja", True),  # ++server.chat_template=templates/chat.jinja
        ("datasets_registry/mybench.py", True),
        ("cluster_configs/laptop.yaml", False),  # read where kit is run, never by a job
        ("results/first/output.jsonl", False),
        ("data/train.parquet", False),
        ("metrics.json", False),
        ("notes.txt", False),
        ("README.md", False),
    ],
)
def test_what_counts_as_code(path, code):
    assert worktree.is_code(path) is code


def test_many_untracked_code_files_are_counted_and_data_is_grouped_by_folder(tmp_path, repo, capsys):
    for i in range(7):
        (repo / f"mod_{i}.py").write_text("x = 1\n")
    (repo / "results" / "first").mkdir(parents=True)
    for name in ("output.jsonl", "output.jsonl.done", "metrics.json"):
        (repo / "results" / "first" / name).write_text("{}\n")
    (repo / "notes.txt").write_text("x\n")
    with pytest.raises(UserError, match=r"untracked code files mod_0.py, mod_1.py, .*mod_4.py \(\+2 more\);"):
        packaging.plan_code(str(repo), allow_uncommitted=False)
    assert capsys.readouterr().err == ""  # a refusal says only what is refused
    packaging.plan_code(str(repo), allow_uncommitted=True)
    assert capsys.readouterr().err.splitlines()[0] == (
        "kit: left out of the packed code (untracked, not code): notes.txt, results/ (3 files)"
    )


def test_code_in_kit_folders_and_changed_data_are_left_out_not_refused(tmp_path, repo, capsys):
    """Files inside this submission's folders or an earlier run's recorded outputs (a checkpoint's modeling .py,
    a chat template) are kit's outputs, not code; a tracked data file the user regenerates is no code change; a
    changed tracked module still is."""
    (repo / "data").mkdir()
    (repo / "data" / "train.jsonl").write_text("{}\n")
    git(repo, "add", "data")
    git(repo, "commit", "-q", "-m", "data")
    (repo / "data" / "train.jsonl").write_text("{}\n{}\n")  # regenerated
    (repo / "ckpt").mkdir()
    (repo / "ckpt" / "modeling_tiny.py").write_text("x = 1\n")  # written by an earlier run
    (repo / "ckpt" / "chat_template.jinja").write_text("{{ messages }}\n")
    (repo / "now").mkdir()
    (repo / "now" / "step.py").write_text("x = 1\n")  # in this submission's output folder
    cluster = cluster_at(tmp_path)
    with pytest.raises(UserError, match=r"has untracked code files ckpt/chat_template.jinja, ckpt/modeling_tiny.py;"):
        packaging.plan_code(str(repo), False, cluster, [str(repo / "now")])
    records.save_record(
        cluster,
        records.ExperimentRecord(
            "train", "r1", "none", "/logs", jobs=[records.JobRecord("t", "t", [], outputs=[str(repo / "ckpt")])]
        ),
    )
    capsys.readouterr()
    packaging.plan_code(str(repo), False, cluster, [str(repo / "now")])
    assert capsys.readouterr().err == (
        "kit: left out of the packed code (untracked, not code): ckpt/ (2 files), now/step.py\n"
        "kit: left out of the packed code (uncommitted changes to data or kit's outputs; jobs read them where they "
        "are): data/train.jsonl\n"
    )
    (repo / "pkg" / "main.py").write_text("print('edited')\n")
    with pytest.raises(UserError, match=r"has uncommitted changes in pkg/main.py; jobs run committed code only"):
        packaging.plan_code(str(repo), False, cluster, [str(repo / "now")])


def test_a_kit_folder_that_holds_the_whole_repo_exempts_nothing(tmp_path, repo):
    (repo / "helper.py").write_text("x = 1\n")
    with pytest.raises(UserError, match="untracked code files helper.py"):
        packaging.plan_code(str(repo), False, cluster_at(tmp_path), [str(tmp_path), str(repo)])
