"""What a run on this machine shows while it works (pipeline_kit/launch/follow.py): kit's lines of the commands'
logs as they are written, whole lines only, never a service's log or kit.log; and which inputs kit can see at
submission on each executor (launch/run.visible_path)."""

from __future__ import annotations

import io
import time
from pathlib import Path
from types import SimpleNamespace

from pipeline_kit.launch.follow import LogFollower, unshown_tail
from pipeline_kit.launch.run import visible_path
from pipeline_kit.pipeline.model import Command, CommandGroup, Job


def test_follower_shows_kit_lines_of_commands_only_and_whole(tmp_path: Path):
    client, server, note = tmp_path / "gen/client.log", tmp_path / "gen/server.log", tmp_path / "gen/kit.log"
    client.parent.mkdir()
    unit = tmp_path / "gen/unit3-client.log"
    out = io.StringIO()
    follower = LogFollower(str(tmp_path), {("gen", "server")}, stream=out, interval=3600)
    everything = io.StringIO()
    every_line = LogFollower(str(tmp_path), {("gen", "server")}, "all", stream=everything, interval=3600)
    client.write_text("kit generate: 10 samples\nsome library chatter\nkit generate: 3/10 sam")
    server.write_text("kit generate: not a command's line\nINFO: 200 OK\n")
    note.write_text("kit: command 'client' failed\n")
    unit.write_text("kit generate: unit 3 line\n")
    follower.poll()
    every_line.poll()
    assert out.getvalue() == "kit generate: 10 samples\nkit generate: unit 3 line\n"
    assert everything.getvalue() == "kit generate: 10 samples\nsome library chatter\nkit generate: unit 3 line\n"
    with client.open("a") as f:
        f.write("ples, 1.0 samples/s\n")
    follower.poll()
    follower.poll()  # a line is shown once
    assert out.getvalue().splitlines()[2:] == ["kit generate: 3/10 samples, 1.0 samples/s"]


def test_follower_thread_shows_lines_while_it_runs_and_the_last_ones_on_exit(tmp_path: Path):
    log = tmp_path / "train/trainer.log"
    log.parent.mkdir()
    log.write_text("")
    out = io.StringIO()
    with LogFollower(str(tmp_path), set(), stream=out, interval=0.05):
        log.write_text("kit train: step 1/2: loss 1.5\n")
        for _ in range(100):
            if out.getvalue():
                break
            time.sleep(0.05)
        assert out.getvalue() == "kit train: step 1/2: loss 1.5\n"
        with log.open("a") as f:
            f.write("kit train: step 2/2: loss 1.4\n")
    assert out.getvalue().endswith("kit train: step 2/2: loss 1.4\n")


def test_a_failed_logs_tail_leaves_out_what_was_shown():
    assert unshown_tail("kit generate: a\nTraceback (most recent call last):\nkit generate: b\n") == (
        "Traceback (most recent call last):\n"
    )
    assert unshown_tail("kit generate: a\nTraceback\n", "all") == ""


def pipeline(executor: str, tunnel: bool = False, mounts=()):
    cluster = SimpleNamespace(executor=executor, ssh_tunnel=object() if tunnel else None, mounts=list(mounts),
                              source="c.yaml")  # fmt: skip
    return SimpleNamespace(cluster=cluster, mount_paths=[])


def job(container: str | None) -> Job:
    return Job("j", [CommandGroup([Command("true", name="c", container=container)])])


def test_inputs_kit_can_see_at_submission():
    assert visible_path(pipeline("none"), job(None), "/m") == "/m"
    assert visible_path(pipeline("slurm"), job(None), "/m") == "/m"  # this is the login node
    assert visible_path(pipeline("slurm", tunnel=True), job(None), "/m") is None
    mounted = pipeline("slurm", mounts=["/lustre/models:/models:ro"])
    assert visible_path(mounted, job("vllm"), "/models/qwen") == "/lustre/models/qwen"
    assert visible_path(mounted, job("vllm"), "/opt/in-image") is None  # may be inside the image
    assert visible_path(pipeline("local", mounts=["/data:/d"]), job("kit"), "/d/x") == "/data/x"


def test_a_summary_of_one_parent_is_afterok_on_slurm_only():
    parent = job(None)
    child = Job("s", [CommandGroup([Command("true", name="c")])], after=[parent], skip_when_parents_failed=True)
    assert child.dependency("afterany", "slurm") == "afterok"  # kill_invalid_depend cancels it
    assert child.dependency("afterany", "none") == "afterany"  # the script checks the parents itself
    two = Job(
        "s", [CommandGroup([Command("true", name="c")])], after=[parent, job(None)], skip_when_parents_failed=True
    )
    assert two.dependency("afterany", "slurm") == "afterany"
    assert Job("p", [CommandGroup([Command("true", name="c")])], after=[parent]).dependency("afterany", "slurm") == (
        "afterany"
    )
