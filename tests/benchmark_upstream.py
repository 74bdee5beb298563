"""The upstream files of the shipped benchmarks, rebuilt from the checked copies in tests/data/benchmarks (each the
records kit must prepare; SOURCES.md there names the files, commits and licences): one function per benchmark from
a checked record to its upstream row, and the file format each upstream uses. Not a test module."""

from __future__ import annotations

import csv
import gzip
import http.server
import io
import json
import re
import threading
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

CHECKED = Path(__file__).parent / "data" / "benchmarks"
VAR = "KIT_DATASETS_BASE_URL"


def checked_copy(name: str) -> list[dict]:
    """The records of tests/data/benchmarks/NAME/test.jsonl (or .jsonl.gz)."""
    plain = CHECKED / name / "test.jsonl"
    path = plain if plain.exists() else plain.with_suffix(".jsonl.gz")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _odyssey(r: dict) -> dict:
    # the upstream problem ends in "\end{problem}" and layout, which kit cuts (the checked copy keeps the cut text)
    item = {
        "question": r["problem"] + "\n\t\n\\end{problem}\n\\noindent",
        "answer": r["original_answer"],
        "reasoning": r["reference_solution"],
        "label": r["label"],
        "level": r["level"],
    }
    return {r["source_key"]: item}


def _svamp(r: dict) -> dict:
    # upstream splits the text into Body and Question; the Body never ends in a letter here (kit adds a "." then)
    body, question = re.match(r"^(.*[.?!,])\s+(\S[^.?!]*[.?!]?)$", r["problem"], re.S).groups()
    return {
        "ID": r["source_id"],
        "Body": body,
        "Question": question,
        "Equation": r["reference_equation"],
        "Answer": r["answer_raw"],
        "Type": r["type"],
    }


def _gaokao(r: dict) -> dict:
    row = {"question": r["problem"], "answer": r["expected_answer"]}
    row.update(
        {("id" if k == "source_id" else k): v for k, v in r.items() if k not in ("id", "problem", "expected_answer")}
    )
    return row


UPSTREAM_ROW = {
    "math500": lambda r: (
        {k: r[k] for k in ("problem", "solution", "subject", "level", "unique_id")} | {"answer": r["expected_answer"]}
    ),
    "aime24": lambda r: {
        "id": r["source_id"],
        "problem": r["problem"],
        "solution": r["solution"],
        "answer": r["answer_raw"],
        "url": r["url"],
        "year": str(r["year"]),
    },
    "aime25": lambda r: {k: r[k] for k in ("id", "problem", "expected_answer", "reference_solution")},
    "amc23": lambda r: {
        "id": r["source_id"],
        "question": r["problem"],
        "answer": float(r["answer_raw"]),
        "url": r["url"],
    },
    "gsm8k": lambda r: {"question": r["problem"], "answer": r["solution"]},
    "minerva_math": lambda r: {
        "problem": r["problem"],
        "solution": r["solution"],
        "type": r["type"],
        "idx": r["source_id"],
    },
    "olympiadbench": lambda r: {
        "id": r["source_id"],
        "subfield": r["subfield"],
        "context": r["context"],
        "question": r["problem"],
        "solution": r["solution"],
        "final_answer": r["final_answer_list"],
        "is_multiple_answer": r["is_multiple_answer"],
        "unit": r["unit"],
        "answer_type": r["answer_type"],
        "error": r["error"],
    },
    "math": lambda r: {
        "idx": r["source_idx"],
        "problem": r["problem"],
        "level": r["level_raw"],
        "type": r["subject"],
        "solution": r["solution"],
    },
    "algebra222": lambda r: {
        "question": r["problem"],
        "final_answer": r["answer_raw"],
        "section": r["section"],
        "source": r["source"],
    },
    "college_math": lambda r: {
        "data_source": r["data_source"],
        "question_number": r["question_number"],
        "question": r["problem"],
        "answer": r["expected_answer"],
        "license": r["license"],
        "data_topic": r["data_topic"],
    },
    "comp-math-24-25": dict,
    "gaokao2023en": _gaokao,
    "math-odyssey": _odyssey,
    "mawps": lambda r: {"input": r["problem"], "target": r["answer_raw"]},
    "svamp": _svamp,
}
FORMATS = {"algebra222": "csv", "svamp": "json"}  # the rest: jsonl


def jsonl(items: list[dict]) -> bytes:
    return "".join(json.dumps(item, ensure_ascii=False) + "\n" for item in items).encode()


def csv_bytes(items: list[dict]) -> bytes:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=list(items[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(items)
    return out.getvalue().encode()


def xml_bytes(root: str, container: str, tag: str, items: list[dict], attributes: tuple[str, ...]) -> bytes:
    """<root><container><tag attr=...><child>text</child>...</tag>...</container></root>."""
    parts = [f"<?xml version='1.0' encoding='UTF-8'?>\n<{root}>\n<{container}>\n"]
    for item in items:
        attrs = "".join(f" {k}={quoteattr(str(item[k]))}" for k in attributes)
        children = "".join(f"<{k}>{escape(str(v))}</{k}>" for k, v in item.items() if k not in attributes)
        parts.append(f"<{tag}{attrs}>{children}</{tag}>\n")
    parts.append(f"</{container}>\n</{root}>\n")
    return "".join(parts).encode()


def upstream_files(name: str, records: list[dict]) -> dict[str, bytes]:
    """Source label ('' for a benchmark of one file) -> the bytes of that upstream file."""
    rows = [UPSTREAM_ROW[name](r) for r in records]
    if name == "mawps":
        return {
            label: jsonl([row for row, r in zip(rows, records, strict=True) if r["type"] == label])
            for label in ("addsub", "singleeq", "singleop", "multiarith")
        }
    fmt = FORMATS.get(name, "jsonl")
    body = csv_bytes(rows) if fmt == "csv" else json.dumps(rows).encode() if fmt == "json" else jsonl(rows)
    return {"": body}


# ---- the test mirror: a local HTTP server that plays every upstream host


def parquet(items: list[dict]) -> bytes:
    from conftest import need_module

    pa = need_module("pyarrow", "hmmt_feb25's upstream is parquet: pip install 'pipeline-kit[data]'")
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(items), buf)
    return buf.getvalue()


def upstream_path(name: str) -> str:
    """The path under the mirror where kit looks for NAME's upstream file: /HOST/PATH of its URL."""
    from pipeline_kit.benchmarks import get_benchmark

    return "/" + get_benchmark(name).source.url.split("://", 1)[1]


class Mirror:
    """A stdlib HTTP server in a thread, serving `files` (path -> bytes); anything else is a 404."""

    def __init__(self):
        self.files: dict[str, bytes] = {}
        files = self.files

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = files.get(self.path)
                if body is None:
                    self.send_error(404, "Not Found")
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.env = {VAR: self.url}
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def serve(self, name: str, body: bytes) -> None:
        """Serve `body` as NAME's (first) upstream file."""
        self.files[upstream_path(name)] = body

    def serve_all(self, name: str, files: dict[str, bytes]) -> None:
        """Serve each of NAME's upstream files: source label -> bytes (as upstream_files gives them)."""
        from pipeline_kit.benchmarks import get_benchmark

        for source in get_benchmark(name).sources:
            self.files["/" + source.url.split("://", 1)[1]] = files[source.label]
