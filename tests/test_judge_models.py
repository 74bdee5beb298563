"""The LLM judge and GenSelect against a real model: tiny-judge (tests/models/train_tiny_judge.py, built by
tests/services/models_up.sh), the tiny model taught the judge's answer ("... Judgement: Yes|No") and GenSelect's
("... Judgment: <index>"), served by CPU vLLM. `kit eval` generates with the tiny model (conftest's session-wide
`shared_vllm`) and judges with tiny-judge (one server of this module's own, which GenSelect then also uses); every
verdict and pick is checked against what the model's own text says, and text without one is counted as unparsed
or as a fallback, never silently as a "no" or a pick."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import SERVICES, need, rows, vllm_in_foreground

from pipeline_kit.evaluation.judge import parse_verdict
from pipeline_kit.selection.genselect import parse_judgment

pytestmark = pytest.mark.models

# what tiny-judge was taught to end with, read here independently of kit's parsers (the last one counts)
VERDICT = re.compile(r"Judgement: (Yes|No)\b")
JUDGMENT = re.compile(r"Judgment: (\d+)")


def said(pattern: re.Pattern, text: str) -> str | None:
    found = pattern.findall(text)
    return found[-1] if found else None


@pytest.fixture(scope="module")
def judge_server(tmp_path_factory):
    """(cluster flags of executor none, the running ForegroundServer) of tiny-judge."""
    need("KIT_TEST_VLLM_PYTHON", "the vLLM venv (tests/services/models_up.sh)")
    need("KIT_TEST_TINY_JUDGE", "the tiny judge model (tests/services/models_up.sh)")
    cluster, _, server = vllm_in_foreground(tmp_path_factory.mktemp("judge-vllm"), "TINY_JUDGE")
    yield cluster, server
    assert server.interrupt() == 130


def expected_tally(bench: Path) -> dict:
    """metrics.json's "judge" entry worked out here from the results and the judge's own texts."""
    tally = dict.fromkeys(("samples", "disagree", "judge_yes_grader_no", "judge_no_grader_yes", "unparsed"), 0)
    for seed in (0, 1):
        texts = {r["id"]: r["generation"] for r in rows(bench / f"judge-rs{seed}" / "output.jsonl")}
        for record in rows(bench / f"output-rs{seed}.jsonl"):
            tally["samples"] += 1
            verdict = said(VERDICT, texts[record["id"]])
            if verdict is None:
                tally["unparsed"] += 1
            elif (verdict == "Yes") != record["symbolic_correct"]:
                tally["disagree"] += 1
                tally["judge_yes_grader_no" if verdict == "Yes" else "judge_no_grader_yes"] += 1
    return tally


def disagreement_line(t: dict) -> str:
    return (
        f"judge and grader disagree on {t['disagree']} of {t['samples']} samples (judge yes/grader no: "
        f"{t['judge_yes_grader_no']}, judge no/grader yes: {t['judge_no_grader_yes']})"
    )


def wrong_run(src: Path, dst: Path) -> None:
    """A third 'seed' made by hand from `src`: every answer one more than the model's (ungraded: kit grades it)."""
    with dst.open("w") as f:
        for r in rows(src):
            wrong = re.sub(r"\\boxed\{(\d+)\}", lambda m: f"\\boxed{{{int(m[1]) + 1}}}", r["generation"])
            kept = {k: r[k] for k in ("id", "problem", "expected_answer")}
            f.write(json.dumps({**kept, "generation": wrong}) + "\n")


def check_picks(folder: Path) -> dict[str, int]:
    """Every pick against the judgment texts it came from; returns the picks per decided_by."""
    decided: dict[str, int] = {}
    for record in rows(folder / "genselect" / "output.jsonl"):
        gs = record["genselect"]
        decided[gs["decided_by"]] = decided.get(gs["decided_by"], 0) + 1
        for w in gs["windows"]:
            if w["judgment"] is None:  # a bye
                continue
            index = said(JUDGMENT, w["judgment"])
            named = int(index) if index is not None and int(index) < len(w["runs"]) else None
            assert w["picked"] == named == parse_judgment(w["judgment"], len(w["runs"])), w
            assert (w["fallback"] == "majority") == (named is None), w
            if named is not None:
                assert w["winner"] == w["runs"][named], w
        assert gs["decided_by"] == ("fallback" if any(w["fallback"] for w in gs["windows"]) else "judgment"), gs
        chosen = {r["id"]: r for r in rows(folder / gs["chosen_run"])}[record["id"]]
        assert record["generation"] == chosen["generation"]
    return decided


