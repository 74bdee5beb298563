"""`kit report`: the HTML page opened in a real browser (Debian's headless chromium, driven by playwright): its tables
hold metrics.json's numbers, its filters and search show exactly the expected problems of the hand-made folder of
test_summarize.py, a comparison lists exactly the flips planted in a copy, and a 64 seeds x 500 problems folder of
8k-token samples is usable within 2 s. Also the screenshot of docs/evaluation/report.md (KIT_UPDATE_GOLDEN=1 redraws
it)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO_ROOT, need_module, skip_or_fail
from report_data import write_results

DATA = Path(__file__).parent / "data" / "summarize_results"
KIT = Path(sys.executable).parent / "kit"
CHROMIUM = Path("/usr/bin/chromium")  # Debian's package (tests/services/install_deps.sh)
SCREENSHOT = REPO_ROOT / "docs" / "evaluation" / "report.png"


def kit(*args: str, cwd: Path, timeout: int = 120) -> subprocess.CompletedProcess:
    env = {**os.environ, "KIT_HOME": str(cwd / ".kit")}
    return subprocess.run([str(KIT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def report_of(*args: str, cwd: Path, timeout: int = 120) -> Path:
    out = kit("report", *args, cwd=cwd, timeout=timeout)
    assert out.returncode == 0, out.stderr
    path = Path(out.stdout.strip())
    assert path.is_file(), out.stdout
    return path


@pytest.fixture(scope="module")
def browser():
    sync_api = need_module("playwright.sync_api", "the browser tests of kit report (pip install -e '.[test]')")
    if not CHROMIUM.exists():
        skip_or_fail(f"{CHROMIUM} is missing: apt-get install chromium (tests/services/install_deps.sh)")
    with sync_api.sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])  # root: no sandbox
        yield chromium
        chromium.close()


def open_report(browser, path: Path, width: int = 1280, height: int = 900, fragment: str = ""):
    page = browser.new_page(viewport={"width": width, "height": height})
    page.errors, page.requests = [], []
    page.on("pageerror", lambda e: page.errors.append(str(e)))
    page.on("request", lambda request: page.requests.append(request.url))
    page.goto(path.as_uri() + fragment, wait_until="commit")  # not "load": that waits for the whole file
    page.wait_for_selector("html[data-ready]", timeout=20_000)
    return page


def shown(page) -> list[str]:
    """The ids of the problems the browser's filters and search let through (all pages)."""
    return json.loads(page.get_attribute("#list", "data-shown"))


def set_filter(page, name: str, on: bool) -> None:
    before = page.get_attribute("#list", "data-shown")
    page.set_checked(f'[data-filter="{name}"]', on)
    page.wait_for_function(f"document.getElementById('list').dataset.shown !== {json.dumps(before)}", timeout=5000)


def copy_results(tmp_path: Path, name: str = "results") -> Path:
    dst = tmp_path / name
    shutil.copytree(DATA, dst)
    return dst


def table_cells(page) -> list:
    """[benchmark, side, [[mode, {column: text}]]] of every table on the page."""
    return page.evaluate(
        """[...document.querySelectorAll('table.metrics')].map(t => [t.dataset.bench,
             t.closest('[data-side]').dataset.side,
             [...t.querySelectorAll('tbody tr')].map(r => [r.dataset.mode,
               Object.fromEntries([...r.querySelectorAll('td[data-col]')].map(c => [c.dataset.col, c.textContent]))])])"""
    )


def check_table(rows: list, metrics: dict) -> None:
    """Each cell holds metrics.json's value as kit summarize prints it (2 decimals, the std after ±)."""
    for mode, values in rows:
        want = metrics[mode]
        for col, text in values.items():
            value, _, std = text.rstrip("%").partition("% ± ")
            if want[col] is None:
                assert value == "-", (mode, col)
                continue
            places = 0 if col == "avg_tokens" else None if col == "num_entries" else 2
            assert float(value) == pytest.approx(want[col], abs=0.5 if places == 0 else 0.0051), (mode, col, text)
            if std:
                assert float(std) == pytest.approx(want[f"{col}_std"], abs=0.0051), (mode, col, text)


@pytest.mark.parametrize(
    "args, says",
    [
        (["nowhere"], "nowhere is not a folder"),
        (["results", "nowhere"], "nowhere is not a folder"),  # refused before the first folder is read
        (["results", "-o", "results"], "is a folder; give the report's file name"),
        (["results", "-o", "/proc/report.html"], "cannot write /proc/report.html"),
    ],
)
def test_report_errors_are_one_line_and_exit_2(tmp_path: Path, args: list[str], says: str):
    copy_results(tmp_path)
    out = kit("report", *args, cwd=tmp_path)
    assert out.returncode == 2 and len(out.stderr.splitlines()) == 1, out.stderr
    assert says in out.stderr


