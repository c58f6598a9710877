"""`replay` (the Spark query) of a real capture rewritten into several layouts gives byte-identical
rebalance and removal records to the default layout, and reports each source's layout.

One replay reads every layout at once, each as its own cluster (the cluster is a label: the same
groups in two clusters never meet), so the JVM envelope step (JSON layouts, JSON behind container
prefixes, JSON inside a shipper's message) and the parse step run on all of them in one query.
Records are compared after the cluster name (in `cluster` and the `<cluster>:` of `source_id`) is
set back to `default`; the rest of the comparison is that of tests/unit/test_layouts_replay.py
(default layout at second precision for Strimzi 4.x, JSON layouts' line numbers mapped back), and
the verdicts at second precision are those of the millisecond layout (tests/unit/test_layout_verdicts.py).
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from streaming.app.settings import LogInput, OffsetsInput
from tests.support.capture_expectations import FIXTURES, LOG_FILES
from tests.support.layouts import JSON_LAYOUTS, SECONDS_ONLY, rewrite
from tests.support.verdicts import verdict_differences
from tests.unit.test_layouts_replay import expected_layout

pytestmark = pytest.mark.spark
CAPTURE = "kafka-4.0"
# The layouts whose reading involves the JVM envelope step (the pattern layouts and prefixes are read
# by the same Python in both paths: tests/unit/test_layouts_replay.py), and Strimzi 4.x for the
# reader's short-name markers.
LAYOUTS = ["default", "default-seconds", "strimzi4", "ecs-json", "log4j2-json", "cri+ecs-json",
           "docker-json+ecs-json", "compose-v2+log4j2-json"]


def _cluster(layout: str) -> str:
    return layout.replace("+", "_")


def _inputs(tmp: Path) -> tuple[list, list, dict]:
    logs, offsets, maps = [], [], {}
    for layout in LAYOUTS:
        cluster = _cluster(layout)
        directory = tmp / cluster
        directory.mkdir()
        for broker, name in enumerate(LOG_FILES[CAPTURE], start=1):
            lines = (FIXTURES / CAPTURE / name).read_text(errors="replace").splitlines()
            out, origin = rewrite(lines, layout, broker)
            (directory / name).write_text("\n".join(out) + "\n")
            logs.append(LogInput(path=str(directory / name), cluster=cluster))
            maps[f"{cluster}:{name}"] = origin
        offsets.append(OffsetsInput(path=str(FIXTURES / CAPTURE / "offsets-topic.jsonl"), cluster=cluster))
    return logs, offsets, maps


def _relabelled(records: list[dict], cluster: str, maps: dict | None) -> list[str]:
    out = []
    for r in records:
        if r["cluster"] != cluster:
            continue
        r = dict(r, cluster="default")
        if "source_id" in r:
            if maps is not None:
                r["seq"] = maps[r["source_id"]][r["seq"] - 1]
            r["source_id"] = "default:" + r["source_id"].split(":", 1)[1]
        out.append(json.dumps(r, sort_keys=True, separators=(",", ":")))
    return sorted(out)


def test_replay_of_every_layout_equals_the_default_layout(spark, tmp_path):
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load
    logs, offsets, maps = _inputs(tmp_path)
    out = tmp_path / "out"
    replay(spark, load(ReplaySettings), logs, offsets, out_dir=str(out))
    rebalances = [json.loads(line) for line in (out / "rebalances.jsonl").read_text().splitlines()]
    removals = [json.loads(line) for line in (out / "member_removals.jsonl").read_text().splitlines()]
    base = {name: (_relabelled(rebalances, _cluster(name), None), _relabelled(removals, _cluster(name), None))
            for name in ("default", "default-seconds")}
    assert len(base["default"][0]) == 106 and len(base["default"][1]) == 79
    assert base["default"] != base["default-seconds"]        # the comparison can tell
    # ... and whole seconds give the verdicts of milliseconds (tests/unit/test_layout_verdicts.py)
    def loaded(name: str) -> tuple[list[dict], list[dict]]:
        return [json.loads(t) for t in base[name][0]], [json.loads(t) for t in base[name][1]]
    assert verdict_differences(loaded("default"), loaded("default-seconds")) == []
    metrics = (out / "metrics.prom").read_text()
    for layout in LAYOUTS[2:]:
        cluster = _cluster(layout)
        reference = base["default-seconds" if any(p in SECONDS_ONLY for p in layout.split("+")) else "default"]
        mapped = maps if any(p in JSON_LAYOUTS for p in layout.split("+")) else None
        assert _relabelled(rebalances, cluster, None) == reference[0], layout
        assert _relabelled(removals, cluster, mapped) == reference[1], layout
        for name in LOG_FILES[CAPTURE]:
            assert (f'rebalance_monitor_log_layout_info{{cluster="{cluster}",layout="{expected_layout(layout)}",'
                    f'source="{cluster}:{name}"}} 1.0') in metrics, (layout, name)
    assert "rebalance_monitor_log_source_silent{" in metrics and 'silent{cause="layout",cluster="ecs-json"' in metrics
    assert not [line for line in metrics.splitlines()
                if line.startswith("rebalance_monitor_log_source_silent{") and line.endswith(" 1.0")]
