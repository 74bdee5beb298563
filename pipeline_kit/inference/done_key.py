"""Content-keyed `.done` records: a finished output's `.done` holds what made it (model, and a model folder's content,
server type, prompt, inference settings, input content, seed, chunk layout; the generation type unless it is plain
generation; every --server_args flag of a server kit starts, but UNKEYED_SERVER_ARGS), so a rerun with other
settings stops instead of silently reusing it. The generation type's task (tasks.py) names its own fields and its
input digest; contents are pipeline_kit.content_digest's. Settings that cannot change the output (concurrency,
retries, timeouts) are not part of the key."""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

from pipeline_kit.atomic import write_atomic
from pipeline_kit.content_digest import path_digest
from pipeline_kit.errors import UserError
from pipeline_kit.inference.registry import DEFAULT_GENERATION_TYPE
from pipeline_kit.inference.request_options import OFF

if TYPE_CHECKING:
    from pipeline_kit.inference.config import GenerateConfig
    from pipeline_kit.inference.tasks import GenerationTask


# --server_args flags that cannot change a sample: parallelism, batching and scheduling, memory, where the server
# listens, logging (vLLM's and SGLang's spellings; `_` reads as `-`). Like tensor parallelism, batching may move a
# float's last bits on a GPU, not which model or sampling settings answer; so a server that crashed can come back
# with, e.g., chunked prefill off without redoing the finished outputs. Every other flag is part of the .done key.
# Documented in docs/generation/index.md (`.done` keys): keep the two together.
UNKEYED_SERVER_ARGS = frozenset(
    {
        # parallelism
        "--tensor-parallel-size",
        "-tp",
        "--pipeline-parallel-size",
        "-pp",
        "--data-parallel-size",
        "-dp",
        "--distributed-executor-backend",
        "--disable-custom-all-reduce",
        "--tp-size",
        "--tp",
        "--pp-size",
        "--dp-size",
        "--dp",
        # batching, scheduling and memory
        "--gpu-memory-utilization",
        "--max-num-seqs",
        "--max-num-batched-tokens",
        "--enable-chunked-prefill",
        "--no-enable-chunked-prefill",
        "--max-num-partial-prefills",
        "--enable-prefix-caching",
        "--no-enable-prefix-caching",
        "--enforce-eager",
        "--swap-space",
        "--async-scheduling",
        "--mem-fraction-static",
        "--max-running-requests",
        "--chunked-prefill-size",
        "--max-prefill-tokens",
        "--disable-radix-cache",
        "--disable-cuda-graph",
        "--cuda-graph-max-bs",
        "--schedule-policy",
        # where it listens, logging
        "--port",
        "--host",
        "--disable-log-requests",
        "--enable-log-requests",
        "--disable-log-stats",
        "--uvicorn-log-level",
        "--log-level",
        "--log-requests",
    }
)


def _is_flag(token: str) -> bool:
    """`-x`/`--name` (not a negative number, which is a value)."""
    if not token.startswith("-") or token in ("-", "--"):
        return False
    try:
        float(token)
    except ValueError:
        return True
    return False


def _flag_name(token: str) -> str:
    return "--" + token[2:].replace("_", "-") if token.startswith("--") else token


def parse_server_args(server_args: str) -> list[tuple[str, object]]:
    """--server_args as (flag, value) pairs: `--flag=value` and `--flag value` alike, a flag without a value True,
    `_` in a long flag's name read as `-`; a word that follows no flag is ('', word)."""
    try:
        tokens = shlex.split(server_args)
    except ValueError as e:
        raise UserError(
            f"--server_args={server_args!r} cannot be split into arguments ({e}); fix its quotes."
        ) from None
    pairs: list[tuple[str, object]] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if not _is_flag(token):
            pairs.append(("", token))
            i += 1
        elif token.startswith("--") and "=" in token:
            flag, _, value = token.partition("=")
            pairs.append((_flag_name(flag), value))
            i += 1
        elif i + 1 < len(tokens) and not _is_flag(tokens[i + 1]):
            pairs.append((_flag_name(token), tokens[i + 1]))
            i += 2
        else:
            pairs.append((_flag_name(token), True))
            i += 1
    return pairs


def keyed_server_args(server_args: str) -> str:
    """The keyed part of --server_args, normalised (`--flag=value`), as kit passes it to the generation script:
    `server_arg_fields` reads the same fields from it as from `server_args`."""
    parts: list[str] = []
    for flag, value in parse_server_args(server_args):
        if flag in UNKEYED_SERVER_ARGS:
            continue
        if not flag or value is True:
            parts.append(flag or str(value))
        else:
            parts += [f"{flag}={value}"] if flag.startswith("--") else [flag, str(value)]
    return shlex.join(parts)


def server_arg_fields(server_args: str) -> dict[str, object]:
    """`server_args FLAG: value` for each flag that can change a sample (a repeated one: its values in order);
    none for empty server args, so the keys written before server args were keyed stay valid."""
    keyed: dict[str, list[object]] = {}
    for flag, value in parse_server_args(server_args):
        if flag not in UNKEYED_SERVER_ARGS:
            keyed.setdefault(f"server_args {flag or '(positional)'}", []).append(value)
    return {name: values[0] if len(values) == 1 else values for name, values in sorted(keyed.items())}


def done_marker(path: str | Path) -> Path:
    return Path(f"{path}.done")


def write_done(output: str | Path, key: dict[str, object]) -> None:
    """Mark `output` finished, recording the key of what made it."""
    write_atomic(done_marker(output), json.dumps({"key": key}, sort_keys=True, default=str) + "\n")


