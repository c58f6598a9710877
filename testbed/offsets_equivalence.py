"""Comparison of offsets event rows across decode paths (tests/ and bench/bench_offsets.py).

Commit rows (and the entries of commit packs) of the same (cluster, group, topic, partition) are
merged as the state machine would use them (sum of counts, max offset, the newest distinct commit
times, latest time and source); every other row, decode stats excepted, must match exactly, as a multiset."""
from __future__ import annotations

import collections

from state.events import (COMMIT_TIMES_CARRIED, EARLIER_COMMIT_TIMES, commits_of, earlier_commit_times,
                          newest_commit_times)
from state.outputs import OutputKind
from streaming.rows import EVENT_COLUMNS, row_to_event


def normalise(rows) -> tuple[dict, collections.Counter]:
    commits: dict = {}
    other: collections.Counter = collections.Counter()
    for r in rows:
        d = dict(zip(EVENT_COLUMNS, r))
        if d["kind"] in ("offset_commit", "offset_commits"):
            # A pack's seq is its latest record's, not each partition's: positions compare by
            # (time, source) only.
            pos = (d["ts_ms"], d["source_id"])
            for data in commits_of(row_to_event(list(r))):
                k = (d["cluster"], d["group"], data["topic"], data["partition"])
                c = commits.get(k)
                if c is None:
                    commits[k] = c = dict(data, pos=pos, times=[])
                else:
                    c["count"] += data["count"]
                    c["offset"] = max(c["offset"], data["offset"])
                    c["pos"] = max(c["pos"], pos)
                c["times"] = newest_commit_times([*c["times"], data.get("commit_ts_ms"), *earlier_commit_times(data)],
                                                 COMMIT_TIMES_CARRIED)
        elif d["kind"] != OutputKind.DECODE_STATS:
            other[tuple(r)] += 1
    for c in commits.values():
        for f in ("commit_ts_ms", EARLIER_COMMIT_TIMES):
            c.pop(f, None)
    return commits, other
