"""Training data from generation outputs: `kit prepare_sft_data` (graded solutions -> SFT JSONL) and
`kit prepare_rl_data` (problems with answers -> RL prompt JSONL).

SFT: every `output*.jsonl` under each --input_dir (chunk files and `.done` markers are not outputs) is read; files
not graded yet are graded in place first (as `kit grade` does). Per source, in this order: incorrect records are
dropped (unless keep_incorrect), identical (problem, generation) pairs are kept once (across sources too: the
first source keeps it), generations longer than max_length characters are dropped, problems that overlap a
benchmark's test problems are dropped (decontamination, below), then the source is mixed in by its weight: weight
w keeps round(w * n) of its n records (sampled without replacement with the seed; w > 1 repeats every record
int(w) times plus a sample for the rest). The mixture is shuffled with the seed. Output records are
`{"problem", "generation", "expected_answer", "id", "source"}`: plain text, no chat template; the trainer applies
the model's own chat template later, so that one file serves every model.

Decontamination: word n-grams (default 13; lower-cased, punctuation removed) of each problem are looked up in
the n-grams of the prepared test files of the named benchmarks (`<data_dir>/NAME/<split>.jsonl`); a text shorter
than n words is one gram, its whole word sequence, so it matches a text with the same words. Benchmarks not
prepared are skipped with one warning line. Dropped problems are listed in `<output_file>.decontamination.json`
with the benchmark, its problem id and a matching n-gram."""

from __future__ import annotations

import json
import math
import random
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.benchmarks import benchmark_names, get_benchmark
from pipeline_kit.dedupe import sample_key
from pipeline_kit.errors import UserError, closest
from pipeline_kit.grading.grade import grade_files
from pipeline_kit.grading.output_names import OUTPUT_GLOB
from pipeline_kit.inference.reasoning import START
from pipeline_kit.jsonl import numbered_records

DEFAULT_NGRAM = 13
_NOT_WORD = re.compile(r"[^\w\s]+")


# ---- decontamination


def words(text: str) -> list[str]:
    """Lower-cased words of `text`, punctuation removed (a punctuation mark separates words: '3+4' is '3 4')."""
    return _NOT_WORD.sub(" ", text.lower()).split()


def ngrams(text: str, n: int) -> list[tuple[str, ...]]:
    """The word n-grams of `text`, in order; a text shorter than n words is one gram, its whole word sequence."""
    w = words(text)
    if len(w) < n:
        return [tuple(w)] if w else []
    return [tuple(w[i : i + n]) for i in range(len(w) - n + 1)]


@dataclass
class Match:
    benchmark: str
    benchmark_id: str
    ngram: str


@dataclass
class Decontaminator:
    """The n-grams of the test problems of `checked` benchmarks; `match` finds a problem's first overlap."""

    n: int
    checked: list[str]
    skipped: list[str]
    index: dict[tuple[str, ...], tuple[str, str]] = field(default_factory=dict)  # gram -> (benchmark, id)
    _seen: dict[str, Match | None] = field(default_factory=dict)

    def match(self, problem: str) -> Match | None:
        if problem not in self._seen:
            hit = next((g for g in ngrams(problem, self.n) if g in self.index), None)
            self._seen[problem] = None if hit is None else Match(*self.index[hit], " ".join(hit))
        return self._seen[problem]

    def report(self, dropped: list[dict]) -> dict:
        return {"ngram": self.n, "checked": self.checked, "not_prepared": self.skipped, "dropped": dropped}


def benchmark_list(decontaminate: str | None, enabled: bool) -> list[str]:
    """The benchmark names of --decontaminate (comma-separated, or `all`, the default); [] with --no_decontaminate."""

    if not enabled:
        if decontaminate is not None:
            raise UserError(
                f"--decontaminate={decontaminate} and --no_decontaminate contradict each other; pass one of them."
            )
        return []
    known = benchmark_names()
    if decontaminate is None or decontaminate.strip() == "all":
        return known
    names = [name.strip() for name in decontaminate.split(",") if name.strip()]
    if not names:
        raise UserError("--decontaminate is empty; name benchmarks (e.g. --decontaminate=math500,aime24) or 'all'.")
    for name in names:
        if name not in known:
            best = closest(name, known)
            hint = f" Did you mean '{best}'?" if best else ""
            raise UserError(f"--decontaminate: unknown benchmark '{name}'.{hint} Known: {', '.join(known)} (or 'all').")
    return list(dict.fromkeys(names))