def key_fields(cfg: GenerateConfig, task: type[GenerationTask], input_digest: str) -> dict[str, object]:
    """The key of one unit's output (`cfg` as the generation script runs it, `task` its generation type's class), as
    flat `name: value` fields: the common ones here, the type's own from the task. A type other than the default adds
    its name (so the older keys of plain generation stay as they were)."""
    fields: dict[str, object] = {
        **({"generation_type": cfg.generation_type} if cfg.generation_type != DEFAULT_GENERATION_TYPE else {}),
        "server.model": cfg.server.model,
        **model_fields(cfg.server.model),
        "server.server_type": cfg.server.server_type,
        "server.endpoint": cfg.server.endpoint,
        "server.chat_template": cfg.server.chat_template,
        **server_arg_fields(cfg.server.server_args),
        f"{task.input_key} content": input_digest,
        "chunk_id": cfg.chunk_id,
        "num_chunks": cfg.num_chunks,
        # logprobs and the request options that came later only when set: older keys (without them) stay valid
        **{f"inference.{k}": v for k, v in asdict(cfg.inference).items() if _keyed(k, v)},
        **({"chat_template_kwargs": dict(cfg.chat_template_kwargs)} if cfg.chat_template_kwargs else {}),
        **({"max_samples": cfg.max_samples} if cfg.max_samples != -1 else {}),
        **({"parse_reasoning": True, "end_reasoning_string": cfg.end_reasoning_string} if cfg.parse_reasoning else {}),
        "code_execution": cfg.code_execution,
        # only another field: `generation` is what every run wrote before the key existed (older keys stay valid)
        **({"generation_key": cfg.generation_key} if cfg.generation_key not in (None, "generation") else {}),
    }
    return {**fields, **task.done_key_fields(cfg)}


def _keyed(name: str, value: object) -> bool:
    """Whether an inference field is part of the key: always, except logprobs and the later request options
    (request_options.OFF) while they are off (top_k was keyed from the start, off or not)."""
    if name == "logprobs":
        return bool(value)
    return name == "top_k" or name not in OFF or value != OFF[name]


def model_fields(model: str) -> dict[str, object]:
    """`server.model content`: the content digest of a model folder (or file) given as an absolute path that exists
    here, so that a checkpoint rewritten in place is a new key. A served name, or a path kit cannot see from here
    (a remote machine's or a container's), stays keyed by its name alone (`server.model`)."""
    if not os.path.isabs(model) or not os.path.exists(model):
        return {}
    return {"server.model content": path_digest(model, "++server.model=")}


def for_unit(fields: dict[str, object], chunk_id: int | None, seed: int | None) -> dict[str, object]:
    """A plan's key with one unit's chunk and seed (a greedy unit keeps the configured seed), as the script of that
    unit computes it."""
    seeded = {"inference.random_seed": seed} if seed is not None else {}
    return {**fields, "chunk_id": chunk_id, **seeded}


def merged_fields(fields: dict[str, object]) -> dict[str, object]:
    """The key of the file the chunks are merged into: every chunk's key less its chunk id."""
    return {k: v for k, v in fields.items() if k != "chunk_id"}


def recorded_key(output: str | Path) -> dict[str, object] | None:
    """The key in an output's `.done`; None for a `.done` written before keys existed (it keeps working)."""
    text = done_marker(output).read_text().strip()
    if not text:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return data.get("key") if isinstance(data, dict) and isinstance(data.get("key"), dict) else None


def changed_fields(recorded: dict[str, object], current: dict[str, object]) -> list[str]:
    """'name: old → new' for every field whose value differs (values as JSON, long ones cut)."""

    def show(value: object) -> str:
        text = json.dumps(value, default=str)
        return text if len(text) <= 40 else text[:37] + "..."

    current = json.loads(json.dumps(current, default=str))  # compare as stored
    # a flag keyed when the output was made but unkeyed since (--enforce-eager before 2026-11-29) changes nothing
    recorded = {n: v for n, v in recorded.items() if not _unkeyed_since(n)}
    names = sorted(set(recorded) | set(current))
    return [
        f"{n}: {show(recorded.get(n))} → {show(current.get(n))}" for n in names if recorded.get(n) != current.get(n)
    ]


def _unkeyed_since(name: str) -> bool:
    """A `server_args FLAG` field whose flag is unkeyed now."""
    return name.startswith("server_args ") and name.removeprefix("server_args ") in UNKEYED_SERVER_ARGS


def check_done(output: str | Path, fields: dict[str, object], rerun_hint: str) -> None:
    """Stop when `output` is done with another key; `rerun_hint` says how to redo it (flag or override)."""
    recorded = recorded_key(output)
    if recorded is None:
        return
    changed = changed_fields(recorded, fields)
    if changed:
        raise UserError(
            f"{output} is done, but was made with other settings ({'; '.join(changed)}); pass {rerun_hint} to redo "
            "it, or write to another output folder."
        )


def check_chunk_keys(chunks: list[Path], merged_key: dict[str, object]) -> None:
    """Chunks merge only when each was made with the settings of the merge (a chunk redone with other settings
    would mix them in one file)."""
    for chunk in chunks:
        recorded = recorded_key(chunk)
        changed = changed_fields(merged_fields(recorded), merged_key) if recorded is not None else []
        if changed:
            raise UserError(
                f"{chunk} was made with other settings than the chunks it would be merged with ({'; '.join(changed)}); "
                "redo it with the same settings, or redo every chunk with --rerun_done."
            )
