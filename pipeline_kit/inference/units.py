"""The units of a generation run: one input chunk × one random seed, each with its output file
(`output[-rs{seed}][_chunk_{k}].jsonl`). `kit generate` plans them; a job's units share one request pool."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, replace
from pathlib import Path

from pipeline_kit.errors import UserError
from pipeline_kit.inference.done_key import done_marker
from pipeline_kit.shares import even_shares


@dataclass(frozen=True)
class Unit:
    seed: int | None  # None: the greedy output.jsonl
    chunk_id: int | None  # None: the whole input

    def output_file(self, output_dir: str | Path) -> Path:
        stem = "output" if self.seed is None else f"output-rs{self.seed}"
        if self.chunk_id is not None:
            stem += f"_chunk_{self.chunk_id}"
        return Path(output_dir) / f"{stem}.jsonl"

    def merged_file(self, output_dir: str | Path) -> Path:
        return Unit(self.seed, None).output_file(output_dir)

    def is_done_in(self, listing: set[str]) -> bool:
        """Whether the output folder, whose file names are `listing`, has its own .done, or (for a chunk) the .done
        of the file the chunks were merged into (done_units lists the folder once)."""
        return done_marker(self.output_file("")).name in listing or (
            self.chunk_id is not None and done_marker(self.merged_file("")).name in listing
        )

    @property
    def label(self) -> str:
        """greedy | rs{seed} | chunk_{k} | rs{seed}_chunk_{k}: how ++units names it."""
        return self.output_file("").stem.removeprefix("output").lstrip("-_") or "greedy"

    @classmethod
    def from_label(cls, label: str, num_chunks: int | None) -> Unit:
        m = _LABEL.match(label)
        if not m:
            raise UserError(f"++units: '{label}' is not a unit; write greedy, rs3, chunk_2 or rs3_chunk_2.")
        seed, chunk = (int(v) if v is not None else None for v in m.group("seed", "chunk"))
        if (chunk is None) != (num_chunks is None) or (chunk is not None and not 0 <= chunk < num_chunks):
            raise UserError(f"++units: '{label}' does not fit ++num_chunks={num_chunks}; name chunks 0..num_chunks-1.")
        return cls(seed, chunk)


_LABEL = re.compile(r"^(greedy|(rs(?P<seed>\d+))?(_?chunk_(?P<chunk>\d+))?)$")


def plan_units(seeds: list[int] | None, num_chunks: int | None, chunk_ids: list[int] | None) -> list[Unit]:
    """Every (seed, chunk) pair, seeds outermost. `chunk_ids` picks chunks out of `num_chunks` [default: all]."""
    if num_chunks is not None and num_chunks < 1:
        raise UserError(f"--num_chunks must be at least 1, got {num_chunks}.")
    if chunk_ids is not None:
        if num_chunks is None:
            raise UserError("--chunk_ids needs --num_chunks (how many chunks the input is cut into).")
        bad = [c for c in chunk_ids if not 0 <= c < num_chunks]
        if bad:
            raise UserError(
                f"--chunk_ids: chunk {bad[0]} is out of range 0..{num_chunks - 1} (--num_chunks={num_chunks})."
            )
    chunks = chunk_ids if chunk_ids is not None else (list(range(num_chunks)) if num_chunks else [None])
    return [Unit(seed, chunk) for seed in (seeds if seeds is not None else [None]) for chunk in chunks]


def split_units(units: list, n: int) -> list[list]:
    """`units` in `n` consecutive shares whose lengths differ by at most one (the longer ones first)."""
    return even_shares(units, n)


def parse_id_list(text: str, flag: str) -> list[int]:
    """'0,3,5-7' → [0, 3, 5, 6, 7]; anything else names the flag and the bad part."""
    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        lo, dash, hi = part.partition("-")
        try:
            out += list(range(int(lo), int(hi) + 1)) if dash else [int(part)]
        except ValueError:
            raise UserError(f"{flag}={text}: '{part}' is not a number or a range like 5-7.") from None
    return list(dict.fromkeys(out))


def expand(cfg):
    """A GenerateConfig with `output_dir` (a plan) → one GenerateConfig per unit; with `output_file` → itself."""
    if (cfg.output_file is None) == (cfg.output_dir is None):
        raise UserError("give exactly one of ++output_file (one unit) and ++output_dir (the units of a plan).")
    if cfg.output_file is not None:
        if cfg.units is not None:
            raise UserError("++units goes with ++output_dir, not ++output_file.")
        return [cfg]
    labels = cfg.units if cfg.units is not None else [u.label for u in plan_units(None, cfg.num_chunks, None)]
    units = [Unit.from_label(str(label), cfg.num_chunks) for label in labels]
    return [
        replace(
            cfg,
            output_file=str(u.output_file(cfg.output_dir)),
            output_dir=None,
            units=None,
            chunk_id=u.chunk_id,
            inference=replace(cfg.inference, random_seed=u.seed if u.seed is not None else cfg.inference.random_seed),
        )
        for u in units
    ]


def done_units(units: list[Unit], output_dir: str | Path) -> list[Unit]:
    """The units that are done (Unit.is_done_in), from one listing of the output folder: a plan of 800 units costs
    one listing, not 1,600 lookups."""
    try:
        listing = set(os.listdir(output_dir))
    except OSError:  # no folder yet: nothing is done
        return []
    return [u for u in units if u.is_done_in(listing)]
