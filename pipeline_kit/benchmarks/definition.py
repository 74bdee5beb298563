"""What a benchmark module defines and how one is loaded: the constants it sets (SETTINGS), the records it makes
(`prepare(row, index)` per upstream row, or `generate()` without a SOURCE) and the checked `Benchmark` built from it.

A module is `DIR/NAME.py` or `DIR/NAME/__init__.py`. A record has `id`, `problem` and `expected_answer`, plus any
source fields. `kit prepare_data` writes the records to `<data_dir>/NAME/<SPLIT>.jsonl`; without --data_dir,
data_dir is the folder the module lives in. datasets_registry/README.md shows a module."""

from __future__ import annotations

import functools
import hashlib
import inspect
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from pipeline_kit import plugins
from pipeline_kit.benchmark_helpers import Source  # a setting's type
from pipeline_kit.data_fingerprint import SHOWN
from pipeline_kit.errors import UserError, closest
from pipeline_kit.grading.modes import METRICS_TYPES, check_mode
from pipeline_kit.overrides import override_value, take_override

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")


@dataclass(frozen=True)
class Setting:
    """One constant a benchmark module sets: its name, the Python types it may have and what it means."""

    name: str
    types: tuple[type, ...]
    meaning: str
    required: bool = True
    default: Any = None


SETTINGS = (
    Setting("GROUP", (str,), "the family of benchmarks it belongs to, e.g. 'math'"),
    Setting("METRICS_TYPE", (str,), "how its results are graded and scored: 'math', or 'mcq' (option letters)"),
    Setting("PROMPT_CONFIG", (str,), "the prompt config of its generations, e.g. 'generic/math'"),
    Setting("SPLIT", (str,), "the split it writes: <data_dir>/NAME/<SPLIT>.jsonl"),
    Setting("NUM_SAMPLES", (int,), "how many sampled seeds `kit eval` runs by default (0: one greedy output)"),
    Setting("TEMPERATURE", (float, int), "sampling temperature of the seeds"),
    Setting("TOP_P", (float, int), "nucleus sampling top_p of the seeds"),
    Setting("TOKENS_TO_GENERATE", (int,), "the generation budget of one solution, in tokens"),
    Setting("REQUIRES_SANDBOX", (bool,), "whether its generations execute code in the sandbox"),
    Setting(
        "SOURCE",
        (Source, tuple, type(None)),
        "the upstream file (Source), several as a tuple (their rows one after the other), or None when generate() "
        "makes the records",
    ),
    Setting(
        "EXTRACT",
        (str, type(None)),
        "how answers are extracted for grading: 'boxed' (the last \\boxed{}), 'auto' (also stated answers) or 'mcq' "
        "(the last stated option letter); None: its prompt config's `extract`, else its METRICS_TYPE's (math: "
        "boxed, mcq: mcq)",
        required=False,
        default=None,
    ),
    Setting(
        "LICENSE",
        (str,),
        "the licence of its data as upstream states it, e.g. 'MIT' or 'CC BY-NC 4.0 (non-commercial)'",
        required=False,
        default="not stated",
    ),
    Setting(
        "ROWS",
        (int, type(None)),
        "how many records its pinned source gives; `kit prepare_data` says when a download gives another count",
        required=False,
    ),
    Setting(
        "FINGERPRINT",
        (str, type(None)),
        "the fingerprint of the records its pinned source gives (pipeline_kit/data_fingerprint.py): results on "
        "other rows are marked as such",
        required=False,
    ),
    Setting(
        "GENERATION_OVERRIDES",
        (tuple, list),
        "++key=value overrides its generations also get (e.g. ++code_execution=true)",
        required=False,
        default=(),
    ),
)


