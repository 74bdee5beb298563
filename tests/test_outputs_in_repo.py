"""kit run from inside the user's project repository, the way ns users work: its own outputs, logs and the
inputs there never block the next command (dry runs included), and are named in a one-line note; an untracked
module that the committed code imports is still refused by name (exit 2). The rule is launch/worktree.py's."""

from __future__ import annotations

from conftest import git, problems, rows

NOTE = "kit: left out of the packed code (untracked, not code): "


def note_line(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.startswith(NOTE)]
    assert len(lines) == 1, stderr
    return lines[0]


def test_two_generate_runs_with_outputs_in_the_repo_both_run(kit, none_cluster, stub, user_repo):
    server = stub()
    (user_repo / "data").mkdir()
    problems(user_repo / "data", 3)
    git(user_repo, "add", "data")
    git(user_repo, "commit", "-q", "-m", "inputs")
    (user_repo / "data" / "scratch.jsonl").write_text('{"problem": "1+1"}\n')  # an untracked input of the user's
    endpoint = ["--server_type=openai", f"--server_address={server.url}", "--model=stub"]
    common = [*none_cluster, *endpoint, "--input_file=data/in.jsonl"]

    first = kit("generate", *common, "--output_dir=results/first", f"--log_dir={user_repo}/logs/first")
    assert first.returncode == 0, first.stdout + first.stderr
    assert [r["id"] for r in rows(user_repo / "results" / "first" / "output.jsonl")] == [0, 1, 2]
    assert note_line(first.stderr) == NOTE + "data/scratch.jsonl"

    # the first run's outputs and logs (its script and output among them) are untracked files in the repo now:
    # they are named, and block nothing
    args = [*common, "--output_dir=results/second", f"--log_dir={user_repo}/logs/second"]
    dry = kit("generate", *args, "--dry_run")
    assert dry.returncode == 0, dry.stderr
    # results/first: output.jsonl, its .done and the run's .kit-plan.json
    assert note_line(dry.stderr) == NOTE + "data/scratch.jsonl, logs/ (6 files), results/ (3 files)", dry.stderr
    second = kit("generate", *args)
    assert second.returncode == 0, second.stdout + second.stderr
    assert [r["id"] for r in rows(user_repo / "results" / "second" / "output.jsonl")] == [0, 1, 2]
    assert len(server.requests()) == 6
    assert "jobs run committed code only" not in second.stderr


def test_an_untracked_module_the_committed_code_imports_is_still_refused(kit, none_cluster, user_repo):
    (user_repo / "uses_helper.py").write_text("import helper_mod\nprint(helper_mod.VALUE)\n")
    git(user_repo, "add", "uses_helper.py")
    git(user_repo, "commit", "-q", "-m", "uses a helper")
    (user_repo / "helper_mod.py").write_text("VALUE = 'from the helper'\n")  # not added: the packed commit lacks it
    (user_repo / "results").mkdir()
    (user_repo / "results" / "output.jsonl").write_text("{}\n")  # data beside it: not what is refused
    for extra in ([], ["--dry_run"]):
        res = kit("run_cmd", *none_cluster, "--command=python uses_helper.py", *extra)
        assert res.returncode == 2, res.stdout + res.stderr
        assert res.stderr.count("\n") == 1, res.stderr  # one line: the refusal, no note, no traceback
        assert f"{user_repo} has untracked code files helper_mod.py; jobs run committed code only" in res.stderr
        assert "results/output.jsonl" not in res.stderr and "--allow_uncommitted" in res.stderr

    git(user_repo, "add", "helper_mod.py")
    git(user_repo, "commit", "-q", "-m", "the helper")
    ran = kit("run_cmd", *none_cluster, "--command=python uses_helper.py")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "from the helper" in ran.stdout
    assert note_line(ran.stderr) == NOTE + "results/output.jsonl"
