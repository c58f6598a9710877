"""Inputs: the source id of each replay file (the input kinds: state/vocabulary.py)."""
from __future__ import annotations

import os


def file_source_ids(inputs: list[tuple[str, str]]) -> list[str]:
    """"<cluster>:<name>" per (cluster, path) input of a replay, one per distinct file.

    The name is the file's base name, or as many trailing path components as it takes to tell
    files with the same base name apart (`broker1/server.log`, `broker2/server.log`): the source
    id keys the per-file settings (--broker-id, time zone), the clock-skew series and the event
    order, so two files must never share one.
    """
    parts = [os.path.normpath(os.path.abspath(path)).split(os.sep) for _, path in inputs]
    depth = [1] * len(inputs)

    def ids() -> list[str]:
        return [f"{cluster}:{'/'.join(p[-d:])}" for (cluster, _), p, d in zip(inputs, parts, depth)]

    while True:
        current = ids()
        grew = False
        for i, sid in enumerate(current):
            clash = any(sid == other and parts[i] != parts[j] for j, other in enumerate(current) if j != i)
            if clash and depth[i] < len(parts[i]):
                depth[i] += 1
                grew = True
        if not grew:
            return current
