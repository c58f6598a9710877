"""Comparison of offsets event rows across decode paths (tests and bench/).

Commit rows of the same (cluster, group, topic, partition) are merged as the state machine would
use them (sum of counts, max offset, max commit time, latest position); every other row, decode
stats excepted, must match exactly, as a multiset."""
from __future__ import annotations

import collections
import json

from state.outputs import OutputKind
from streaming.rows import EVENT_COLUMNS


def normalise(rows) -> tuple[dict, collections.Counter]:
    commits: dict = {}
    other: collections.Counter = collections.Counter()
    for r in rows:
        d = dict(zip(EVENT_COLUMNS, r))
        if d["kind"] == "offset_commit":
            data = json.loads(d["data_json"])
            k = (d["cluster"], d["group"], data["topic"], data["partition"])
            pos = (d["ts_ms"], d["source_id"], d["seq"])
            c = commits.get(k)
            if c is None:
                commits[k] = dict(data, pos=pos)
            else:
                c["count"] += data["count"]
                c["offset"] = max(c["offset"], data["offset"])
                c["commit_ts_ms"] = max(c["commit_ts_ms"], data["commit_ts_ms"])
                c["pos"] = max(c["pos"], pos)
        elif d["kind"] != OutputKind.DECODE_STATS:
            other[tuple(r)] += 1
    return commits, other
