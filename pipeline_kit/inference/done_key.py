"""Content-keyed `.done` records: a finished output's `.done` holds what made it (model, server type, prompt,
inference settings, input content, seed, chunk layout; the generation type unless it is plain generation), so a
rerun with other settings stops instead of silently reusing it. Settings that cannot change the output
(concurrency, retries, timeouts) are not part of the key."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.inference.config import GenerateConfig

TIR_KEYS = ("code_tags", "max_code_executions", "code_timeout", "max_code_output_characters", "code_language")


def done_marker(path: str | Path) -> Path:
    return Path(f"{path}.done")


def write_done(output: str | Path, key: dict[str, object]) -> None:
    """Mark `output` finished, recording the key of what made it."""
    write_atomic(done_marker(output), json.dumps({"key": key}, sort_keys=True, default=str) + "\n")


def file_digest(path: str | Path, what: str = "") -> str:
    """A short content hash; `what` (e.g. '++input_file=') prefixes the path in the error."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError as e:
        raise UserError(f"{what}{path}: cannot read it ({e.strerror}).") from None
    return h.hexdigest()[:16]


def input_digest(cfg: GenerateConfig) -> str:
    """The content hash of what a unit reads: ++input_file, or for GenSelect the runs in ++input_dir."""
    if cfg.generation_type == "genselect":
        from pipeline_kit.selection.genselect_runs import runs_digest  # with the grader it reads: only for GenSelect

        return runs_digest(cfg.input_dir)
    return file_digest(cfg.input_file, "++input_file=")


def key_fields(cfg: GenerateConfig, input_digest: str) -> dict[str, object]:
    """The key of one unit's output (`cfg` as the generation script runs it), as flat `name: value` fields. A
    generation type other than `generate` adds itself and its settings (so old keys stay as they were)."""
    from pipeline_kit.inference.prompts import resolve_prompt_path

    genselect = cfg.generation_type == "genselect"
    prompt = cfg.genselect.prompt_config if genselect else cfg.prompt_config
    fields: dict[str, object] = {
        **({"generation_type": cfg.generation_type} if cfg.generation_type != "generate" else {}),
        "server.model": cfg.server.model,
        "server.server_type": cfg.server.server_type,
        "server.endpoint": cfg.server.endpoint,
        "server.chat_template": cfg.server.chat_template,
        f"{'genselect.' if genselect else ''}prompt_config": prompt,
        f"{'genselect.' if genselect else ''}prompt_config content": file_digest(resolve_prompt_path(prompt)),
        f"{'input_dir' if genselect else 'input_file'} content": input_digest,
        **({"genselect.window": cfg.genselect.window} if genselect else {}),
        "chunk_id": cfg.chunk_id,
        "num_chunks": cfg.num_chunks,
        # logprobs only when asked for: older keys (without it) stay valid
        **{f"inference.{k}": v for k, v in asdict(cfg.inference).items() if k != "logprobs" or v},
        "code_execution": cfg.code_execution,
        # only another field: `generation` is what every run wrote before the key existed (older keys stay valid)
        **({"generation_key": cfg.generation_key} if cfg.generation_key not in (None, "generation") else {}),
    }
    if cfg.code_execution:
        fields.update({k: getattr(cfg, k) for k in TIR_KEYS})
        fields["code_tags content"] = _code_tags_digest(cfg.code_tags)
    return fields


def for_unit(fields: dict[str, object], chunk_id: int | None, seed: int | None) -> dict[str, object]:
    """A plan's key with one unit's chunk and seed (a greedy unit keeps the configured seed), as the script of that
    unit computes it."""
    seeded = {"inference.random_seed": seed} if seed is not None else {}
    return {**fields, "chunk_id": chunk_id, **seeded}


def merged_fields(fields: dict[str, object]) -> dict[str, object]:
    """The key of the file the chunks are merged into: every chunk's key less its chunk id."""
    return {k: v for k, v in fields.items() if k != "chunk_id"}


def _code_tags_digest(name: str) -> str:
    from pipeline_kit.inference.tir import code_tags_path

    return file_digest(code_tags_path(name))


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
    names = sorted(set(recorded) | set(current))
    return [
        f"{n}: {show(recorded.get(n))} → {show(current.get(n))}" for n in names if recorded.get(n) != current.get(n)
    ]


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
