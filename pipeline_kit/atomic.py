"""Files written whole or not at all (a temporary file in the same folder, then renamed over the target), with the
mode a plain `open(path, "w")` would give: 0666 less the umask, so that a team shares outputs the way it shares
any file. mkstemp alone would leave every such file -rw------- whatever the umask."""

from __future__ import annotations

import contextlib
import errno
import glob
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO


def current_umask() -> int:
    """The process's umask, read without changing it (os.umask can only set it, and setting it for a moment would
    race with threads creating files); Linux shows it in /proc/self/status."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def default_mode(base: int = 0o666) -> int:
    """`base` less the umask: what a file (0666) or folder (0777) the user creates gets."""
    return base & ~current_umask()


def write_atomic(path: str | Path, text: str, private: bool = False) -> None:
    """Write `text` to `path` atomically, with the umask's mode; `private` keeps it to its owner (0600 at most),
    for a file that may hold secrets. An OSError (a full disk: no_space) names `path` as its filename."""
    with open_atomic(path, private=private) as f:
        f.write(text)


@contextlib.contextmanager
def open_atomic(path: str | Path, mode: str = "w", private: bool = False) -> Iterator[IO]:
    """A file object (`mode` "w" or "wb") whose content replaces `path` when the block ends without an error, for a
    writer that streams rather than holds the whole text (write_atomic's rules otherwise)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, mode) as f:
            os.fchmod(f.fileno(), default_mode(0o600 if private else 0o666))
            yield f
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename is None:
            e.filename = str(path)
        raise


NO_SPACE = (errno.ENOSPC, errno.EDQUOT)  # a full disk, an exhausted quota


def no_space(e: BaseException) -> str | None:
    """The one line for a write that failed for want of space (None for any other error): the file, and how to go
    on. Writers leave nothing half-written (write_atomic; an in-progress file drops its torn line), so a rerun
    resumes where the disk filled."""
    if not isinstance(e, OSError) or e.errno not in NO_SPACE:
        return None
    what = "no space left on device" if e.errno == errno.ENOSPC else "disk quota exceeded"
    return f"{what} writing {e.filename or 'a file'}; free space and rerun (finished samples are kept)"


def remove_stale_temps(path: str | Path) -> None:
    """The temporary files a writer of `path` killed mid-write left behind (write_atomic's `.NAME.XXXXXXXX`): a
    SIGKILL skips the clean-up above. Call it only where nothing else writes `path` now."""
    path = Path(path)
    for stale in path.parent.glob(f".{glob.escape(path.name)}.*"):
        if len(stale.name) == len(path.name) + 10:  # '.' + name + '.' + mkstemp's 8 random characters
            stale.unlink(missing_ok=True)


def missing_folders(folder: str | Path) -> list[Path]:
    """`folder` and the folders above it that do not exist yet, innermost first: what making it will make, for
    `remove_made_folders` when what they were made for is taken back."""
    folder = Path(folder)
    return [f for f in [folder, *folder.parents] if not f.exists()]


def remove_made_folders(folders: list[Path]) -> None:
    """Remove the folders `missing_folders` listed before they were made, innermost first; one that is no longer
    empty stays."""
    for folder in folders:
        with contextlib.suppress(OSError):
            folder.rmdir()
