"""Preparing a benchmark's data (`kit prepare_data`): download its upstream file, turn the rows into records (`id`,
`problem`, `expected_answer` and the source fields) and write them atomically to `<data_dir>/NAME/<split>.jsonl`.

KIT_DATASETS_BASE_URL redirects every upstream URL to a mirror: https://HOST/PATH is fetched from
$KIT_DATASETS_BASE_URL/HOST/PATH (http(s):// or file://), e.g. a folder laid out as raw.githubusercontent.com/...
and huggingface.co/... for a machine without internet access."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path
from xml.etree import ElementTree

from pipeline_kit import __version__
from pipeline_kit.atomic import write_atomic
from pipeline_kit.benchmark_helpers import Source
from pipeline_kit.benchmarks.definition import Benchmark
from pipeline_kit.benchmarks.prepared import pin_note, write_meta
from pipeline_kit.data_fingerprint import Fingerprint
from pipeline_kit.errors import UserError

BASE_URL_VAR = "KIT_DATASETS_BASE_URL"
TIMEOUT_S = 60.0


def prepare_one(bench: Benchmark, data_dir: str | None, label: str) -> Path:
    """Download, convert, check and write one benchmark, then record its row count and fingerprint beside it (and
    say on stderr when they are not what the benchmark pins); returns the file written."""
    if not bench.sources:
        records = _generated(bench)
        print(f"{label}: {len(records)} records made here (no download)", file=sys.stderr)
    else:
        records = []
        for i, source in enumerate(bench.sources):
            url, note = download_url(source.url)
            part = (
                label if len(bench.sources) == 1 else f"{label} {source.label or i + 1} ({i + 1}/{len(bench.sources)})"
            )
            data = fetch(url, note, part)
            records += _converted(bench, parse(data, source, url, bench.name), url, source)
    _check_records(bench, records)
    path = bench.data_file(data_dir)
    try:
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    except (TypeError, ValueError) as e:
        raise UserError(f"{bench.module_file}: a record of '{bench.name}' is not JSON: {e}; fix prepare().") from e
    got = Fingerprint.of_records(records)
    note = pin_note(bench, got)
    try:
        write_atomic(path, text)
        write_meta(bench, path, got, note)
    except OSError as e:
        raise UserError(f"cannot write {path} ({e.strerror or e}); pass --data_dir DIR, a folder you can write.") from e
    if note is None:
        print(f"{label}: {got}" + (" (as kit pins it)" if bench.fingerprint else ""), file=sys.stderr)
    else:
        print(
            f"{label}: warning: {note}: the upstream file changed or the mirror serves another one; results on "
            "these rows will not compare with published ones.",
            file=sys.stderr,
        )
    return path


# ---- download


def download_url(url: str) -> tuple[str, str]:
    """(the URL to fetch, a note for errors): $KIT_DATASETS_BASE_URL/HOST/PATH when the variable is set."""
    base = os.environ.get(BASE_URL_VAR, "").strip()
    if not base or not url.startswith(("http://", "https://")):
        return url, (
            f"check the network, or set {BASE_URL_VAR} to a mirror (http(s):// or file://) that serves "
            f"{url.split('://', 1)[1]}"
        )
    mirrored = f"{base.rstrip('/')}/{url.split('://', 1)[1]}"
    return mirrored, (
        f"that is the upstream URL under {BASE_URL_VAR}={base}: check that the mirror serves it, or unset "
        f"{BASE_URL_VAR} to download from upstream"
    )


def fetch(url: str, note: str, label: str) -> bytes:
    """The file at `url` (http(s):// or file://), with a progress bar on stderr; failures are one line."""

    request = urllib.request.Request(url, headers={"User-Agent": f"pipeline-kit/{__version__}"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
            total = int(response.headers.get("Content-Length") or 0) or None
            bar = Bar(label, total)
            chunks = []
            while chunk := response.read(1 << 16):
                chunks.append(chunk)
                bar.advance(len(chunk))
            bar.finish()
            return b"".join(chunks)
    except urllib.error.HTTPError as e:
        raise UserError(f"downloading {url} failed: HTTP {e.code} {e.reason}; {note}.") from e
    except urllib.error.URLError as e:
        reason = getattr(e.reason, "strerror", None) or e.reason
        raise UserError(f"cannot download {url}: {reason}; {note}.") from e
    except TimeoutError as e:
        raise UserError(f"downloading {url} timed out after {TIMEOUT_S:.0f} s; {note}.") from e
    except (OSError, ValueError) as e:
        raise UserError(f"cannot download {url}: {e}; {note}.") from e


class Bar:
    """A download's progress on stderr: a bar redrawn in place on a terminal, one line when done otherwise."""

    WIDTH = 30

    def __init__(self, label: str, total: int | None, stream=sys.stderr):
        self.label, self.total, self.stream, self.done = label, total, stream, 0
        self.tty = stream.isatty()

    def advance(self, n: int) -> None:
        self.done += n
        if self.tty:
            self.stream.write(f"\r{self._text()}")
            self.stream.flush()

    def finish(self) -> None:
        self.stream.write(f"\r{self._text()}\n" if self.tty else f"{self.label}: downloaded {_size(self.done)}\n")
        self.stream.flush()

    def _text(self) -> str:
        if not self.total:
            return f"{self.label} {_size(self.done)}"
        filled = min(self.WIDTH, self.WIDTH * self.done // self.total)
        percent = min(100, 100 * self.done // self.total)
        return f"{self.label} [{'#' * filled}{'.' * (self.WIDTH - filled)}] {percent:3d}% {_size(self.done)}"


def _size(n: int) -> str:
    return f"{n / 1e6:.1f} MB" if n >= 1e6 else f"{n / 1e3:.1f} kB"


# ---- parsing and records


def parse(data: bytes, source: Source, url: str, name: str) -> list[dict]:
    """The rows of an upstream file in its format (jsonl, json, csv, xml, parquet); a malformed file is one line."""

    fmt = source.format
    bad = f"the upstream file of '{name}' ({url}) is not valid {fmt.upper()}"
    hint = "it may be truncated, an error page or not this benchmark's file; check the URL"
    if fmt == "parquet":
        return _parquet(data, url, name, bad, hint)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserError(f"{bad}: not UTF-8 text ({e.reason} at byte {e.start}); {hint}.") from e
    if fmt == "csv":
        return _csv(text, bad, hint)
    if fmt == "xml":
        return _xml(text, source.rows, bad, hint)
    if fmt == "json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as e:
            raise UserError(f"{bad}: {e.msg} at line {e.lineno} column {e.colno}; {hint}.") from e
        if not isinstance(rows, list):
            raise UserError(f"{bad}: the top level is a {type(rows).__name__}, not a list of rows; {hint}.")
        where = "item"
        numbered = list(enumerate(rows, 1))
    else:
        numbered = []
        for line_no, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                numbered.append((line_no, json.loads(line)))
            except json.JSONDecodeError as e:
                raise UserError(f"{bad}: line {line_no}: {e.msg} (column {e.colno}); {hint}.") from e
        where = "line"
    for n, row in numbered:
        if not isinstance(row, dict):
            raise UserError(f"{bad}: {where} {n} is a {type(row).__name__}, not an object of fields; {hint}.")
    return [row for _, row in numbered]


def _csv(text: str, bad: str, hint: str) -> list[dict]:
    """Rows of a CSV file with a header line: column -> text, every row as wide as the header."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = next(reader, None)
        if not header or len(set(header)) != len(header):
            raise UserError(f"{bad}: its first line must name each column once, got {header!r}; {hint}.")
        rows = []
        for row in reader:
            if not row:
                continue
            if len(row) != len(header):
                raise UserError(
                    f"{bad}: line {reader.line_num} has {len(row)} fields, the header {len(header)}; {hint}."
                )
            rows.append(dict(zip(header, row, strict=True)))
    except csv.Error as e:
        raise UserError(f"{bad}: line {reader.line_num}: {e}; {hint}.") from e
    return rows


def _xml(text: str, tag: str, bad: str, hint: str) -> list[dict]:
    """Every <tag> element of an XML file as a row: its attributes, then each child element's text by its tag."""
    try:
        root = ElementTree.fromstring(text)
    except ElementTree.ParseError as e:
        raise UserError(f"{bad}: {e}; {hint}.") from e
    rows = []
    for element in root.iter(tag):
        row = dict(element.attrib)
        row.update({child.tag: (child.text or "") for child in element})
        rows.append(row)
    if not rows:
        raise UserError(f"{bad}: it has no <{tag}> element, the rows of this benchmark; {hint}.")
    return rows


def _parquet(data: bytes, url: str, name: str, bad: str, hint: str) -> list[dict]:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as e:
        raise UserError(
            f"'{name}' comes as a parquet file ({url}), which needs pyarrow; "
            "pip install 'pipeline-kit[data]' (or pyarrow) and run kit prepare_data again."
        ) from e

    try:
        # read here, on this thread, and start no Arrow thread: pq.read_table (its dataset scan) reads and pre-buffers
        # on Arrow's IO threads even with use_threads=False, and such a thread may drop the last reference to a buffer
        # that holds a Python object; at interpreter exit it then cannot take the GIL and aborts the process
        # ("terminate called without an active exception", exit -6; pyarrow 26, apache/arrow#34314)
        return pq.ParquetFile(pa.BufferReader(data), pre_buffer=False).read(use_threads=False).to_pylist()
    except Exception as e:  # pyarrow raises ArrowInvalid, OSError, ... on a damaged file
        raise UserError(f"{bad}: {' '.join(str(e).split())}; {hint}.") from e


def _converted(bench: Benchmark, rows: list[dict], url: str, source: Source) -> list[dict]:
    """prepare(row, index[, source]) of every row (index: its place in its file); an exception names the row, the
    field and the module."""
    records = []
    for index, row in enumerate(rows):
        try:
            record = bench.prepare(row, index, source) if bench.prepare_takes_source else bench.prepare(row, index)
        except KeyError as e:
            raise UserError(
                f"row {index + 1} of '{bench.name}' upstream ({url}) has no field {e}; it has: "
                f"{', '.join(map(str, row)) or 'none'}. The file does not fit {bench.module_file}'s prepare(): "
                "check the URL, or update the module."
            ) from e
        except Exception as e:
            raise UserError(
                f"row {index + 1} of '{bench.name}' upstream ({url}): {type(e).__name__}: {e}; the file does not "
                f"fit {bench.module_file}'s prepare(): check the URL, or update the module."
            ) from e
        if record is not None:
            records.append(record)
    return records


def _generated(bench: Benchmark) -> list[dict]:
    try:
        records = bench.generate()
    except Exception as e:
        raise UserError(f"{bench.module_file}: generate() failed: {type(e).__name__}: {e}; fix the module.") from e
    if not isinstance(records, list):
        raise UserError(f"{bench.module_file}: generate() returned a {type(records).__name__}, not a list of records.")
    return records


def _check_records(bench: Benchmark, records: list) -> None:
    """Every record is an object with a unique `id`, a non-empty `problem` and a string `expected_answer`."""
    where = f"{bench.module_file}: '{bench.name}'"
    if not records:
        raise UserError(f"{where} made no records; check its upstream file and prepare()/generate().")
    seen: set = set()
    for n, record in enumerate(records, 1):
        if not isinstance(record, dict):
            raise UserError(f"{where}: record {n} is a {type(record).__name__}, not a dict of fields.")
        for key, ok, want in (
            ("id", lambda v: isinstance(v, (str, int)) and not isinstance(v, bool), "a string or an integer"),
            ("problem", lambda v: isinstance(v, str) and v.strip(), "a non-empty string"),
            ("expected_answer", lambda v: isinstance(v, str) and v.strip(), "a non-empty string"),
        ):
            if key not in record:
                raise UserError(
                    f"{where}: record {n} has no '{key}' (it has: {', '.join(record)}); every record needs it."
                )
            if not ok(record[key]):
                raise UserError(f"{where}: record {n} has {key} = {record[key]!r}; it must be {want}.")
        if record["id"] in seen:
            raise UserError(f"{where}: records share the id {record['id']!r}; ids must be unique.")
        seen.add(record["id"])