@dataclass(frozen=True)
class Benchmark:
    """A loaded benchmark module: its settings (SETTINGS, lower-cased) and where it and its data live."""

    name: str
    module_file: Path
    home: Path  # the registry folder that defines it: the default data_dir
    description: str  # the first line of the module's docstring
    group: str
    metrics_type: str
    prompt_config: str
    split: str
    num_samples: int
    temperature: float
    top_p: float
    tokens_to_generate: int
    requires_sandbox: bool
    extract: str | None
    sources: tuple[Source, ...]  # () when generate() makes the records
    license: str
    rows: int | None  # the pinned source's record count, where known
    fingerprint: str | None  # the pinned source's records' fingerprint, where known
    generation_extra: tuple[str, ...]
    prepare: Callable[..., dict | None] | None
    generate: Callable[[], list[dict]] | None
    prepare_takes_source: bool = False  # prepare(row, index, source)

    @property
    def source(self) -> Source | None:
        """Its first upstream file (None for a generated benchmark)."""
        return self.sources[0] if self.sources else None

    def data_file(self, data_dir: str | Path | None = None) -> Path:
        """Where `kit prepare_data` writes its records: <data_dir>/NAME/<SPLIT>.jsonl, data_dir defaulting to the
        folder that defines the benchmark."""
        return Path(data_dir if data_dir is not None else self.home) / self.name / f"{self.split}.jsonl"

    def sampling(self, sampled: bool) -> dict[str, float | int]:
        """The inference settings of one output: the seeds' temperature and top_p when `sampled`, else greedy."""
        if sampled:
            return {"temperature": self.temperature, "top_p": self.top_p, "tokens_to_generate": self.tokens_to_generate}
        return {"temperature": 0.0, "tokens_to_generate": self.tokens_to_generate}

    def extract_mode(self, overrides: tuple[str, ...] = ()) -> str:
        """How its answers are extracted for grading: EXTRACT, else the `extract` of its prompt config (the last
        ++prompt_config of `overrides`, else PROMPT_CONFIG), else that of its METRICS_TYPE (boxed for math)."""
        if self.extract is not None:
            return self.extract
        from pipeline_kit.inference.prompts import load_prompt_config

        given, _ = take_override(overrides, "prompt_config")  # read as the generation script reads it
        return load_prompt_config(given or self.prompt_config).extract or METRICS_TYPES[self.metrics_type]

    def generation_overrides(self, sampled: bool) -> tuple[str, ...]:
        """The benchmark's defaults as `++key=value` overrides of a generation (prompt config, sampling, extras)."""
        keys = [f"++prompt_config={_override_value(self.prompt_config)}"]
        keys += [f"++inference.{k}={v}" for k, v in self.sampling(sampled).items()]
        return (*keys, *self.generation_extra)


def _override_value(value: str) -> str:
    if re.fullmatch(r"[\w./-]+", value):
        return value

    return override_value(value)


def load_benchmark(name: str, module_file: Path, home: Path) -> Benchmark:
    """The benchmark NAME defined by `module_file` (in registry folder `home`), checked; loaded again only when the
    file changed."""
    st = module_file.stat()
    return _load(name, module_file, home, st.st_mtime_ns, st.st_size)


@functools.cache
def _load(name: str, module_file: Path, home: Path, _mtime: int, _size: int) -> Benchmark:
    module = _import(name, module_file)
    where = str(module_file)
    values: dict[str, Any] = {}
    known = [s.name for s in SETTINGS]
    for attr in dir(module):
        if attr.isupper() and attr not in known and (best := closest(attr, known)):
            raise UserError(f"{where}: unknown setting {attr}; did you mean {best}? Settings: {', '.join(known)}.")
    for s in SETTINGS:
        if not hasattr(module, s.name):
            if s.required:
                raise UserError(f"{where}: benchmark '{name}' does not set {s.name} ({s.meaning}); add it.")
            values[s.name] = s.default
            continue
        value = getattr(module, s.name)
        if not isinstance(value, s.types) or (isinstance(value, bool) and bool not in s.types):
            kinds = " or ".join("None" if t is type(None) else t.__name__ for t in s.types)
            raise UserError(f"{where}: {s.name} = {value!r} must be {kinds} ({s.meaning}).")
        values[s.name] = value
    _check_values(where, values)
    sources = _sources(where, values["SOURCE"])
    prepare, generate = _functions(where, module, sources or None)
    doc = (module.__doc__ or "").strip().splitlines()
    return Benchmark(
        name=name,
        module_file=module_file,
        home=home,
        description=doc[0] if doc else "",
        group=values["GROUP"],
        metrics_type=values["METRICS_TYPE"],
        prompt_config=values["PROMPT_CONFIG"],
        split=values["SPLIT"],
        num_samples=values["NUM_SAMPLES"],
        temperature=float(values["TEMPERATURE"]),
        top_p=float(values["TOP_P"]),
        tokens_to_generate=values["TOKENS_TO_GENERATE"],
        requires_sandbox=values["REQUIRES_SANDBOX"],
        extract=values["EXTRACT"],
        sources=sources,
        license=values["LICENSE"],
        rows=values["ROWS"],
        fingerprint=values["FINGERPRINT"],
        generation_extra=tuple(values["GENERATION_OVERRIDES"]),
        prepare=prepare,
        generate=generate,
        prepare_takes_source=prepare is not None and _positional(prepare) >= 3,
    )


