"""Every layout the log reader reads goes through the commands users run, not only the parser:
`parse-logs` and `replay` take the real broker files of tests/fixtures/layouts (Kafka 2.8.2 and
4.4.0, one appender per layout, the same moments), as written and inside shipper envelopes, and
give the default layout's events and rebalances. The input check (streaming/app/probe.py) once
refused Strimzi's Kafka 4.x layout and the files of a broker that wrote no default-layout header in
its first 200 lines."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.capture_expectations import FIXTURES
from tests.support.log_rewrite import filebeat, fluent_bit, pasted, read_lines, vector, write

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "streaming.app.cli"]
REAL = FIXTURES / "layouts"
CASES = sorted((d.name, p.name.split("-", 1)[1][:-4]) for d in REAL.iterdir() if d.is_dir()
               for p in d.glob("broker1-*.log") if not p.name.endswith("-default.log"))
SECOND_LAYOUTS = ("strimzi4",)       # layouts without milliseconds: event times to the second


def _env() -> dict[str, str]:
    import os
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("REBALANCE_MONITOR_METRICS_PORT", None)
    return env


def _files(version: str, layout: str) -> list[str]:
    return [str(p) for p in sorted((REAL / version).glob(f"broker*-{layout}.log"))]


def _parse_logs(paths: list[str], *flags: str) -> list[dict]:
    result = subprocess.run(CLI + ["parse-logs", *paths, *flags], cwd=ROOT, env=_env(), capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    return [json.loads(line) for line in result.stdout.splitlines()]


def _comparable(events: list[dict], to_second: bool) -> list[tuple]:
    """The events without where they were read (file, line, envelope host), in time order."""
    return sorted((e["ts_ms"] // 1000 * 1000 if to_second else e["ts_ms"], e["broker"], e["kind"], e["group"],
                   e["generation"], e["member_id"], e.get("reason"), e.get("trigger"))
                  for e in events)


@pytest.mark.parametrize(("version", "layout"), CASES, ids=[f"{v}-{x}" for v, x in CASES])
def test_parse_logs_reads_every_layout_as_the_default_one(version, layout):
    default = _parse_logs(_files(version, "default"))
    assert {"prepare_rebalance", "member_failed", "join_complete"} <= {e["kind"] for e in default}
    second = layout in SECOND_LAYOUTS
    assert _comparable(_parse_logs(_files(version, layout)), second) == _comparable(default, second)


SHIPPERS = {"vector": lambda lines, n: vector(lines, host=f"kafka-{n}"),
            # multiline.pattern for a layout that starts with its date or a bracket
            "filebeat": lambda lines, n: filebeat(lines, host=f"kafka-{n}", broker_id=n, multiline=r"^(\[|\d{4}-)"),
            "fluent-bit": lambda lines, n: fluent_bit(lines, pod=f"kafka-{n}")}


@pytest.mark.parametrize("shipper", sorted(SHIPPERS))
@pytest.mark.parametrize("layout", ["strimzi4", "cfk", "pipe"])
def test_parse_logs_reads_shipper_envelopes_of_other_layouts(tmp_path, shipper, layout):
    plain = _files("kafka-4.4.0", layout)
    wrapped = [write(tmp_path / f"{Path(p).stem}.json", SHIPPERS[shipper](read_lines(Path(p)), n))
               for n, p in enumerate(plain, start=1)]
    assert _comparable(_parse_logs(wrapped), False) == _comparable(_parse_logs(plain), False)


def test_parse_logs_accepts_a_file_whose_first_log4j_line_is_far_in(tmp_path):
    """A server.log that opens with other output (here 200 KB of a JVM's and a script's) is a
    broker log all the same: the check reads a MiB, and any line of a known layout counts."""
    start = [f"OpenJDK 64-Bit Server VM warning: option {i} is deprecated" for i in range(1500)]
    start += [f"\tsetting.number.{i} = value {i}" for i in range(2500)]
    lines = read_lines(REAL / "kafka-4.4.0" / "broker1-strimzi4.log")
    path = write(tmp_path / "server.log", start + lines)
    assert Path(path).stat().st_size > 128 * 1024
    assert _comparable(_parse_logs([path]), True) == \
        _comparable(_parse_logs([str(REAL / "kafka-4.4.0" / "broker1-strimzi4.log")]), True)


PASTED_LAYOUTS = ("default", "strimzi4", "padded")


def _pasted(tmp_path: Path, version: str, layout: str) -> list[str]:
    """The layout's files as pasted into a ticket: coordinator lines wrapped over lines, hard and
    soft, or with their blanks doubled (log_rewrite.pasted)."""
    out = []
    for path in _files(version, layout):
        target = tmp_path / "pasted" / version / Path(path).name
        target.parent.mkdir(parents=True, exist_ok=True)
        out.append(write(target, pasted(read_lines(Path(path)))))
    return out


@pytest.mark.parametrize("version", sorted({v for v, _ in CASES}))
@pytest.mark.parametrize("layout", PASTED_LAYOUTS)
def test_parse_logs_reads_lines_that_were_wrapped_or_had_their_blanks_mangled(tmp_path, version, layout):
    """Lines copied from a ticket or a chat: every coordinator message is read as the broker wrote it,
    none is left unrecognised."""
    files = _pasted(tmp_path, version, layout)
    assert sum(len(read_lines(Path(p))) for p in files) > sum(len(read_lines(Path(p))) for p in _files(version, layout))
    result = subprocess.run(CLI + ["parse-logs", *files], cwd=ROOT, env=_env(), capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    assert "0 in a layout not understood, 0 unrecognised" in result.stderr, result.stderr
    second = layout in SECOND_LAYOUTS
    assert _comparable([json.loads(line) for line in result.stdout.splitlines()], second) == \
        _comparable(_parse_logs(_files(version, "default")), second)


def _renamed(tmp_path: Path, version: str, layout: str) -> list[str]:
    """The layout's files with its group (and its members and topic) renamed after the layout,
    so that one replay holds every layout's rebalances side by side ("pasted": the default layout's
    files, renamed, then as log_rewrite.pasted gives them)."""
    out = []
    for path in _files(version, "default" if layout == "pasted" else layout):
        lines = [line.replace("layouts-kill", f"{version}-{layout}") for line in read_lines(Path(path))]
        target = tmp_path / version / Path(path).name.replace("default", layout)
        target.parent.mkdir(exist_ok=True)
        out.append(write(target, pasted(lines) if layout == "pasted" else lines))
    return out


@pytest.mark.spark
def test_replay_reads_every_layout_in_one_run(tmp_path):
    layouts = sorted({(v, x) for v, x in CASES} | {(v, d) for v, _ in CASES for d in ("default", "pasted")})
    logs = [p for v, x in layouts for p in _renamed(tmp_path, v, x)]
    out = tmp_path / "out"
    result = subprocess.run(CLI + ["replay", "--broker-log", *logs, "--out", str(out)], cwd=ROOT, env=_env(),
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Traceback" not in result.stderr
    by_group: dict[str, list[tuple]] = {}
    for line in (out / "rebalances.jsonl").read_text().splitlines():
        r = json.loads(line)
        by_group.setdefault(r["group"], []).append(
            (r["generation"], r["trigger"], r["outcome"], r["members"], r["protocol"],
             [m.replace(r["group"], "") for m in r["removed_members"]]))
    for version, layout in layouts:
        assert by_group.get(f"{version}-{layout}"), (version, layout, sorted(by_group))
        assert by_group[f"{version}-{layout}"] == by_group[f"{version}-default"], (version, layout)
