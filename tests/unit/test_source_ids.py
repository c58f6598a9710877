"""Two broker logs with the same file name in different folders (the README's own
`--broker-log broker1/server.log broker2/server.log`) are two sources: their own source id, their
own per-file settings and their own clock-skew series."""
from __future__ import annotations

from streaming.app.local import run_local
from tests.support.capture_expectations import two_server_logs


def test_same_base_name_gives_distinct_ids():
    from streaming.inputs import file_source_ids
    ids = file_source_ids([("c", "/logs/broker1/server.log"), ("c", "/logs/broker2/server.log"),
                           ("c", "/dumps/offsets.jsonl"), ("other", "/x/server.log")])
    assert ids == ["c:broker1/server.log", "c:broker2/server.log", "c:offsets.jsonl", "other:server.log"]
    # unique base names keep the short id (the ids of the bundled captures do not change)
    assert file_source_ids([("c", "a/node1-server.log"), ("c", "b/node2-server.log")]) == \
        ["c:node1-server.log", "c:node2-server.log"]
    # deeper clashes take as many components as needed
    assert file_source_ids([("c", "/p/a/x/server.log"), ("c", "/p/b/x/server.log")]) == \
        ["c:a/x/server.log", "c:b/x/server.log"]


def test_two_server_logs_are_two_clock_skew_sources(tmp_path):
    out = run_local(*two_server_logs(tmp_path))
    assert {c["source"] for c in out["clock_skew"]} == {"default:broker1/server.log", "default:broker2/server.log"}
    assert len(out["rebalance"]) == 82