def test_tables_hold_the_numbers_of_metrics_json(tmp_path: Path, browser):
    results = copy_results(tmp_path)
    summary = kit("summarize", str(results), cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr
    metrics = json.loads((results / "metrics.json").read_text())
    path = report_of(str(results), cwd=tmp_path)
    assert path == results / "report.html"
    page = open_report(browser, path)
    tables = table_cells(page)
    assert [bench for bench, _, _ in tables] == ["algebra", "geometry"]
    modes = {bench: [mode for mode, _ in rows] for bench, _, rows in tables}
    assert modes == {
        "algebra": ["greedy", "pass@1[avg-of-4]", "majority@4", "majority[equivalent]@4", "pass@4"],
        "geometry": ["pass@1[avg-of-3]", "majority@3", "majority[equivalent]@3", "pass@3"],
    }  # the rows kit summarize prints
    for bench, _, rows in tables:
        check_table(rows, metrics[bench])
    # the notes under the tables, as kit summarize prints them, and a chart of pass@k and majority@k per benchmark
    assert f"data: 5 rows, fingerprint {metrics['algebra']['data']['fingerprint'][:12]}" in page.inner_text("#summary")
    assert page.locator(".chart polyline[data-series=pass]").count() == 2
    assert page.errors == []
    # one file: the browser asked for nothing but the report itself (no CDN, no font, no second file)
    page.click('.problem[data-id="p1"] .head')
    page.wait_for_selector('.problem[data-id="p1"] details.generation pre')
    assert page.requests == [path.as_uri()]


def test_filters_and_search_show_exactly_the_expected_problems(tmp_path: Path, browser):
    path = report_of(str(copy_results(tmp_path)), cwd=tmp_path)
    page = open_report(browser, path)
    assert shown(page) == ["p1", "p2", "p3", "p4", "p5"]  # algebra first, every problem
    set_filter(page, "timeout", True)
    assert shown(page) == ["p4"]
    set_filter(page, "timeout", False)
    set_filter(page, "noanswer", True)
    assert shown(page) == ["p3", "p4"]  # p3: three seeds and greedy without an answer; p4: rs3
    set_filter(page, "noanswer", False)
    page.fill("#query", "frac")  # p5's expected answer
    page.wait_for_function("document.getElementById('status').textContent.startsWith('1 of 5')")
    assert shown(page) == ["p5"]
    page.fill("#query", "boxed{3}")  # only in rs2's text for p1
    page.wait_for_function("document.getElementById('status').textContent.startsWith('0 of 5')")
    page.check("#in-texts")
    page.wait_for_function("document.getElementById('search-progress').textContent.includes('5 of 5')")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('1 of 5')")
    assert shown(page) == ["p1"]
    page.uncheck("#in-texts")
    page.fill("#query", "")
    page.select_option("#bench", label="geometry")
    page.wait_for_function("document.getElementById('status').textContent.includes('of 6 problems')")
    set_filter(page, "wrong", True)
    assert shown(page) == ["g2", "g6"]  # no seed right (g6: no answer at all)
    set_filter(page, "noanswer", True)
    assert shown(page) == ["g6"]  # filters combine
    set_filter(page, "noanswer", False)
    set_filter(page, "wrong", False)
    set_filter(page, "judge", True)
    assert shown(page) == ["g2", "g3"]  # g2: judge right, grader wrong (rs1, rs2); g3: the other way (rs1)
    set_filter(page, "judge", False)
    # a problem opened: every run's answer, verdict and text (decoded from its block)
    page.click('.problem[data-id="g1"] .head')
    page.wait_for_selector('.problem[data-id="g1"] details.generation pre')
    runs = page.locator('.problem[data-id="g1"] tr[data-run]')
    assert runs.evaluate_all("rows => rows.map(r => r.dataset.run)") == ["rs1", "rs2", "rs10"]
    assert "\\boxed{A}" in page.inner_text('.problem[data-id="g1"] details.generation pre >> nth=0')
    assert page.errors == []


def test_sorting_answer_votes_and_links_to_a_problem(tmp_path: Path, browser):
    path = report_of(str(copy_results(tmp_path)), cwd=tmp_path)
    page = open_report(browser, path)
    before = page.get_attribute("#list", "data-shown")
    page.select_option("#sort", "hardest")
    page.wait_for_function(f"document.getElementById('list').dataset.shown !== {json.dumps(before)}")
    # share of runs right (greedy and 4 seeds): p3 1/5, p4 1/5 (a tie keeps file order), p5 2/5, p2 3/5, p1 4/5
    assert shown(page) == ["p3", "p4", "p5", "p2", "p1"]
    page.click('.problem[data-id="p5"] .head')
    votes = page.locator('.problem[data-id="p5"] .vote').all_inner_texts()
    assert votes == ["1/3 ×3", "1/2 ×1", "0.5 ×1"]  # greedy, rs2, rs3; rs0; rs1 (kit's grader would join the last two)
    # opening a problem puts a link to it in the address; the link opens it again
    link = page.evaluate("location.hash")
    assert link == "#problem=0:0:4"
    again = open_report(browser, Path(path), fragment=link)
    again.wait_for_selector('.problem[data-id="p5"] details.generation pre')
    assert again.errors == page.errors == []


def plant_flips(folder: Path, benchmark: str = "eval-results/algebra") -> None:
    """In algebra, every seed gets p1 wrong (it was right by majority) and answers p4 right with 10 (wrong before)."""
    for path in sorted((folder / benchmark).glob("output-rs*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for rec in records:
            if rec["id"] == "p1":
                rec["symbolic_correct"] = False
            elif rec["id"] == "p4":
                rec.update(predicted_answer="10", symbolic_correct=True)
                rec.pop("grading_timed_out", None)
        path.write_text("".join(json.dumps(rec) + "\n" for rec in records))


def test_the_comparison_lists_exactly_the_planted_flips(tmp_path: Path, browser):
    a, b = copy_results(tmp_path, "yesterday"), copy_results(tmp_path, "today")
    plant_flips(b)
    assert kit("summarize", str(b), cwd=tmp_path).returncode == 0
    path = report_of(str(a), str(b), cwd=tmp_path)
    assert path == a / "report-vs-today.html"
    page = open_report(browser, path)

    def flips(bench: str, way: str) -> list[str]:
        return page.locator(f'.flips[data-bench="{bench}"][data-way="{way}"] .flip').evaluate_all(
            "rows => rows.map(r => r.dataset.id)"
        )

    assert flips("algebra", "fixed") == ["p4"]
    assert flips("algebra", "broken") == ["p1"]
    assert flips("geometry", "fixed") == flips("geometry", "broken") == []
    # both folders' tables side by side; B's hold B's metrics.json
    tables = table_cells(page)
    assert [(bench, side) for bench, side, _ in tables] == [("algebra", "0"), ("algebra", "1"), ("geometry", "0"),
                                                           ("geometry", "1")]  # fmt: skip
    metrics_b = json.loads((b / "metrics.json").read_text())
    for bench, side, rows in tables:
        if side == "1":
            check_table(rows, metrics_b[bench])
    assert page.locator(".data-warning").count() == 0  # the same rows on both sides: nothing to warn of
    # a flip opens its problem in the browser
    page.click('.flips[data-way="broken"] .flip[data-id="p1"] button')
    page.wait_for_selector('.problem[data-id="p1"] details.generation pre')
    assert page.errors == []


def test_a_64_seeds_by_500_problems_report_is_usable_within_2_s(tmp_path: Path, browser):
    """The figures go to docs/evaluation/report.md and perf/README.md (printed here: pytest -s shows them)."""
    results = write_results(tmp_path / "big", seeds=64, problems=500, tokens=8192)
    inputs = sum(p.stat().st_size for p in results.rglob("*.jsonl"))
    start = time.monotonic()
    path = report_of(str(results), cwd=tmp_path, timeout=900)
    built = time.monotonic() - start
    try:
        page = open_report(browser, path)
        ready = page.evaluate("window.kitReportReady")  # ms from the start of the navigation
        start = time.monotonic()
        set_filter(page, "wrong", True)
        filtered = time.monotonic() - start
        assert 0 < len(shown(page)) < 500
        first = shown(page)[0]
        start = time.monotonic()
        page.click(f'.problem[data-id="{first}"] .head')
        page.wait_for_selector(f'.problem[data-id="{first}"] details.text', timeout=30_000)
        opened = time.monotonic() - start
        assert page.locator(f'.problem[data-id="{first}"] tr[data-run]').count() == 64
        figures = {
            "outputs_mb": round(inputs / 1e6),
            "report_mb": round(path.stat().st_size / 1e6),
            "kit_report_s": round(built, 1),
            "usable_ms": round(ready),
            "filter_s": round(filtered, 2),
            "open_problem_s": round(opened, 2),
        }
        print(f"kit report, 64 x 500 x 8k tokens: {json.dumps(figures)}")
        assert ready < 2000, figures
        assert page.errors == []
    finally:
        shutil.rmtree(results)  # a GB of outputs and the report: not left in pytest's kept folders


def test_the_docs_screenshot(tmp_path: Path, browser):
    """docs/evaluation/report.png: a small synthetic folder's report with a problem open, drawn by this test when
    KIT_UPDATE_GOLDEN=1 (like the golden files), else only drawn and checked to exist."""
    results = write_results(tmp_path / "run", seeds=16, problems=60, tokens=400, benchmark="aime-synthetic")
    page = open_report(browser, report_of(str(results), cwd=tmp_path), width=1280, height=1400)
    set_filter(page, "disagree", True)
    first = shown(page)[0]
    page.click(f'.problem[data-id="{first}"] .head')
    page.wait_for_selector(f'.problem[data-id="{first}"] details.generation pre')
    png = page.screenshot()
    assert png.startswith(b"\x89PNG")
    if os.environ.get("KIT_UPDATE_GOLDEN") == "1":
        SCREENSHOT.write_bytes(png)
    assert SCREENSHOT.is_file(), f"{SCREENSHOT} is missing; run this test with KIT_UPDATE_GOLDEN=1 to draw it"


def test_a_problems_verdict_is_its_majority_answers():
    from pipeline_kit.evaluation.report import problem_verdict

    def sample(answer, right):
        return [answer, right, None, None, 0]

    greedy = sample("5", True)
    # seeds: "4" (wrong) twice, "5" (right) twice: a tie goes to the answer seen first; the greedy run is not counted
    seeds = [sample("4", False), sample("5", True), sample("4", False), sample("5", True)]
    assert problem_verdict([greedy, *seeds], 1) == (False, 2, 4)
    assert problem_verdict([greedy, sample(None, False), sample("5", True)], 1) == (True, 1, 2)  # no answer: no vote
    assert problem_verdict([greedy, sample(None, False)], 1) == (False, 0, 1)  # no answer at all: wrong
    assert problem_verdict([greedy], 1) == (True, 1, 1)  # no seeds: the greedy run's verdict


def test_two_folders_of_one_benchmark_each_are_compared_whatever_their_names(tmp_path: Path):
    """RESULTS_DIR/output*.jsonl names its benchmark after the folder: yesterday's and today's are still compared."""
    algebra = DATA / "eval-results" / "algebra"
    for name in ("yesterday", "today"):
        (tmp_path / name).mkdir()
        for path in algebra.glob("output-rs*.jsonl"):
            shutil.copy(path, tmp_path / name / path.name)
    plant_flips(tmp_path / "today", benchmark="")
    html = report_of(str(tmp_path / "yesterday"), str(tmp_path / "today"), cwd=tmp_path).read_text()
    meta = json.loads(html.split('<script type="application/json" id="kit-meta">', 1)[1].split("</script>", 1)[0])
    assert meta["pairs"] == {"yesterday": "today"}
    flips = meta["compare"]["yesterday"]
    assert [f["id"] for f in flips["fixed"]] == ["p4"] and [f["id"] for f in flips["broken"]] == ["p1"]


def test_two_runs_on_different_rows_are_compared_with_a_warning_naming_both(tmp_path: Path):
    """Issue 33: results of one benchmark with different fingerprints, compared, get one line naming both (on stderr
    and in the page's comparison)."""
    a, b = tmp_path / "yesterday", tmp_path / "today"
    for name in ("yesterday", "today"):
        (tmp_path / name).mkdir()
        for path in (DATA / "eval-results" / "algebra").glob("output-rs*.jsonl"):
            shutil.copy(path, tmp_path / name / path.name)
    for path in b.glob("output-rs*.jsonl"):  # today's data has another expected answer for p2
        records = [json.loads(line) for line in path.read_text().splitlines()]
        for r in records:
            if r["id"] == "p2":
                r["expected_answer"] = "6"
        path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = kit("report", str(a), str(b), cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    from pipeline_kit.data_fingerprint import Fingerprint

    fa, fb = (Fingerprint.of_file(folder / "output-rs0.jsonl") for folder in (a, b))
    line = (
        f"kit report: warning: yesterday ran on other rows in A (5 rows, fingerprint {fa.short}) than in B "
        f"(5 rows, fingerprint {fb.short}): their numbers do not compare"
    )
    assert out.stderr.strip().splitlines() == [line]
    html = Path(out.stdout.strip()).read_text()
    meta = json.loads(html.split('<script type="application/json" id="kit-meta">', 1)[1].split("</script>", 1)[0])
    assert meta["compare"]["yesterday"]["data_warning"] == line.removeprefix("kit report: ")
