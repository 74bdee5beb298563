"""What a benchmark module imports: `Source` (the upstream file its rows come from) and helpers for its
`prepare(row, index)`. Apart from the registry (pipeline_kit/benchmarks/), which loads the modules: loading one
imports nothing that loads it again, nor a module named as a shipped benchmark's folder (`import math` would be
datasets_registry/math where that folder is on sys.path: the two importing each other)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pipeline_kit.grading.boxes import boxed_content  # noqa: F401  (a benchmark reads its answer with boxed_content)

# json: one array of objects; csv: a header line, then one row per line; xml: every element named `rows` is a row
# (its attributes and its child elements' text); parquet needs pyarrow
FORMATS = ("jsonl", "json", "csv", "xml", "parquet")
# a GitHub raw file or a Hugging Face dataset file: its repository and the ref (commit, revision, branch) it reads
_HOSTED = re.compile(
    r"^https?://(?:raw\.githubusercontent\.com/(?P<github>[^/]+/[^/]+)|huggingface\.co/datasets/(?P<hf>[^/]+/[^/]+)/"
    r"resolve)/(?:refs/heads/)?(?P<ref>[^/]+)/"
)


@dataclass(frozen=True)
class Source:
    """Where a benchmark's rows come from: an http(s) URL of a file in one of FORMATS, as upstream publishes it
    (e.g. https://huggingface.co/datasets/<repo>/resolve/<revision>/<file> or a raw.githubusercontent.com file at a
    commit). KIT_DATASETS_BASE_URL redirects every such URL (see pipeline_kit/benchmarks/prepare.py). `rows`: the
    element that is one row of an xml file; `label`: a name for the file when a benchmark has several (SOURCE a
    tuple), handed to a prepare(row, index, source) that takes three arguments."""

    url: str
    format: str
    rows: str = ""
    label: str = ""

    def __post_init__(self):
        if not re.match(r"^(https?://[^/]+/|file:///)", self.url):
            raise ValueError(f"Source url {self.url!r} is not an http(s):// or file:// URL")
        if self.format not in FORMATS:
            raise ValueError(f"Source format {self.format!r} is not one of {', '.join(FORMATS)}")
        if (self.format == "xml") != bool(self.rows):
            raise ValueError(f"Source {self.url}: rows= names the row element of an xml file, and only of one")

    @property
    def repository(self) -> tuple[str, str] | None:
        """(repository, the ref its URL reads) of a GitHub raw file ('owner/repo') or a Hugging Face dataset file
        ('hf:owner/name'), e.g. ('QwenLM/Qwen2.5-Math', 'a45202bd...') or ('hf:MathArena/brumo_2025', 'main');
        None for another host."""
        m = _HOSTED.match(self.url)
        return (m["github"] or f"hf:{m['hf']}", m["ref"]) if m else None

    @property
    def revision(self) -> str | None:
        """The commit or dataset revision the URL pins (40 hex digits), or None where it names a branch."""
        ref = self.repository[1] if self.repository else ""
        return ref if re.fullmatch(r"[0-9a-f]{40}", ref) else None


def plain_number(value: Any) -> str:
    """A number as an answer string: 27.0 and '27.0' -> '27', '025' -> '25', 2.5 -> '2.5'."""
    text = str(value).strip()
    try:
        number = float(text)
    except ValueError as e:
        raise ValueError(f"answer {value!r} is not a number") from e
    if number.is_integer() and re.fullmatch(r"[-+]?\d+(\.0*)?", text):
        return str(int(number))
    return text


def aops_problem(url: str) -> tuple[int, str, int]:
    """(year, contest, problem number) of an AoPS wiki problem URL, e.g. .../2024_AIME_I_Problems/Problem_2 ->
    (2024, 'AIME I', 2) and .../2023_AMC_12A_Problems/Problem_10 -> (2023, 'AMC 12A', 10)."""
    m = re.search(r"/(\d{4})_([A-Za-z]+)_(\w+?)_Problems/Problem_(\d+)$", url)
    if not m:
        raise ValueError(f"url {url!r} is not an AoPS wiki problem page (.../YEAR_CONTEST_Problems/Problem_N)")
    return int(m.group(1)), f"{m.group(2)} {m.group(3)}", int(m.group(4))


def __getattr__(name: str):
    if name == "last_boxed":  # a benchmark module of before issue 36
        raise ImportError(
            "pipeline_kit.benchmark_helpers.last_boxed is now boxed_content(text, verbatim=True) (the same answer, "
            "spaces kept); import that instead."
        )
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