def _import(name: str, module_file: Path) -> ModuleType:
    """Import a benchmark module from its file (no sys.path change); any failure is one line naming the file."""
    tag = hashlib.sha1(str(module_file).encode()).hexdigest()[:10]
    module_name = f"_kit_benchmark_{tag}_{name.replace('-', '_')}"
    try:
        module = plugins.import_file(module_name, module_file, "benchmark module")
    except UserError:
        raise
    except SyntaxError as e:
        raise UserError(f"{module_file}:{e.lineno}: syntax error in benchmark module: {e.msg}; fix the file.") from e
    except Exception as e:
        raise UserError(
            f"{module_file}: loading benchmark module '{name}' failed: {type(e).__name__}: {e}; fix the file."
        ) from e
    return module


def _check_values(where: str, v: dict[str, Any]) -> None:
    if v["METRICS_TYPE"] not in METRICS_TYPES:
        raise UserError(
            f"{where}: METRICS_TYPE = {v['METRICS_TYPE']!r} is not a metrics type; use one of: "
            f"{', '.join(map(repr, METRICS_TYPES))}."
        )
    if not NAME_RE.match(v["SPLIT"]):
        raise UserError(f"{where}: SPLIT = {v['SPLIT']!r} must be a plain file name stem such as 'test'.")
    if v["NUM_SAMPLES"] < 0:
        raise UserError(f"{where}: NUM_SAMPLES = {v['NUM_SAMPLES']} must be 0 (greedy) or a number of seeds.")
    if not (math.isfinite(v["TEMPERATURE"]) and v["TEMPERATURE"] >= 0):
        raise UserError(f"{where}: TEMPERATURE = {v['TEMPERATURE']} must be a number >= 0.")
    if not 0 < v["TOP_P"] <= 1:
        raise UserError(f"{where}: TOP_P = {v['TOP_P']} must be in (0, 1].")
    if v["TOKENS_TO_GENERATE"] <= 0:
        raise UserError(f"{where}: TOKENS_TO_GENERATE = {v['TOKENS_TO_GENERATE']} must be a positive number.")
    if v["EXTRACT"] is not None:
        check_mode(v["EXTRACT"], f"{where}: EXTRACT")
    if v["ROWS"] is not None and v["ROWS"] <= 0:
        raise UserError(f"{where}: ROWS = {v['ROWS']} must be the positive number of records its source gives.")
    if v["FINGERPRINT"] is not None and not re.fullmatch(rf"[0-9a-f]{{{SHOWN},64}}", v["FINGERPRINT"]):
        raise UserError(
            f"{where}: FINGERPRINT = {v['FINGERPRINT']!r} must be {SHOWN} to 64 lower-case hex digits, as "
            "`kit prepare_data` prints it."
        )
    for item in v["GENERATION_OVERRIDES"]:
        if not (isinstance(item, str) and re.match(r"^\+{0,2}[\w.]+=", item)):
            raise UserError(f"{where}: GENERATION_OVERRIDES item {item!r} must be a '++key=value' string.")


def _sources(where: str, value: Source | tuple | None) -> tuple[Source, ...]:
    if value is None:
        return ()
    if isinstance(value, Source):
        return (value,)
    if not value or not all(isinstance(s, Source) for s in value):
        raise UserError(f"{where}: SOURCE = {value!r} must be a Source, a non-empty tuple of Sources, or None.")
    return value


def _positional(fn: Callable) -> int:
    """How many positional arguments `fn` takes (2 where it cannot be told)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 2
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return 2
    return sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)


def _functions(
    where: str, module: ModuleType, source: tuple[Source, ...] | None
) -> tuple[Callable | None, Callable | None]:
    """(prepare, generate): a benchmark with a SOURCE defines prepare(row, index); one without, generate()."""
    wanted, other = ("prepare", "generate") if source is not None else ("generate", "prepare")
    fn = getattr(module, wanted, None)
    if not callable(fn):
        what = (
            "prepare(row, index), which turns one upstream row into a record"
            if source is not None
            else "generate(), which returns its records (it has no SOURCE to download)"
        )
        raise UserError(f"{where}: defines no {what}; add it.")
    if callable(getattr(module, other, None)):
        why = "it has a SOURCE, so prepare(row, index)" if source else "it has no SOURCE, so generate()"
        raise UserError(f"{where}: defines {other}(), which is never called: {why} makes its records; remove one.")
    return (fn, None) if source is not None else (None, fn)