def load_decontaminator(names: list[str], n: int, data_dir: str | Path | None) -> Decontaminator | None:
    """The n-gram index of the prepared test files of `names`; None when `names` is empty (no decontamination)."""

    if n < 1:
        raise UserError(f"--ngram={n}: must be at least 1 (13 is usual); pass e.g. --ngram=13.")
    if not names:
        return None
    deco = Decontaminator(n, [], [])
    for name in names:
        path = get_benchmark(name).data_file(data_dir)
        if not path.is_file():
            deco.skipped.append(name)
            continue
        deco.checked.append(name)
        for lineno, rec in _records(path):
            problem = rec.get("problem")
            if not isinstance(problem, str):
                raise UserError(f"{path}:{lineno}: test record has no 'problem' text; run `kit prepare_data {name}`.")
            for gram in ngrams(problem, n):
                deco.index.setdefault(gram, (name, str(rec.get("id", f"{name}-{lineno}"))))
    if deco.skipped:
        where = f" --data_dir {data_dir}" if data_dir is not None else ""
        print(
            f"kit: warning: not decontaminated against {', '.join(deco.skipped)} (not prepared); prepare them with "
            f"`kit prepare_data {' '.join(deco.skipped)}{where}` or leave them out of --decontaminate.",
            file=sys.stderr,
        )
    return deco


# ---- reading


