"""Code packaging: the committed code of the user's git repo (git archive), plus pipeline_kit itself when it is
installed outside that repo, unpacked once per submission into a content-addressed folder that all jobs share."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pipeline_kit
from pipeline_kit.cluster import ClusterConfig
from pipeline_kit.errors import UserError

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


def uncommitted_files(repo: str) -> list[str]:
    out = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return [line[3:] for line in out.splitlines() if line.strip()]


def _kit_fingerprint() -> str:
    h = hashlib.sha1()
    for path in sorted(KIT_PACKAGE_DIR.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.relative_to(KIT_PACKAGE_DIR)}:{st.st_size}:{st.st_mtime_ns}".encode())
    return h.hexdigest()


def plan_code(cwd: str, allow_uncommitted: bool) -> tuple[str | None, bool, str]:
    """(repo toplevel or None, whether pipeline_kit must be added, content key); checks uncommitted changes."""
    repo = git_toplevel(cwd)
    parts = []
    if repo is not None:
        dirty = uncommitted_files(repo)
        if dirty and not allow_uncommitted:
            shown = ", ".join(dirty[:5]) + (f" (+{len(dirty) - 5} more)" if len(dirty) > 5 else "")
            raise UserError(
                f"{repo} has uncommitted changes in {shown}; jobs run committed code only. "
                "Commit them, or pass --allow_uncommitted to run the last commit anyway."
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


def package_code(cluster: ClusterConfig, cwd: str, allow_uncommitted: bool, reuse_code: bool) -> PackagedCode:
    """Pack once per submission. With reuse_code, a folder already packed for the same commit is reused."""
    repo, add_kit, key = plan_code(cwd, allow_uncommitted)
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
                shutil.copytree(
                    KIT_PACKAGE_DIR,
                    tmp / "pipeline_kit",
                    ignore=shutil.ignore_patterns("__pycache__"),
                    dirs_exist_ok=True,
                )
            tmp.chmod(0o755)
            os.replace(tmp, local)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    cluster_dir = str(local)
    if cluster.ssh_tunnel is not None:
        cluster_dir = f"{cluster.ssh_tunnel.job_dir}/code/{key}"
        _upload(cluster, str(local), cluster_dir)
    return PackagedCode(key=key, local_dir=str(local), cluster_dir=cluster_dir, reused=reused)


def _upload(cluster: ClusterConfig, local: str, remote: str) -> None:
    from pipeline_kit.launch.remote import remote_run, rsync_to

    if remote_run(cluster, f"test -d {remote}", check=False).returncode == 0:
        return
    tmp = f"{remote}.tmp{os.getpid()}"
    remote_run(cluster, f"mkdir -p {os.path.dirname(remote)}")
    rsync_to(cluster, local + "/", tmp + "/")
    remote_run(cluster, f"mv -T {tmp} {remote} 2>/dev/null || rm -rf {tmp}")
