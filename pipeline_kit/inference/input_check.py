"""The checks of a generation's input file and output folder, run whole before any request (and, through
pipeline_kit.jobs.input_checks, at submission where kit sees the paths): every line valid JSON, every record with
the fields its prompt config needs, at least one record unless ++allow_empty_input, an output folder kit can write.
A file's verdict is cached by its content digest, so that a big input is read once, not on every run."""

from __future__ import annotations

import getpass
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.content_digest import cache_file, digested_lines, known_file_digest
from pipeline_kit.errors import UserError
from pipeline_kit.inference.config import GenerateConfig
from pipeline_kit.inference.prompts import load_prompt_config
from pipeline_kit.inference.registry import task_class
from pipeline_kit.jsonl import numbered_records
from pipeline_kit.overrides import config_value, parse_overrides

MAX_VERDICTS = 2_000  # inputs whose verdict is kept; beyond it the oldest go
CACHED_FROM_BYTES = 1 << 20  # a smaller input is read each time (milliseconds), without touching the caches
EMPTY_HINT = "++allow_empty_input=True"


def verdict_file() -> Path:
    """Beside the content digests' cache (KIT_DIGEST_CACHE's folder, else ~/.cache/pipeline_kit)."""
    return cache_file().parent / "input-checks.json"


def check_generation(cfg: GenerateConfig, input_shown: str | None = None, output_shown: str | None = None) -> None:
    """The input file of a generation type that reads one (each record with the fields of its prompt config) and
    the output folder; `*_shown`: the paths as the user wrote them (at submission)."""
    task = task_class(cfg.generation_type)
    if task.input_key == "input_file" and cfg.input_file is not None:
        fields, name = set(), None
        if task.prompt_key is not None:
            name = str(config_value(cfg, task.prompt_key))
            fields = load_prompt_config(name).fields()
        check_input_file(cfg.input_file, fields, name, cfg.allow_empty_input, input_shown)
    output = cfg.output_dir or os.path.dirname(os.path.abspath(cfg.output_file or "."))
    check_output_dir(output, output_shown, "--output_dir" if output_shown else "++output_dir")


def check_input_file(
    path: str, fields: set[str], prompt: str | None, allow_empty: bool, shown: str | None = None
) -> int:
    """The number of records of the JSONL `path`, each checked to hold `fields` (those of the prompt config named
    `prompt`, said in the error); none is an error unless `allow_empty`. `shown`: the path as the user wrote it
    (named in every error). The verdict of a file whose content was checked before with the same fields is taken
    from the cache, without reading it again."""

    shown = shown or path
    key = json.dumps([sorted(fields), allow_empty])
    try:
        cached = os.path.getsize(path) >= CACHED_FROM_BYTES
        if not cached:
            with open(path, "rb") as f:
                count, digest = _count_records(f, shown, fields, prompt), None
        else:
            digest = known_file_digest(path)
            count = _verdicts().get(f"{digest} {key}") if digest is not None else None
            if count is not None:
                return count
            digest, count = digested_lines(path, lambda lines: _count_records(lines, shown, fields, prompt))
    except OSError as e:
        raise UserError(f"{shown}: cannot read the input file ({e.strerror}); fix the path.") from None
    if count == 0 and not allow_empty:
        raise UserError(
            f"{shown}: the input file has no records, so there is nothing to generate; give a file with one JSON "
            f"object a line, or pass {EMPTY_HINT} to write an empty output."
        )
    if digest is not None:
        _remember(f"{digest} {key}", count)
    return count


def _count_records(lines: Iterator[bytes], shown: str, fields: set[str], prompt: str | None) -> int:
    """The records of `lines`, each checked; a tight loop (a 1 GB input is read once), whose errors are jsonl's."""
    count = 0
    for line_no, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError:  # not JSON, or not UTF-8
            record = None
        if not isinstance(record, dict):
            _refuse_line(line, line_no, shown)
        missing = [name for name in fields if name not in record]
        if missing:
            raise UserError(
                f"{shown}:{line_no}: the record has no field '{min(missing)}', which prompt config {prompt} needs (it "
                f"has: {', '.join(sorted(record)) or 'nothing'}); add it to every line or pick another ++prompt_config."
            )
        count += 1
    return count


def _refuse_line(line: bytes, line_no: int, shown: str) -> None:
    """The error of a line that is not a JSON object, as pipeline_kit.jsonl words it."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{shown}:{line_no}: not UTF-8 text; save the input file as UTF-8.") from None
    for _ in numbered_records([text], shown, start=line_no):
        pass


def _verdicts() -> dict[str, int]:
    try:
        data = json.loads(verdict_file().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _remember(key: str, count: int) -> None:
    verdicts = {k: v for k, v in _verdicts().items() if k != key} | {key: count}
    if len(verdicts) > MAX_VERDICTS:
        verdicts = dict(list(verdicts.items())[-MAX_VERDICTS:])
    try:
        write_atomic(verdict_file(), json.dumps(verdicts) + "\n")
    except OSError:
        pass  # a read-only home: the next run reads the file again


def check_output_dir(path: str, shown: str | None = None, flag: str = "--output_dir") -> None:
    """The folder can be written: it exists and is writable, or the nearest folder above it that exists is (kit
    makes the rest). A file in the way is an error too."""
    shown = shown or path
    folder = Path(os.path.abspath(path))
    probe = folder
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir():
        raise UserError(f"{flag}={shown}: {probe} is a file, not a folder; give another {flag}.")
    if not os.access(probe, os.W_OK | os.X_OK):
        what = "the output folder" if probe == folder else f"{probe}, where kit would make it,"
        raise UserError(
            f"{flag}={shown}: {what} cannot be written by user {getpass.getuser()}; fix "
            f"its permissions or give another {flag}."
        )


# the generation script's server keys are required; this check needs no server
_NO_SERVER = ("++server.base_url=http://not-used-by-the-check/v1", "++server.model=not-used-by-the-check")


def main(argv: list[str] | None = None) -> int:
    """`python -m pipeline_kit.inference.input_check ++key=value ...` (the generation script's overrides): what a
    job runs before its server starts where kit could not check its paths at submission (a cluster over SSH)."""
    try:
        args = list(sys.argv[1:] if argv is None else argv)
        check_generation(parse_overrides([*_NO_SERVER, *args], GenerateConfig, "generation"))
    except UserError as e:
        print(f"kit generate: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
