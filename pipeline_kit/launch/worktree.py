"""What of the user's working tree the packed commit lacks, sorted into what would change the code a job runs
(refused, unless --allow_uncommitted) and what would not (data, kit's own outputs and logs: left out, with a note).

The rule (docs/clusters/index.md, "How your code gets to the jobs"):
- an untracked file is code when jobs would import, execute or read it from the packed tree: a `*.py`, `*.sh`,
  `*.yaml`/`*.yml` or `*.jinja` file outside `cluster_configs/` (read on the submitting machine only);
- a tracked file with uncommitted changes is refused unless it is data (`.jsonl`, `.json`, `.parquet`, ...);
- neither is refused inside one of kit's own folders: the job_dir, the log folder, $KIT_HOME, the inputs and
  outputs of this submission's jobs, and the outputs that earlier experiments on this cluster recorded.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path

CODE_SUFFIXES = frozenset({".py", ".sh", ".yaml", ".yml", ".jinja"})
SUBMISSION_ONLY = "cluster_configs"  # kit reads the cluster configs here, never in a job
DATA_SUFFIXES = frozenset(
    {".jsonl", ".json", ".parquet", ".csv", ".tsv", ".arrow", ".log", ".done", ".npy", ".npz", ".pt", ".bin"}
    | {".safetensors", ".pkl", ".gz", ".zst", ".xz", ".zip", ".tar", ".png", ".jpg", ".pdf"}
)
SHOWN = 5  # names shown in a message; the rest are counted


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True, check=True).stdout


def not_committed(repo: str) -> tuple[list[str], list[str]]:
    """What `git archive HEAD` leaves out, from one `git status`: tracked files with changes (modified, staged,
    deleted; a rename by its new name), and untracked files that git does not ignore (.gitignore,
    .git/info/exclude, the global excludes), e.g. a new module not yet added."""
    entries = iter(_git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all").split("\0"))
    changed, new = [], []
    for entry in entries:
        if not entry:
            continue
        (new if entry.startswith("??") else changed).append(entry[3:])
        if entry[0] in "RC":  # a rename or copy: the old name follows as its own entry
            next(entries, None)
    return changed, new


def is_code(path: str) -> bool:
    """Whether a job would import, execute or read this file from the packed tree (see the module's rule)."""
    folder, _, name = path.rpartition("/")
    return os.path.splitext(name)[1] in CODE_SUFFIXES and SUBMISSION_ONLY not in folder.split("/")


def is_data(path: str) -> bool:
    """Whether any of the file's suffixes (output.jsonl.done, data.csv.gz) is a data suffix, and it is no code."""
    name = path.rpartition("/")[2]
    return not is_code(path) and any(f".{s}" in DATA_SUFFIXES for s in name.split(".")[1:])


def named(paths: list[str]) -> str:
    return ", ".join(paths[:SHOWN]) + (f" (+{len(paths) - SHOWN} more)" if len(paths) > SHOWN else "")


@dataclass(frozen=True)
class Survey:
    """`changed`/`new`: uncommitted changes and untracked files that are code (refused); `changed_other`/
    `new_other`: those the jobs do not need from the packed tree (said in a note); `folders`: kit's own folders
    inside the repo and the wholly untracked ones, relative, outermost first, that group the note's files."""

    changed: list[str]
    new: list[str]
    changed_other: list[str]
    new_other: list[str]
    folders: list[str]

    def refusal(self) -> str | None:
        """What is refused, named (uncommitted changes in a.py; untracked code files b.py), or None."""
        parts = []
        if self.changed:
            parts.append(f"uncommitted changes in {named(self.changed)}")
        if self.new:
            parts.append(f"untracked code files {named(self.new)}")
        return "; ".join(parts) or None

    def notes(self) -> list[str]:
        """One line per kind of file left out although it is not committed, naming the files (grouped by folder)."""
        out = []
        if self.new_other:
            out.append(f"kit: left out of the packed code (untracked, not code): {self._grouped(self.new_other)}")
        if self.changed_other:
            out.append(
                "kit: left out of the packed code (uncommitted changes to data or kit's outputs; jobs read them "
                f"where they are): {self._grouped(self.changed_other)}"
            )
        return out

    def _grouped(self, paths: list[str]) -> str:
        """'results/first/ (3 files), notes.txt': the files in one of kit's folders, else in one folder, counted."""
        groups: dict[str, list[str]] = {}
        for path in paths:
            folder = next((f for f in self.folders if _within(path, f)), None)
            if folder is None and "/" in path:
                folder = path.rsplit("/", 1)[0]
            groups.setdefault(path if folder is None else folder, []).append(path)
        return named([files[0] if len(files) == 1 else f"{key}/ ({len(files)} files)" for key, files in groups.items()])


def _outermost_first(folder: str) -> tuple[int, str]:
    return folder.count("/"), folder


def _within(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder + "/")


def kit_folders_in(repo: str, paths: Iterable[str], cwd: str) -> list[str]:
    """The given paths (relative ones from `cwd`) that lie strictly inside the repo, relative to it, outermost first.
    A folder that holds the whole repo is no folder of kit's outputs to it."""
    root = os.path.realpath(repo)
    out = set()
    for path in paths:
        full = os.path.realpath(os.path.join(cwd, os.path.expanduser(path)))
        if full.startswith(root + os.sep):
            out.add(Path(os.path.relpath(full, root)).as_posix())
    return sorted(out, key=_outermost_first)


def survey(repo: str, kit_paths: Iterable[str], cwd: str, recorded: Callable[[], Iterable[str]] = tuple) -> Survey:
    """Sort what `git archive HEAD` leaves out of the repo. `kit_paths`: kit's folders for this submission;
    `recorded`: the outputs earlier experiments recorded, asked for only when something would be refused."""
    changed, new = not_committed(repo)
    folders = kit_folders_in(repo, kit_paths, cwd)

    def sort(folders: list[str]) -> Survey:
        def kits(path: str) -> bool:
            return any(_within(path, f) for f in folders)

        refused_changed = {p for p in changed if not is_data(p) and not kits(p)}
        refused_new = {p for p in new if is_code(p) and not kits(p)}
        return Survey(
            changed=[p for p in changed if p in refused_changed],
            new=[p for p in new if p in refused_new],
            changed_other=[p for p in changed if p not in refused_changed],
            new_other=[p for p in new if p not in refused_new],
            folders=folders,
        )

    result = sort(folders)
    if result.changed or result.new:  # maybe in an earlier run's output folder: read the records only now
        more = kit_folders_in(repo, recorded(), cwd)
        if more:
            folders = sorted(set(folders) | set(more), key=_outermost_first)
            result = sort(folders)
    if result.new_other:  # the note names a wholly untracked folder (an earlier run's logs/) once, counted
        out = _git(repo, "ls-files", "-z", "--others", "--exclude-standard", "--directory")
        untracked_dirs = {entry.rstrip("/") for entry in out.split("\0") if entry.endswith("/")}
        result = replace(result, folders=sorted(set(folders) | untracked_dirs, key=_outermost_first))
    return result
