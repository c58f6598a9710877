"""The clock-skew probe: a log line and the offsets record the coordinator wrote at the same moment.

The coordinator logs "Assignment received ... generation N" and appends the GroupMetadata record
of generation N within milliseconds ("is now empty" and the empty record, "Bumped group epoch to
N" and the ConsumerGroupMetadata record likewise). Log times come from a zone-less header read in
the configured zone; record times are UTC. Their difference is the log source's clock or zone
error: a whole hour means a wrong broker_timezone.
"""
from __future__ import annotations

from typing import Any

from state import events as E
from state.model import GroupModel
from state.outputs import clock_skew_record

# Pairs waiting for their partner are kept for this many generations per kind.
SKEW_PROBE_KEEP = 8


def _probe_key(ev: E.Event) -> tuple[str, str] | None:
    """(side, "<pair>:<generation>") of an event that marks such a moment, else None."""
    d = ev.data
    if ev.kind in (E.ASSIGNMENT_RECEIVED, E.GROUP_EMPTY):
        return "log", f"classic{'0' if ev.kind == E.GROUP_EMPTY else '1'}:{ev.generation}"
    if ev.kind == E.GROUP_EPOCH_BUMPED:
        return "log", f"consumer:{ev.generation}"
    if ev.kind == E.GROUP_METADATA:
        return "rec", f"classic{'1' if d.get('members') else '0'}:{ev.generation}"
    if ev.kind == E.CG_EPOCH and not d.get("tombstone"):
        return "rec", f"consumer:{ev.generation}"
    return None


def probe_clock(model: GroupModel, ev: E.Event) -> dict[str, Any] | None:
    """The clock_skew record when `ev` completes a pair, else None (it may wait for its partner)."""
    if ev.generation is None:
        return None
    found = _probe_key(ev)
    if found is None:
        return None
    side, key = found
    probe = model.skew_probe
    mine, other = probe.setdefault(side, {}), probe.setdefault("rec" if side == "log" else "log", {})
    if key in other:
        log = other.pop(key) if side == "rec" else [ev.ts_ms, ev.data.get("log_host") or ev.source_id]
        record_ts = ev.ts_ms if side == "rec" else other.pop(key)
        return clock_skew_record(model, str(log[1]), key.split(":")[0], ev.generation, int(log[0]), int(record_ts))
    if key in mine:
        return None   # the first one counts (a static member replacement rewrites the record later)
    mine[key] = [ev.ts_ms, ev.data.get("log_host") or ev.source_id] if side == "log" else ev.ts_ms
    if len(mine) > SKEW_PROBE_KEEP:
        oldest = min(mine, key=lambda k: mine[k][0] if side == "log" else mine[k])
        del mine[oldest]
    return None
