"""Code packaging: the committed code of the user's git repo (git archive), plus pipeline_kit itself when it is
installed outside that repo, unpacked once per submission into a content-addressed folder that all jobs share."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pipeline_kit
from pipeline_kit import resources
from pipeline_kit.atomic import default_mode
from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError
from pipeline_kit.launch import worktree
from pipeline_kit.launch.records import recorded_outputs
from pipeline_kit.launch.remote import upload
from pipeline_kit.resources import kit_home

KIT_PACKAGE_DIR = Path(pipeline_kit.__file__).resolve().parent
CONTAINER_CODE_DIR = "/kit/code"  # where every container job finds the code


@dataclass(frozen=True)
class PackagedCode:
    """`local_dir`: the unpacked code on this machine; `cluster_dir`: where jobs find it (same, or remote)."""

    key: str
    local_dir: str
    cluster_dir: str
    reused: bool


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout


def git_toplevel(cwd: str) -> str | None:
    try:
        return _git(cwd, "rev-parse", "--show-toplevel").strip()
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None


def _kit_trees() -> dict[str, Path]:
    """What an installed kit adds to the packed code: the package, and its resource folders (prompts, cluster
    configs, ...) as `pipeline_kit/<in-package name>`, wherever this install keeps them (inside the package or at the top
    level of its source checkout)."""
    trees = {"pipeline_kit": KIT_PACKAGE_DIR}
    for name, d in resources.resource_dirs().items():
        if not d.resolve().is_relative_to(KIT_PACKAGE_DIR):  # a copy inside the package comes with it
            trees[f"pipeline_kit/{resources.IN_PACKAGE[name]}"] = d
    return trees


def _kit_fingerprint() -> str:
    """Size and mtime of every file that `_kit_trees` packs (not only *.py: an edited prompt is new code too)."""
    h = hashlib.sha1()
    for dest, src in _kit_trees().items():
        for dirpath, dirnames, filenames in os.walk(src, followlinks=True):  # copytree follows links too
            dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                st = os.stat(path)
                rel = Path(os.path.relpath(path, src)).as_posix()
                h.update(f"{dest}/{rel}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def plan_code(
    cwd: str, allow_uncommitted: bool, cluster: ClusterConfig | None = None, kit_paths: Iterable[str] = ()
) -> tuple[str | None, bool, str]:
    """(repo toplevel or None, whether pipeline_kit must be added, content key). Refuses uncommitted changes and
    untracked files that are code (the packed commit lacks them; see launch.worktree) unless `allow_uncommitted`,
    and names in a note what else it leaves out. `kit_paths`: this submission's own folders (inputs, outputs, log
    folder); the cluster's job_dir and the outputs its records name are kit's too."""
    repo = git_toplevel(cwd)
    parts = []
    if repo is not None:
        own = [*kit_paths, str(kit_home())]
        if cluster is not None:
            own.append(cluster.job_dir)
        found = worktree.survey(repo, own, cwd, lambda: recorded_outputs(cluster) if cluster is not None else ())
        missing = found.refusal()
        if missing and not allow_uncommitted:
            raise UserError(
                f"{repo} has {missing}; jobs run committed code only. Commit them (untracked files: git add, or list "
                "them in .gitignore), or pass --allow_uncommitted to run the last commit anyway."
            )
        for note in found.notes():
            print(note, file=sys.stderr)
        if missing:  # allowed, but said: the jobs will not see them
            print(
                f"kit: warning: --allow_uncommitted: the jobs run the last commit, without {missing}", file=sys.stderr
            )
        parts.append(_git(repo, "rev-parse", "HEAD").strip() if _has_commits(repo) else "empty")
    add_kit = repo is None or not KIT_PACKAGE_DIR.is_relative_to(Path(repo).resolve())
    if add_kit:
        parts.append(_kit_fingerprint())
    return repo, add_kit, hashlib.sha1("/".join(parts).encode()).hexdigest()[:16]


def _has_commits(repo: str) -> bool:
    return (
        subprocess.run(["git", "-C", repo, "rev-parse", "-q", "--verify", "HEAD"], capture_output=True).returncode == 0
    )


def package_code(
    cluster: ClusterConfig, cwd: str, allow_uncommitted: bool, reuse_code: bool, kit_paths: Iterable[str] = ()
) -> PackagedCode:
    """Pack once per submission. With reuse_code, a folder already packed for the same commit is reused."""
    repo, add_kit, key = plan_code(cwd, allow_uncommitted, cluster, kit_paths)
    root = Path(cluster.job_dir) / "code"
    if not reuse_code:
        key = f"{key}-{time.time_ns()}"
    local = root / key
    reused = local.is_dir()
    if not reused:
        root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=root))
        try:
            if repo is not None and _has_commits(repo):
                archive = subprocess.run(
                    ["git", "-C", repo, "archive", "--format=tar", "HEAD"], capture_output=True, check=True
                )
                subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive.stdout, check=True)
            if add_kit:
                for dest, src in _kit_trees().items():
                    shutil.copytree(src, tmp / dest, ignore=shutil.ignore_patterns("__pycache__"), dirs_exist_ok=True)
            tmp.chmod(default_mode(0o777))  # mkdtemp's 0700, made what `mkdir` would give
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        try:
            os.replace(tmp, local)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            # A submission of the same code packed it in the meantime (os.replace cannot replace a non-empty
            # folder): that folder holds the same content, so use it.
            if not local.is_dir():
                raise
            reused = True
    cluster_dir = str(local)
    if cluster.ssh_tunnel is not None:
        cluster_dir = f"{cluster.ssh_tunnel.job_dir}/code/{key}"
        upload(cluster, str(local), cluster_dir)
    return PackagedCode(key=key, local_dir=str(local), cluster_dir=cluster_dir, reused=reused)