def test_judge_and_genselect_read_the_tiny_judges_own_text(kit, shared_vllm, judge_server, tmp_path):
    cluster, model, server = shared_vllm
    judge_cluster, judge = judge_server
    data = tmp_path / "data"
    assert kit("prepare_data", "arith", f"--data_dir={data}").returncode == 0
    out = tmp_path / "results"
    res = kit(
        "eval", *cluster, *model, f"--server_address={server.url}", "--benchmarks=arith:2", f"--data_dir={data}",
        f"--output_dir={out}", f"--judge_model={SERVICES['KIT_TEST_TINY_JUDGE']}", "--judge_server_type=vllm",
        f"--judge_server_address={judge.url}", "++inference.tokens_to_generate=12", "++max_concurrent_requests=8",
        timeout=900,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    bench = out / "eval-results" / "arith"

    # every verdict is the one its own text states; tiny-judge formats (nearly) all of them
    tally = expected_tally(bench)
    assert tally["samples"] == 100 and tally["unparsed"] <= 5, tally
    for seed in (0, 1):
        for r in rows(bench / f"judge-rs{seed}" / "output.jsonl"):
            verdict = said(VERDICT, r["generation"])
            assert parse_verdict(r["generation"]) == (None if verdict is None else verdict == "Yes"), r
    metrics = json.loads((out / "metrics.json").read_text())["arith"]
    assert metrics["judge"] == tally, (metrics["judge"], tally)
    yes = sum(
        parse_verdict(r["generation"]) is True for s in (0, 1) for r in rows(bench / f"judge-rs{s}" / "output.jsonl")
    )
    assert metrics["pass@1[avg-of-2]"]["judge_correct"] == pytest.approx(yes)  # of 100 samples: a percentage
    assert disagreement_line(tally) in res.stdout, res.stdout
    print(f"judge over {tally['samples']} samples: {tally}")  # (shown with -rP: what the model did)

    # a judge output the model did not format (planted in a copy) is unparsed: not correct, and not a "no"
    copy = tmp_path / "copy"
    shutil.copytree(out / "eval-results", copy / "eval-results")
    planted = copy / "eval-results" / "arith" / "judge-rs0" / "output.jsonl"
    judged = rows(planted)
    judged[0]["generation"] = "The predicted answer looks fine to me."
    planted.write_text("".join(json.dumps(r) + "\n" for r in judged))
    again = kit("summarize", str(copy))
    assert again.returncode == 0, again.stderr
    want = expected_tally(copy / "eval-results" / "arith")
    assert want["unparsed"] == tally["unparsed"] + 1
    assert json.loads((copy / "metrics.json").read_text())["arith"]["judge"] == want
    assert disagreement_line(want) in again.stdout
    assert f"judge wrote no verdict for {want['unparsed']} sample" in again.stdout, again.stdout
    audit = kit("summarize", str(copy), "--audit")
    assert f"judge wrote no verdict (counted as not correct): {want['unparsed']} sample" in audit.stdout
    assert f"{judged[0]['id']} (output-rs0.jsonl)" in audit.stdout

    # GenSelect by tiny-judge over the eval's two seeds and a third, wrong one (so every problem has a choice)
    picks = tmp_path / "genselect-runs"
    picks.mkdir()
    for seed in (0, 1):
        shutil.copy(bench / f"output-rs{seed}.jsonl", picks)
    wrong_run(bench / "output-rs0.jsonl", picks / "output-rs2.jsonl")
    endpoint = [*judge_cluster, "--server_type=vllm", f"--model={SERVICES['KIT_TEST_TINY_JUDGE']}"]
    endpoint += [f"--server_address={judge.url}", "++generation_type=genselect", "++inference.temperature=0.0"]
    for folder, tokens in ((picks, 32), (tmp_path / "cut-short", 6)):
        if folder != picks:  # the same runs, the judgments cut before their last line: every window falls back
            shutil.copytree(picks, folder, ignore=shutil.ignore_patterns("genselect"))
        gen = kit(
            "generate", *endpoint, f"--output_dir={folder / 'genselect'}", f"++input_dir={folder}",
            f"++inference.tokens_to_generate={tokens}", f"--expname=genselect-{tokens}", timeout=600,
        )  # fmt: skip
        assert gen.returncode == 0, gen.stdout[-3000:] + gen.stderr[-2000:]
        decided = check_picks(folder)
        print(f"genselect, judgments of up to {tokens} tokens: {decided}")
        assert sum(decided.values()) == 50, decided
        if tokens == 6:  # (a problem whose runs all give one answer needs no request: unanimous)
            assert "judgment" not in decided and decided.get("fallback", 0) >= 45, decided
        else:
            assert decided.get("judgment", 0) >= 45, decided  # tiny-judge writes "Judgment: k" (nearly) always
        sel = kit("select", f"--input_dir={folder}", "--method=genselect", f"--output_file={folder / 'sel.jsonl'}")
        assert sel.returncode == 0, sel.stderr
        line = f"(picks: {decided.get('judgment', 0)} by judgment, {decided.get('fallback', 0)} by majority fallback"
        assert line in sel.stdout, sel.stdout
