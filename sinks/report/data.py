"""What the report draws, read from a replay's output directory (rebalances.jsonl, ...) or from the
live service's event sink (`events_dir`: rebalances/rolled-*.jsonl and batch-*.jsonl, ...), filtered,
per group.

No rendering here: svg.py and page.py turn a `Report` into HTML.
"""
from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sinks.event_sink import sink_files
from sinks.files import GROUPS_FILE, RECORD_FILES
from state.outputs import OutputKind, apply_trigger_decisions
from state.rebalance_cost import apply_rebalance_costs
from state.vocabulary import Outcome, RootCause

# The record kinds the report reads (the event sink's folders / the replay's files).
KINDS = (OutputKind.REBALANCE, OutputKind.REMOVAL, OutputKind.REBALANCE_TRIGGER, OutputKind.ANOMALY,
         OutputKind.QUARANTINE, OutputKind.CLOCK_SKEW, OutputKind.REBALANCE_COST, OutputKind.CATCH_UP)


class ReportInputError(ValueError):
    """An input the report cannot read: the message names the path (and line) and what was expected."""


@dataclass(frozen=True)
class Filters:
    since_ms: int | None = None
    until_ms: int | None = None
    group: re.Pattern[str] | None = None       # searched in the group id
    cluster: str | None = None


@dataclass(frozen=True)
class StormRules:
    """A group storm: more than `rebalances` rebalances of one group started within `window_ms` (the
    defaults are those of the KafkaConsumerGroupRebalanceStorm alert). A fleet burst: at least
    `burst_groups` groups started a rebalance within the same bin of the fleet timeline."""
    window_ms: int = 600_000
    rebalances: int = 10
    burst_groups: int = 5


@dataclass
class GroupView:
    cluster: str
    group: str
    rebalances: list[dict] = field(default_factory=list)
    removals: list[dict] = field(default_factory=list)
    snapshot: dict | None = None
    storms: list[tuple[int, int, int]] = field(default_factory=list)   # (first start, last start, count)

    @property
    def key(self) -> tuple[str, str]:
        return self.cluster, self.group

    @property
    def protocols(self) -> list[str]:
        return sorted({r["protocol"] for r in self.rebalances} | {r["protocol"] for r in self.removals})

    def times(self) -> list[int]:
        out = [t for r in self.rebalances for t in rebalance_times(r) if t is not None]
        return out + [r["removed_at_ms"] for r in self.removals]

    def first_ms(self) -> int:
        return min(self.times(), default=0)

    def last_ms(self) -> int:
        return max(self.times(), default=0)

    def attention(self) -> tuple[int, int, float]:
        """How much a reader should look at this group: unplanned removals, then rebalances,
        then the slowest rebalance."""
        unplanned = sum(1 for r in self.removals if r.get("root_cause") not in (RootCause.GRACEFUL_SHUTDOWN, None))
        slowest = max((r.get("total_seconds") or 0.0 for r in self.rebalances), default=0.0)
        return unplanned, len(self.rebalances), slowest


@dataclass
class Report:
    sources: list[str]
    groups: list[GroupView]                  # every group with a rebalance or a removal, in order
    anomalies: list[dict]
    quarantine: list[dict]
    clock_skew: list[dict]
    storm_rules: StormRules
    filters: Filters
    hidden_groups: int = 0                   # groups left out by max_groups

    @property
    def rebalances(self) -> list[dict]:
        return [r for g in self.groups for r in g.rebalances]

    @property
    def removals(self) -> list[dict]:
        return [r for g in self.groups for r in g.removals]

    @property
    def clusters(self) -> list[str]:
        return sorted({g.cluster for g in self.groups} | {a["cluster"] for a in self.anomalies})


def rebalance_times(r: dict) -> tuple[int | None, ...]:
    return (r.get("started_at_ms"), r.get("join_completed_at_ms"), r.get("assigned_at_ms"),
            r.get("completed_at_ms"), r.get("ended_at_ms"))


def rebalance_start(r: dict) -> int | None:
    """The first time a rebalance record knows (its start, else the first phase boundary seen)."""
    return next((t for t in rebalance_times(r) if t is not None), None)


