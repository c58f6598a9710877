"""Exposition of the metrics registry: HTTP endpoint and text file (prometheus_client's own)."""
from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest, start_http_server, write_to_textfile


def serve(registry: CollectorRegistry, host: str, port: int):
    """Start the /metrics endpoint in a daemon thread; returns (server, thread)."""
    return start_http_server(port, addr=host, registry=registry)


def text(registry: CollectorRegistry) -> str:
    return generate_latest(registry).decode("utf-8")


def write_textfile(registry: CollectorRegistry, path: str) -> None:
    """Atomically: prometheus_client writes `path.<pid>.<thread>` and renames it."""
    write_to_textfile(path, registry)


# The default budget of series one group adds to /metrics (docs/metrics.md, "Series per group").
SERIES_PER_GROUP_BUDGET = 15
OTHER_GROUPS = "__other__"   # the group label of groups beyond max_groups


def series_per_group(page: str) -> dict[tuple[str, str], int]:
    """Samples per (cluster, group) in an exposition text: every sample line with a `group` label
    (the `__other__` fold excluded)."""
    counts: dict[tuple[str, str], int] = {}
    for line in page.splitlines():
        if line.startswith("#") or 'group="' not in line:
            continue
        labels = line[line.index("{") + 1:line.rindex("}")]
        values = dict(_label_pairs(labels))
        group = values.get("group")
        if group is None or group == OTHER_GROUPS:
            continue
        key = (values.get("cluster", ""), group)
        counts[key] = counts.get(key, 0) + 1
    return counts


def _label_pairs(labels: str):
    """`a="x",b="y"` -> (a, x), (b, y); values may contain escaped quotes and commas."""
    i = 0
    while i < len(labels):
        eq = labels.index("=", i)
        name = labels[i:eq].strip().lstrip(",").strip()
        j = eq + 2
        value = []
        while labels[j] != '"':
            if labels[j] == "\\":
                j += 1
            value.append(labels[j])
            j += 1
        yield name, "".join(value)
        i = j + 1
