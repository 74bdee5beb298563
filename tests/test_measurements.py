"""The measurements store: figures a job writes are read back whole, per experiment and across experiments, and an
unreadable file is skipped (figures are advice, never a reason to stop)."""

from pipeline_kit.measurements import (
    JobFigures,
    ServerKey,
    UnitFigures,
    experiment_figures,
    figures_file,
    stored_figures,
    write_figures,
)

TINY = ServerKey("/models/tiny", "vllm", 1, 1)


def figures(server: ServerKey, recorded_at: float, startup: float = 30.0) -> JobFigures:
    units = (UnitFigures("rs0_chunk_0", 10, 1200, 4.0), UnitFigures("rs0_chunk_1", 10, 800, 3.0))
    return JobFigures(server, "generic/math", 512, startup, 2.5, 5.0, units, "exp", "exp", recorded_at)


def test_figures_read_back_across_experiments(tmp_path):
    first = tmp_path / "logs" / "exp-a" / "20261125_1"
    second = tmp_path / "logs" / "exp-b" / "20261125_2"
    write_figures(figures_file(first, "exp-a"), figures(TINY, 2.0))
    write_figures(figures_file(second, "exp-b", "3"), figures(TINY, 1.0, startup=40.0))
    write_figures(figures_file(second, "other"), figures(ServerKey("/models/big", "vllm", 8, 1), 3.0))
    (first / "measurements" / "broken.json").write_text("{not json")

    mine = stored_figures(tmp_path, TINY)
    assert [f.startup_s for f in mine] == [40.0, 30.0]  # oldest first
    assert mine[0].samples == 20 and mine[0].tokens == 2000 and mine[0].seconds_per_sample == 0.25
    assert len(stored_figures(tmp_path)) == 3
    assert figures_file(second, "exp-b", "3").name == "exp-b.3.json"
    assert [f.server for f in experiment_figures(second)] == [TINY, ServerKey("/models/big", "vllm", 8, 1)]
