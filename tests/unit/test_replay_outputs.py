"""A replay's outputs: its --out checked before Spark starts, and outputs that cannot be written at
the end one error (streaming/app/cli/replay.py)."""
from __future__ import annotations

import pytest

from sinks.metrics import MetricsSink
from streaming.app.cli.replay import OutputsNotWritten, check_out_dir, write_outputs_and_report
from streaming.app.collector import RunCollector
from streaming.app.settings import ConfigError


def test_an_out_dir_is_made_and_left_without_the_check_file(tmp_path):
    out = tmp_path / "a" / "b"
    check_out_dir(str(out))
    assert out.is_dir() and list(out.iterdir()) == []


def test_an_out_that_is_a_file_is_a_configuration_error(tmp_path):
    target = tmp_path / "notes.txt"
    target.write_text("x")
    with pytest.raises(ConfigError, match=r"^--out: .*notes.txt is a file, not a directory$"):
        check_out_dir(str(target))
    with pytest.raises(ConfigError, match=r"^--out: cannot write to .*notes.txt/sub: Not a directory$"):
        check_out_dir(str(target / "sub"))


def test_every_output_is_written_and_the_summary_made_meanwhile(tmp_path):
    collector = RunCollector(MetricsSink([1.0]))
    made = []
    report = write_outputs_and_report(str(tmp_path), collector, meanwhile=lambda: made.append(True))
    assert made == [True]
    assert report == str(tmp_path / "report.html")
    names = {p.name for p in tmp_path.iterdir()}
    assert {"rebalances.jsonl", "member_removals.jsonl", "groups.jsonl", "metrics.prom", "report.html"} <= names


def test_outputs_that_cannot_be_written_are_one_error(tmp_path):
    # The directory is gone and a file has its name: both the forked child (record files, report)
    # and this process (metrics.prom) fail; one error says so.
    out = tmp_path / "out"
    out.write_text("not a directory")
    with pytest.raises(OutputsNotWritten, match="FileExistsError"):
        write_outputs_and_report(str(out), RunCollector(MetricsSink([1.0])))
