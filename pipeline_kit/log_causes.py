"""What a failed command's log says went wrong: its first lines that name an error. The last lines are often only
"see root cause above"; the job scripts (grep -E) and kit's own reports (re) share these patterns."""

from __future__ import annotations

import re

# an exception line ("ValueError: ...", also behind a logger's prefix) names the cause best; failing that, a line
# at level ERROR/FATAL/CRITICAL, an "error: ", a kill, out of memory, a missing file or command
EXCEPTION_PATTERN = r"(^|[[:space:]]|])[A-Za-z_.]*(Error|Exception)[A-Za-z]*: "
ERROR_PATTERN = (
    r"(^|[^A-Za-z])(ERROR|FATAL|CRITICAL)([^A-Za-z]|$)|[Ee]rror: |Killed|[Oo]ut of memory"
    r"|No such file or directory|command not found"
)
# warnings that quote an error, and the frames of a traceback, are not the cause
NOT_CAUSE_PATTERN = r"WARNING|Warning: |Traceback \(most recent call last\)|File \""

_PY = {"[[:space:]]": r"\s"}  # the one POSIX class the shell patterns use, in Python's spelling


def _python(pattern: str) -> re.Pattern:
    for posix, python in _PY.items():
        pattern = pattern.replace(posix, python)
    return re.compile(pattern)


_EXCEPTION, _ERROR, _NOT_CAUSE = map(_python, (EXCEPTION_PATTERN, ERROR_PATTERN, NOT_CAUSE_PATTERN))


def first_causes(lines: list[str], limit: int = 5) -> list[str]:
    """The first distinct exception lines; when there are none, the first distinct error lines."""
    candidates = [line for line in lines if not _NOT_CAUSE.search(line)]
    for pattern in (_EXCEPTION, _ERROR):
        found = list(dict.fromkeys(line for line in candidates if pattern.search(line)))[:limit]
        if found:
            return found
    return []


# the same rule in bash, for the job scripts: kit_cause NAME prints the first causes of NAME's log
SHELL_FUNCTION = rf"""kit_cause() {{  # NAME: the first lines of NAME's log that name an error (see log_causes.py)
  local log="$KIT_LOG_DIR/${{KIT_LOG_PREFIX:-}}$1.log" found
  [ -f "$log" ] || return 0
  found=$(grep -v -E '{NOT_CAUSE_PATTERN}' "$log" | grep -E '{EXCEPTION_PATTERN}' | awk '!seen[$0]++' | head -n 5)
  [ -n "$found" ] || found=$(grep -v -E '{NOT_CAUSE_PATTERN}' "$log" | grep -E '{ERROR_PATTERN}' | awk '!seen[$0]++' | head -n 5)
  [ -z "$found" ] || echo "$found" | sed "s|^|kit:   $1.log: |"
}}"""
