"""Slurm job states read back from crafted sacct rows (no Slurm needed): array rows of units, bracket rows of units
that never started (`123_[0-7] CANCELLED`), several Slurm arrays per job, het components; and the stops of
`wait_for_states` (an overall timeout, a job that neither sacct nor squeue knows any more)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from pipeline_kit.launch import cancel, job_status, slurm_states
from pipeline_kit.launch.job_status import wait_for_states
from pipeline_kit.launch.records import ExperimentRecord, JobRecord
from pipeline_kit.launch.slurm_states import array_units, slurm_status

# what `sacct -n -P -X -o JobID,State` prints, as slurm_rows maps it
SACCT_STATE = {"COMPLETED": "SUCCEEDED", "FAILED": "FAILED", "CANCELLED by 0": "CANCELLED", "PENDING": "PENDING"}


def status(rows: dict[str, str], array_size: int | None = None, ids=("123",), offsets=()):
    job = JobRecord("j", "t", ["g"], array_size, slurm_ids=list(ids), unit_offsets=list(offsets))
    return slurm_status(None, job, rows)


@pytest.mark.parametrize(
    ("spec", "units"),
    [
        ("5", [5]),
        ("[0-7]", list(range(8))),
        ("[0-7%2]", list(range(8))),
        ("[2-5,7]", [2, 3, 4, 5, 7]),
        ("[1,3-4%4]", [1, 3, 4]),
        ("[9]", [9]),
        ("", None),
        ("x", None),
        ("[a-b]", None),
        ("[0-7", None),
    ],
)
def test_array_units(spec, units):
    assert array_units(spec) == units


def test_array_cancelled_while_pending_is_cancelled():
    for row in ("123_[0-7]", "123_[0-7%2]"):
        s = status({row: "CANCELLED"}, array_size=8)
        assert (s.state, s.failed_units) == ("CANCELLED", {}), row


def test_array_partly_ran_then_rest_cancelled_while_pending():
    rows = {"123_0": "SUCCEEDED", "123_1": "FAILED", "123_[2-5,7]": "CANCELLED", "123_6": "CANCELLED"}
    s = status(rows, array_size=8)
    assert s.state == "FAILED"
    assert s.failed_units == {1: "FAILED", 6: "CANCELLED"}  # the units that ran; 2-5 and 7 never started
    rows["123_1"] = "SUCCEEDED"
    assert status(rows, array_size=8).state == "CANCELLED"


def test_array_pending_range_and_running_units():
    assert status({"123_[0-3]": "PENDING"}, array_size=4).state == "PENDING"
    assert status({"123_0": "RUNNING", "123_[1-3%1]": "PENDING"}, array_size=4).state == "RUNNING"
    assert status({"123_0": "SUCCEEDED", "123_[1-3%1]": "PENDING"}, array_size=4).state == "PENDING"
    # a unit's own row wins over a range row that still lists it (two sacct snapshots overlapping)
    assert status({"123_[0-1]": "PENDING", "123_0": "SUCCEEDED", "123_1": "SUCCEEDED"}, 2).state == "SUCCEEDED"


def test_array_units_not_listed_yet_are_still_to_come():
    assert status({}, array_size=4).state == "PENDING"
    assert status({"123": "PENDING"}, array_size=4).state == "PENDING"
    # seen on the local Slurm: `123 COMPLETED` for a moment before the unit rows (one FAILED) replace it, and
    # `123 CANCELLED` before `123_[0-3] CANCELLED`
    assert status({"123": "SUCCEEDED"}, array_size=4).state == "RUNNING"
    assert status({"123": "CANCELLED"}, array_size=4).state == "RUNNING"
    assert status({"123_0": "SUCCEEDED", "123_1": "SUCCEEDED"}, array_size=4).state == "RUNNING"
    assert status({f"123_{i}": "SUCCEEDED" for i in range(4)}, array_size=4).state == "SUCCEEDED"
    assert status({"1234_0": "FAILED", "12_0": "FAILED"}, array_size=1).state == "PENDING"  # other ids' rows


def test_several_slurm_arrays_make_one_job():
    ids, offsets = ("100", "200"), (0, 1000)
    rows = {"100_[0-999]": "CANCELLED", "200_[0-499]": "CANCELLED"}
    assert status(rows, 1500, ids, offsets).state == "CANCELLED"
    # the first array recorded before the second (seen in a full run, 10,000 units held with --begin): still pending
    assert status({"100_[0-999]": "PENDING"}, 1500, ids, offsets).state == "PENDING"
    rows = {**{f"100_{i}": "SUCCEEDED" for i in range(1000)}, "200_[0-499]": "PENDING"}
    assert status(rows, 1500, ids, offsets).state == "PENDING"
    rows = {**{f"100_{i}": "SUCCEEDED" for i in range(1000)}, **{f"200_{i}": "SUCCEEDED" for i in range(499)}}
    assert status(rows, 1500, ids, offsets).state == "RUNNING"  # one unit still to come
    rows["200_499"] = "FAILED"
    s = status(rows, 1500, ids, offsets)
    assert (s.state, s.failed_units) == ("FAILED", {1499: "FAILED"})  # numbered across the arrays
    rows["200_499"] = "SUCCEEDED"
    assert status(rows, 1500, ids, offsets).state == "SUCCEEDED"


def test_plain_and_het_jobs():
    assert status({}).state == "PENDING"
    assert status({"123": "FAILED"}).state == "FAILED"
    assert status({"123": "CANCELLED", "1234": "SUCCEEDED"}).state == "CANCELLED"
    # het job: component 0 runs the batch script and decides
    assert status({"123+0": "SUCCEEDED", "123+1": "CANCELLED"}).state == "SUCCEEDED"
    assert status({"123": "SUCCEEDED", "124": "RUNNING"}, ids=("123", "124")).state == "RUNNING"


def test_slurm_rows_parses_sacct_output(monkeypatch):
    out = "123_[0-7]|CANCELLED by 0\n124_0|COMPLETED\n124_1|FAILED\n125+0|PENDING\n126|OUT_OF_MEMORY\n"
    monkeypatch.setattr(slurm_states, "remote_run", lambda cluster, cmd, check=True: type("P", (), {"stdout": out}))
    assert slurm_states.slurm_rows(None, ["123"]) == {
        "123_[0-7]": "CANCELLED",
        "124_0": "SUCCEEDED",
        "124_1": "FAILED",
        "125+0": "PENDING",
        "126": "FAILED",
    }


# ------------------------------------------------------------------ wait_for_states


@pytest.fixture
def fake_slurm(monkeypatch):
    """sacct rows and the ids squeue lists, set by the test; the clock advances 10 s per sleep."""
    fake = {"rows": {}, "queued": set(), "now": 0.0, "sacct_calls": 0}

    def rows(cluster, ids):
        fake["sacct_calls"] += 1
        return {k: v for k, v in fake["rows"].items() if k.split("_")[0].split("+")[0] in ids}

    def sleep(s):
        fake["now"] += 10.0
        if callable(fake.get("tick")):
            fake["tick"](fake)

    monkeypatch.setattr(slurm_states, "slurm_rows", rows)
    monkeypatch.setattr(slurm_states, "squeue_known", lambda cluster, ids: fake["queued"] & set(ids))
    monkeypatch.setattr(job_status, "time", SimpleNamespace(monotonic=lambda: fake["now"], sleep=sleep))
    return fake


def record(*jobs: JobRecord) -> ExperimentRecord:
    return ExperimentRecord("e", "r", "slurm", "/nowhere", jobs=list(jobs))


CLUSTER = None  # never used: the scheduler calls are faked


def test_wait_ends_on_an_array_cancelled_while_pending(fake_slurm):
    fake_slurm["rows"] = {"1": "FAILED", "2_[0-3]": "PENDING"}
    fake_slurm["tick"] = lambda f: f["rows"].update({"2_[0-3]": "CANCELLED"})
    rec = record(JobRecord("parent", "t", ["g"], slurm_ids=["1"]), JobRecord("dep", "t", ["g"], 4, slurm_ids=["2"]))
    assert wait_for_states(CLUSTER, rec) == {"parent": "FAILED", "dep": "CANCELLED"}


def test_wait_timeout(fake_slurm, capsys):
    fake_slurm["rows"] = {"1": "RUNNING"}
    rec = record(JobRecord("a", "t", ["g"], slurm_ids=["1"]))
    assert wait_for_states(CLUSTER, rec, timeout_s=35) == {"a": "RUNNING"}
    assert fake_slurm["now"] == 40
    assert capsys.readouterr().err == "kit: stopped waiting after 35 s; not finished: a (RUNNING)\n"


def test_wait_stops_on_a_lost_job(fake_slurm, capsys):
    fake_slurm["rows"] = {"1": "RUNNING"}
    fake_slurm["queued"] = {"2"}  # squeue knows 2 before sacct does
    rec = record(
        JobRecord("a", "t", ["g"], slurm_ids=["1"]),
        JobRecord("b", "t", ["g"], slurm_ids=["2"]),
        JobRecord("gone", "t", ["g"], 4, slurm_ids=["3"]),  # never known: purged, or another cluster's
    )

    def tick(f):
        if f["now"] == 30:
            f["rows"]["2"] = "RUNNING"
            f["queued"] = set()
        if f["now"] == 70:  # a and b end; sacct keeps them
            f["rows"].update({"1": "SUCCEEDED", "2": "FAILED"})

    fake_slurm["tick"] = tick
    assert wait_for_states(CLUSTER, rec) == {"a": "SUCCEEDED", "b": "FAILED", "gone": "LOST"}
    err = capsys.readouterr().err.splitlines()
    assert err == [
        "kit: job gone (slurm job 3) is LOST: neither sacct nor squeue has known it for 60 s "
        "(purged, or another cluster's?); not waiting for it"
    ]


def test_wait_lost_counts_from_when_the_job_was_last_seen(fake_slurm):
    fake_slurm["rows"] = {"1": "RUNNING"}

    def tick(f):
        if f["now"] == 50:
            f["rows"].clear()  # accounting forgets the job (and squeue does not know it either)

    fake_slurm["tick"] = tick
    rec = record(JobRecord("a", "t", ["g"], slurm_ids=["1"]))
    assert wait_for_states(CLUSTER, rec, lost_after_s=60) == {"a": "LOST"}
    assert fake_slurm["now"] == 100  # last seen at 40


def test_cancel_acts_only_on_jobs_that_have_not_ended(fake_slurm, monkeypatch):
    """scancel names only the jobs still pending or running; cancel() lists only those (never one that ended)."""
    sent = []
    monkeypatch.setattr(cancel, "remote_run", lambda cluster, cmd, **kw: sent.append(cmd))
    fake_slurm["rows"] = {"1": "SUCCEEDED", "2": "FAILED", "3": "RUNNING", "4_0": "SUCCEEDED", "4_[1-3]": "PENDING"}
    rec = record(
        JobRecord("done", "t", ["g"], slurm_ids=["1"]),
        JobRecord("bad", "t", ["g"], slurm_ids=["2"]),
        JobRecord("busy", "t", ["g"], slurm_ids=["3"]),
        JobRecord("array", "t", ["g"], 4, slurm_ids=["4"]),
        JobRecord("queued", "t", ["g"], slurm_ids=["5"]),  # accounting does not list it yet: it may still run
    )
    assert cancel.cancel_experiment(CLUSTER, rec) == ["busy", "array", "queued"]
    assert sent == ["scancel 3 4 5"]
    sent.clear()
    fake_slurm["rows"] = {"1": "SUCCEEDED", "2": "FAILED"}
    assert cancel.cancel_experiment(CLUSTER, record(*rec.jobs[:2])) == []
    assert sent == []  # nothing to cancel: no scancel at all
