"""The provisional ("live") view of a group: what is known now, before the watermark.

Final records wait in the group's state until the watermark passes their events (so they do not
depend on how the input was cut into batches) and removals wait for their decision windows.
The live view does not wait: it is the group's model with the events still held applied to a
throwaway copy, in the same (ts, source, seq) order, and the removals not yet final listed with
their cause and the root cause `pending`.

It is a gauge-only view: nothing of it is counted or written to the event sink, so a batch Spark
re-runs after a crash, or a restart in the middle of provisional state, cannot count anything
twice. When the watermark passes the held events the final model catches up with it; at the end
of a finite input both are the same model.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from state import events as E
from state.diagnosis.rules import DiagnosisSettings
from state.model import GroupModel
from state.outputs import OutputKind, snapshot

PENDING = "pending"     # the root cause of a removal whose decision window is still open


def pending_removals(model: GroupModel, released: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The removals the model holds for their decision window, with the cause the line gave, and
    those the live turn `released` (no decision window: a rebalance timeout), which the final
    model releases only when the watermark passes them."""
    out = []
    for rec, decide_at in [*((h.rec, h.decide_at) for h in model.held_removals),
                           *((r, r["removed_at_ms"]) for r in released)]:
        # the client's host and session: the incident board (state/incidents.py) weighs them now
        out.append({"member_id": rec["member_id"], "client_id": rec.get("client_id"),
                    "client_host": rec.get("client_host"), "group_instance_id": rec.get("group_instance_id"),
                    "session_timeout_ms": rec.get("session_timeout_ms"), "host_members": rec.get("host_members"),
                    "cause": rec["cause"], "removed_at_ms": rec["removed_at_ms"],
                    "root_cause": PENDING, "decide_at_ms": decide_at})
    return out


def live_snapshot(final: GroupModel, waiting: Iterable[E.Event], settings: DiagnosisSettings,
                  final_through_ms: int | None) -> dict[str, Any]:
    """The group's snapshot with every held event applied (final model untouched).

    `final` is the model after the events the watermark has passed; `waiting` the events still
    held. Keys beyond the final snapshot appear only while something is provisional, so a
    snapshot with nothing held is byte-identical to the final one (groups.jsonl).
    """
    from state.machine import run_turn   # core imports outputs; keep this module light

    events = list(waiting)
    model = final
    released: list[dict[str, Any]] = []
    if events:
        model = final.copy()
        machine = run_turn(model, events, settings)
        released = [rec for kind, rec in machine.outputs if kind == OutputKind.REMOVAL]
    snap = snapshot(model)
    pending = pending_removals(model, released)
    if pending:
        snap["pending_removals"] = pending
    if events:
        snap["provisional_events"] = len(events)
        snap["final_through_ms"] = final_through_ms
    return snap