def _records(path: Path):
    """(line number, record) of every non-blank line of the JSONL file `path`; bad JSON names the line."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e}); check the file.") from None
    yield from numbered_records(lines, path)


def output_files(input_dir: Path) -> list[Path]:
    """Every output*.jsonl under `input_dir` (sorted), without chunk files; a missing or empty folder is an error."""
    if not input_dir.is_dir():
        raise UserError(
            f"--input_dir {input_dir}: no such folder; give a folder of generation outputs ({OUTPUT_GLOB})."
        )
    found = sorted(p for p in input_dir.rglob(OUTPUT_GLOB) if p.is_file() and "_chunk_" not in p.name)
    if not found:
        raise UserError(f"--input_dir {input_dir}: no {OUTPUT_GLOB} files under this folder; run `kit generate` first.")
    return found


def _read_outputs(files: list[Path], need_grades: bool) -> dict[Path, list[tuple[int, dict]]]:
    """The records of `files`; with `need_grades`, files with a record lacking symbolic_correct are graded first."""
    read = {path: list(_records(path)) for path in files}
    ungraded = [p for p, recs in read.items() if need_grades and any("symbolic_correct" not in r for _, r in recs)]
    if ungraded:
        grade_files(ungraded)
        read.update({path: list(_records(path)) for path in ungraded})
    for path, recs in read.items():
        for lineno, rec in recs:
            for key in ("problem", "generation"):
                if not isinstance(rec.get(key), str):
                    raise UserError(f"{path}:{lineno}: record has no '{key}' text; is this a `kit generate` output?")
            if need_grades and not isinstance(rec.get("symbolic_correct"), bool):
                raise UserError(
                    f"{path}:{lineno}: symbolic_correct must be true or false, got {rec.get('symbolic_correct')!r}; "
                    "re-run `kit grade`, or pass --keep_incorrect."
                )
    return read


# ---- mixing


def parse_weights(text: str | None, count: int) -> list[float]:
    """--weights '1,0.5': one number >= 0 per input; all 1 when not given."""
    if text is None:
        return [1.0] * count
    parts = [p.strip() for p in text.split(",")]
    weights = []
    for part in parts:
        try:
            w = float(part)
        except ValueError:
            w = -1.0
        if not (math.isfinite(w) and w >= 0):
            raise UserError(f"--weights={text}: '{part}' is not a number >= 0; give one per --input_dir, e.g. 1,0.5.")
        weights.append(w)
    if len(weights) != count:
        raise UserError(
            f"--weights={text} has {len(weights)} numbers for {count} --input_dir folders; give one per folder."
        )
    return weights


def weighted(records: list[dict], weight: float, rng: random.Random) -> list[dict]:
    """round(weight * n) of the n records: every record int(k / n) times, then a sample without replacement."""
    n = len(records)
    k = math.floor(weight * n + 0.5)
    if n == 0 or k == 0:
        return []
    whole, rest = divmod(k, n)
    picked = sorted(rng.sample(range(n), rest))
    return records * whole + [records[i] for i in picked]


# ---- SFT


@dataclass
class Counts:
    source: str
    read: int = 0
    correct: int = 0
    unfinished: int = 0  # a reasoning trace that never reached its end (no answer)
    duplicate: int = 0
    too_long: int = 0
    contaminated: int = 0
    kept: int = 0


def prepare_sft(
    input_dirs: list[Path],
    output_file: Path,
    weights: str | None = None,
    max_length: int | None = None,
    keep_incorrect: bool = False,
    dedupe: bool = True,
    decontaminate: str | None = None,
    do_decontaminate: bool = True,
    ngram: int = DEFAULT_NGRAM,
    data_dir: str | Path | None = None,
    seed: int = 0,
    reasoning: str = "keep",
    end_reasoning_string: str = "</think>",
    start_reasoning_string: str = START,
) -> str:
    """Write the SFT file (and its decontamination report); returns the summary to print. A record whose thinking
    was split from its answer (`reasoning_content`) trains on both (`reasoning="keep"`: the start string, the trace,
    the end string, the answer) or on the answer alone ("drop"); a trace that never reached its end is left out. The
    start string is empty for a model whose chat template opens the trace in the prompt (DeepSeek-R1's writes
    <think> after the assistant's tag): the training text then starts with the trace, as the model's own output."""
    if reasoning not in REASONING_CHOICES:
        raise UserError(f"--reasoning={reasoning}: use one of {', '.join(REASONING_CHOICES)}.")
    if not input_dirs:
        raise UserError("no --input_dir given; name at least one folder of generation outputs.")
    if max_length is not None and max_length < 1:
        raise UserError(f"--max_length={max_length}: must be a positive number of characters.")
    wts = parse_weights(weights, len(input_dirs))
    files = {d: output_files(Path(d)) for d in input_dirs}
    deco = load_decontaminator(benchmark_list(decontaminate, do_decontaminate), ngram, data_dir)
    read = _read_outputs([p for fs in files.values() for p in fs], need_grades=not keep_incorrect)
    rng = random.Random(seed)
    seen: set[tuple[str, str]] = set()
    dropped: dict[tuple[str, str], dict] = {}
    mixed: list[dict] = []
    table: list[Counts] = []
    for d, w in zip(input_dirs, wts, strict=True):
        c = Counts(str(d))
        kept = []
        for path in files[d]:
            for lineno, rec in read[path]:
                c.read += 1
                if not keep_incorrect and not rec["symbolic_correct"]:
                    continue
                c.correct += 1
                if rec.get("finished_reasoning") is False:  # optional: only a split sample has it
                    c.unfinished += 1
                    continue
                rec["generation"] = training_text(rec, reasoning, start_reasoning_string, end_reasoning_string)
                pair = sample_key(rec["problem"], rec["generation"])
                if dedupe and pair in seen:
                    c.duplicate += 1
                    continue
                seen.add(pair)
                if max_length is not None and len(rec["generation"]) > max_length:
                    c.too_long += 1
                    continue
                rid = str(rec.get("id", f"{path.name}:{lineno}"))
                if deco is not None and (m := deco.match(rec["problem"])):
                    c.contaminated += 1
                    dropped.setdefault((c.source, rid), _dropped(rid, c.source, rec["problem"], m))
                    continue
                kept.append(
                    {
                        "problem": rec["problem"],
                        "generation": rec["generation"],
                        "expected_answer": rec.get("expected_answer"),
                        "id": rid,
                        "source": c.source,
                    }
                )
        picked = weighted(kept, w, rng)
        c.kept = len(picked)
        mixed.extend(picked)
        table.append(c)
    rng.shuffle(mixed)
    if not mixed:
        raise _nothing_kept(output_file, table, list(dropped.values()), graded=True)
    _write_jsonl(output_file, mixed)
    columns = ["read", "correct", "unfinished", "duplicate", "too_long", "contaminated", "kept"]
    lines = [_counts_table(table, columns, wts)]
    lines.append(f"\nwrote {len(mixed)} records to {output_file}")
    if deco is not None:
        lines.append(_write_report(output_file, deco, list(dropped.values())))
    return "\n".join(lines)


REASONING_CHOICES = ("keep", "drop")

# why records were dropped (Counts fields), in words, with what keeps them
_DROPS = {
    "incorrect": ("not graded correct", "pass --keep_incorrect to keep them"),
    "unfinished": ("with a reasoning trace that never ended", "give the model more tokens to think"),
    "too_long": ("too long", "raise --max_length"),
    "contaminated": (
        "contaminated",
        "they share n-grams with benchmarks' test problems: train on other problems, or leave those benchmarks out "
        "of --decontaminate",
    ),
}


def _nothing_kept(output_file: Path, table: list[Counts], dropped: list[dict], graded: bool) -> UserError:
    """No record is left to write: how many each filter took, and what keeps the largest share. Nothing is written
    (an empty file would only fail the training job later). `graded`: SFT's sources, whose `correct` counts."""
    total = {name: sum(getattr(c, name) for c in table) for name in Counts.__dataclass_fields__ if name != "source"}
    total["incorrect"] = total["read"] - total["correct"] if graded else 0
    if not total["read"]:
        return UserError(f"nothing to write to {output_file}: the inputs hold no records; give generation outputs.")
    took = {name: total[name] for name in _DROPS if total[name]}
    counts = [f"{n} {_DROPS[name][0]}" for name, n in took.items()]
    counts += [f"{total['duplicate']} repeated"] if total["duplicate"] else []
    why = max(took, key=took.get) if took else None
    fix = _DROPS[why][1] if why else "check --weights (a weight of 0 keeps none)"
    if why == "contaminated":
        fix += f" (matched: {', '.join(sorted({d['benchmark'] for d in dropped}))})"
    return UserError(
        f"nothing to write to {output_file}: of {total['read']} records read, {', '.join(counts) or 'none'} were "
        f"dropped and none kept; {fix}."
    )


def training_text(record: dict, reasoning: str, start: str, end: str) -> str:
    """The text an SFT record trains on: the generation, with the thinking before it when it was split off and is
    kept, between `start` and `end` (as the model writes it)."""
    trace = record.get("reasoning_content")  # optional: only a split sample has it
    if reasoning == "drop" or not isinstance(trace, str):
        return record["generation"]
    return f"{start}{trace}{end}{record['generation']}"


def _dropped(rid: str, source: str, problem: str, m: Match) -> dict:
    return {
        "id": rid,
        "source": source,
        "problem": problem,
        "benchmark": m.benchmark,
        "benchmark_id": m.benchmark_id,
        "ngram": m.ngram,
    }


def _write_jsonl(path: Path, records: list[dict]) -> None:
    try:
        write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    except OSError as e:
        raise UserError(
            f"cannot write {path} ({e.strerror or e}); pass --output_file in a folder you can write."
        ) from None


def _write_report(output_file: Path, deco: Decontaminator, dropped: list[dict]) -> str:
    report = Path(f"{output_file}.decontamination.json")
    try:
        write_atomic(report, json.dumps(deco.report(dropped), indent=2, ensure_ascii=False) + "\n")
    except OSError as e:
        raise UserError(
            f"cannot write {report} ({e.strerror or e}); pass --output_file in a folder you can write."
        ) from None
    checked = ", ".join(deco.checked) or "none prepared"
    return f"decontamination ({deco.n}-grams; {checked}): {len(dropped)} problems dropped, see {report}"


def _counts_table(rows: list[Counts], columns: list[str], weights: list[float] | None = None) -> str:
    header = ["source", *columns] + (["weight"] if weights is not None else [])
    body = [
        [r.source, *(str(getattr(r, col)) for col in columns)] + ([f"{weights[i]:g}"] if weights is not None else [])
        for i, r in enumerate(rows)
    ]
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    fmt = "  ".join(f"{{:<{w}}}" if i == 0 else f"{{:>{w}}}" for i, w in enumerate(widths))
    return "\n".join(fmt.format(*row) for row in [header, *body])


# ---- RL


def prepare_rl(
    input_files: list[Path],
    output_file: Path,
    decontaminate: str | None = None,
    do_decontaminate: bool = True,
    ngram: int = DEFAULT_NGRAM,
    data_dir: str | Path | None = None,
) -> str:
    """Write the RL prompt file `{"id", "problem", "expected_answer"}` (and the decontamination report)."""
    if not input_files:
        raise UserError("no --input_file given; name at least one JSONL file of problems with expected_answer.")
    for path in input_files:
        if not Path(path).is_file():
            raise UserError(f"--input_file {path}: no such file; give JSONL files with problem and expected_answer.")
    deco = load_decontaminator(benchmark_list(decontaminate, do_decontaminate), ngram, data_dir)
    out: list[dict] = []
    dropped: list[dict] = []
    table = []
    for path in map(Path, input_files):
        c = Counts(str(path))
        for lineno, rec in _records(path):
            c.read += 1
            for key in ("problem", "expected_answer"):
                if rec.get(key) is None or (isinstance(rec[key], str) and not rec[key].strip()):
                    raise UserError(
                        f"{path}:{lineno}: record has no '{key}'; RL needs problem and expected_answer on every "
                        "line: add it or remove the line."
                    )
            if not isinstance(rec["problem"], str):
                raise UserError(f"{path}:{lineno}: 'problem' must be text, got {type(rec['problem']).__name__}.")
            rid = str(rec.get("id", f"{path.stem}-{lineno}"))
            if deco is not None and (m := deco.match(rec["problem"])):
                c.contaminated += 1
                dropped.append(_dropped(rid, c.source, rec["problem"], m))
                continue
            answer = rec["expected_answer"]
            out.append({"id": rid, "problem": rec["problem"], "expected_answer": answer})
            c.kept += 1
        table.append(c)
    if not out:
        raise _nothing_kept(output_file, table, dropped, graded=False)
    _write_jsonl(output_file, out)
    lines = [_counts_table(table, ["read", "contaminated", "kept"]), f"\nwrote {len(out)} records to {output_file}"]
    if deco is not None:
        lines.append(_write_report(output_file, deco, dropped))
    return "\n".join(lines)
