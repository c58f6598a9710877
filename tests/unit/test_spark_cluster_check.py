"""scripts/spark-cluster-check's last line (testbed/spark_cluster.check_summary): what
the cluster tests recorded, combined; a figure no test recorded is `missing` and fails."""
from __future__ import annotations

import json

from testbed.spark_cluster import FIGURES_ENV, check_summary, record_figure

GOOD = [("executors", 2), ("executors", 2), ("records_equal", True), ("records_equal", True),
        ("executor_kill_lost", 0), ("executor_kill_doubled", 0), ("driver_kill_equal", True)]


def _write(path, figures):
    path.write_text("".join(json.dumps({"name": n, "value": v, "test": "t"}) + "\n" for n, v in figures))
    return path


def test_every_figure_as_required_passes(tmp_path):
    line, ok = check_summary(_write(tmp_path / "f", GOOD))
    assert ok
    assert line == "executors=2 records_equal=true executor_kill_lost=0 executor_kill_doubled=0 driver_kill_equal=true"


def test_one_bad_measure_fails_the_check(tmp_path):
    for bad in [("executors", 1), ("records_equal", False), ("executor_kill_lost", 3), ("executor_kill_doubled", 1),
                ("driver_kill_equal", False)]:
        line, ok = check_summary(_write(tmp_path / "f", [*GOOD, bad]))
        assert not ok, bad
        assert f"{bad[0]}={str(bad[1]).lower()}" in line


def test_a_figure_no_test_recorded_is_missing(tmp_path):
    line, ok = check_summary(_write(tmp_path / "f", [f for f in GOOD if f[0] != "driver_kill_equal"]))
    assert not ok and line.endswith("driver_kill_equal=missing")
    assert check_summary(tmp_path / "absent") == (
        "executors=missing records_equal=missing executor_kill_lost=missing executor_kill_doubled=missing "
        "driver_kill_equal=missing", False)


def test_figures_are_recorded_only_for_the_check(tmp_path, monkeypatch):
    monkeypatch.delenv(FIGURES_ENV, raising=False)
    record_figure("executors", 2)                   # no file: nothing written anywhere
    monkeypatch.setenv(FIGURES_ENV, str(tmp_path / "f"))
    record_figure("executors", 2)
    record_figure("records_equal", True)
    assert [json.loads(line)["name"] for line in (tmp_path / "f").read_text().splitlines()] == \
        ["executors", "records_equal"]