def _read_jsonl(path: Path) -> Iterator[dict]:
    with open(path, "rb") as handle:
        for number, raw in enumerate(handle, 1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise ReportInputError(f"{path}:{number}: not UTF-8 text (expected JSON lines)") from None
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ReportInputError(f"{path}:{number}: not a JSON object ({exc.msg})") from None
            if not isinstance(record, dict):
                raise ReportInputError(f"{path}:{number}: not a JSON object")
            yield record


def _read_sink(path: Path, kind: str, attempts: int = 3) -> list[dict]:
    """One kind of a live sink: its rolled files and the parts none covers (sinks/event_sink.py),
    each record once. A file deleted while it is read (a roll, which writes the rolled file first,
    or retention) means the listing is stale: it is read again."""
    for _ in range(attempts - 1):
        try:
            return [r for f in sink_files(path, kind) for r in _read_jsonl(f.path)]
        except FileNotFoundError:
            continue
    return [r for f in sink_files(path, kind) for r in _read_jsonl(f.path)]


def input_layout(path: Path) -> str:
    """"replay" (a replay's --out directory), "sink" (an events_dir) or an error naming what was
    expected."""
    if not path.is_dir():
        raise ReportInputError(f"{path}: not a directory (expected a replay's --out directory or a "
                               f"live event sink, events_dir)")
    if (path / "rebalances.jsonl").is_file():
        return "replay"
    if (path / RECORD_FILES[OutputKind.REBALANCE]).is_dir():
        return "sink"
    raise ReportInputError(f"{path}: neither a replay output directory (no rebalances.jsonl) nor an "
                           f"event sink (no rebalances/ folder of batch-*.jsonl and rolled-*.jsonl files)")


def read_records(path: Path) -> tuple[dict[str, list[dict]], list[dict]]:
    """(records per kind, group snapshots) of one input directory."""
    layout = input_layout(path)
    records: dict[str, list[dict]] = {}
    for kind in KINDS:
        file = path / f"{RECORD_FILES[kind]}.jsonl"
        if layout == "sink":
            records[kind] = _read_sink(path, kind)
        else:
            records[kind] = list(_read_jsonl(file)) if file.is_file() else []
    snapshots = list(_read_jsonl(path / GROUPS_FILE)) if (path / GROUPS_FILE).is_file() else []
    return records, snapshots


_REQUIRED: dict[str, tuple[str, ...]] = {OutputKind.REBALANCE: ("cluster", "group", "protocol", "outcome", "trigger"),
             OutputKind.REMOVAL: ("cluster", "group", "member_id", "removed_at_ms", "cause")}


def _check(kind: str, records: list[dict], source: Path) -> None:
    for record in records:
        missing = [k for k in _REQUIRED.get(kind, ()) if record.get(k) is None]
        if missing:
            raise ReportInputError(f"{source}: a {RECORD_FILES[kind]} record without {', '.join(missing)}: "
                                   f"{json.dumps(record)[:200]}")
    if kind == OutputKind.REBALANCE:
        for record in records:
            if rebalance_start(record) is None and record["outcome"] != Outcome.IN_PROGRESS:
                raise ReportInputError(f"{source}: a rebalance record without any time: {json.dumps(record)[:200]}")


def _keep(filters: Filters, cluster: str, group: str | None, first: int | None, last: int | None) -> bool:
    if filters.cluster is not None and cluster != filters.cluster:
        return False
    if filters.group is not None and (group is None or not filters.group.search(group)):
        return False
    if filters.since_ms is not None and last is not None and last < filters.since_ms:
        return False
    return not (filters.until_ms is not None and first is not None and first > filters.until_ms)


def _rebalance_span(r: dict) -> tuple[int | None, int | None]:
    times = [t for t in rebalance_times(r) if t is not None]
    return (min(times), max(times)) if times else (None, None)


def group_storms(starts: list[int], rules: StormRules) -> list[tuple[int, int, int]]:
    """Runs of rebalance starts in which more than `rules.rebalances` fall within `rules.window_ms`,
    merged: (first start, last start, rebalances in the run)."""
    starts = sorted(starts)
    runs: list[list[int]] = []
    lo = 0
    for hi in range(len(starts)):
        while starts[hi] - starts[lo] > rules.window_ms:
            lo += 1
        if hi - lo + 1 > rules.rebalances:
            if runs and lo <= runs[-1][1]:
                runs[-1][1] = hi
            else:
                runs.append([lo, hi])
    return [(starts[a], starts[b], b - a + 1) for a, b in runs]


def build(paths: list[Path], filters: Filters | None = None, storm_rules: StormRules | None = None,
          max_groups: int | None = None) -> Report:
    """Read every input directory, keep what passes the filters, one GroupView per group."""
    return build_from([(path, *read_records(path)) for path in paths], filters, storm_rules, max_groups)


def build_from(inputs: list[tuple[Path, dict[str, list[dict]], list[dict]]], filters: Filters | None = None,
               storm_rules: StormRules | None = None, max_groups: int | None = None) -> Report:
    """The report of records already read: (source, records per kind, group snapshots) per input, as
    read_records gives them (a replay's, from memory, without reading its files back)."""
    filters, storm_rules = filters or Filters(), storm_rules or StormRules()
    merged: dict[str, list[dict]] = {kind: [] for kind in KINDS}
    snapshots: dict[tuple[str, str], dict] = {}
    paths = [path for path, _, _ in inputs]
    for path, records, snaps in inputs:
        for kind in KINDS:
            rows = records.get(kind, [])
            _check(kind, rows, path)
            merged[kind] += rows
        snapshots.update({(s["cluster"], s["group"]): s for s in snaps if "cluster" in s and "group" in s})
    views: dict[tuple[str, str], GroupView] = {}
    merged[OutputKind.REBALANCE] = apply_rebalance_costs(
        apply_trigger_decisions(merged[OutputKind.REBALANCE], merged[OutputKind.REBALANCE_TRIGGER]),
        merged[OutputKind.REBALANCE_COST], merged[OutputKind.CATCH_UP])
    for r in merged[OutputKind.REBALANCE]:
        if _keep(filters, r["cluster"], r["group"], *_rebalance_span(r)):
            views.setdefault((r["cluster"], r["group"]), GroupView(r["cluster"], r["group"])).rebalances.append(r)
    for r in merged[OutputKind.REMOVAL]:
        if _keep(filters, r["cluster"], r["group"], r["removed_at_ms"], r["removed_at_ms"]):
            views.setdefault((r["cluster"], r["group"]), GroupView(r["cluster"], r["group"])).removals.append(r)
    for view in views.values():
        view.rebalances.sort(key=lambda r: (rebalance_start(r) or 0, r.get("generation") or 0))
        view.removals.sort(key=lambda r: (r["removed_at_ms"], r["member_id"]))
        view.snapshot = snapshots.get(view.key)
        view.storms = group_storms([t for r in view.rebalances if (t := rebalance_start(r)) is not None],
                                   storm_rules)
    ordered = sorted(views.values(), key=lambda v: (v.cluster, v.first_ms(), v.group))
    hidden = 0
    if max_groups is not None and len(ordered) > max_groups:
        keep = {v.key for v in sorted(ordered, key=lambda v: v.attention(), reverse=True)[:max_groups]}
        hidden = len(ordered) - len(keep)
        ordered = [v for v in ordered if v.key in keep]

    def kept(rows: list[dict], time_key: str, with_group: bool = True) -> list[dict]:
        return [r for r in rows if _keep(filters, r.get("cluster") or "", r.get("group") if with_group else None,
                                         r.get(time_key), r.get(time_key))]
    no_group = Filters(filters.since_ms, filters.until_ms, None, filters.cluster)
    return Report(
        sources=[str(p) for p in paths], groups=ordered,
        anomalies=kept(merged[OutputKind.ANOMALY], "ts_ms"),
        quarantine=[r for r in merged[OutputKind.QUARANTINE]
                    if _keep(no_group, r.get("cluster") or "", None, r.get("ts_ms"), r.get("ts_ms"))],
        clock_skew=kept(merged[OutputKind.CLOCK_SKEW], "ts_ms"),
        storm_rules=storm_rules, filters=filters, hidden_groups=hidden)


def fleet_bins(rebalances: list[dict], bin_ms: int) -> dict[int, dict[str, Any]]:
    """Per bin start: rebalances by trigger, the groups that started one, and the partition-seconds
    those rebalances stopped (docs/impact.md)."""
    bins: dict[int, dict[str, Any]] = {}
    for r in rebalances:
        start = rebalance_start(r)
        if start is None:
            continue
        b = bins.setdefault(start - start % bin_ms, {"triggers": {}, "groups": set(), "partition_seconds": 0.0})
        b["triggers"][r["trigger"]] = b["triggers"].get(r["trigger"], 0) + 1
        b["groups"].add(r["group"])
        b["partition_seconds"] += r.get("partition_seconds_stopped") or 0.0
    return bins
