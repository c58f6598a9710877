"""Run the state machine over already-parsed events without Spark (streaming/app/local.py reads
and parses files for it).

Same semantics as the streaming job: events grouped by (cluster, group), applied in
Event.sort_key order, then the clock advanced past every deadline; removal records then go
through the cross-group correlator (state/diagnosis/correlate.py) like in the driver.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from state import events as E
from state.diagnosis.brokers import broker_record
from state.diagnosis.correlate import correlate_all
from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.machine import run_turn
from state.model import GroupModel
from state.outputs import OutputKind, apply_trigger_decisions, snapshot

# Past every deadline: the replay's end of input.
FAR_FUTURE_MS = E.END_OF_INPUT_TS_MS


def run_events(events: Iterable[E.Event], settings: DiagnosisSettings = DEFAULT_SETTINGS
               ) -> dict[str, list[dict[str, Any]]]:
    by_group: dict[tuple[str, str], list[E.Event]] = defaultdict(list)
    brokers: list[dict[str, Any]] = []
    for ev in events:
        if ev.group == E.BROKER_EVENTS_GROUP:
            brokers.append(broker_record(ev.cluster, ev.ts_ms, ev.kind, ev.broker, ev.data))
        elif ev.group is not None and ev.kind != E.END_OF_INPUT:
            by_group[(ev.cluster, ev.group)].append(ev)
    kinds = (OutputKind.REBALANCE, OutputKind.REMOVAL, OutputKind.REBALANCE_TRIGGER, OutputKind.ANOMALY,
             OutputKind.CLOCK_SKEW, OutputKind.SNAPSHOT, OutputKind.PARTITION_STOPS)
    out: dict[str, list[dict[str, Any]]] = {str(k): [] for k in kinds}
    for (cluster, group), evs in sorted(by_group.items()):
        machine = run_turn(GroupModel(cluster=cluster, group=group), evs, settings, FAR_FUTURE_MS)
        for kind, record in machine.outputs + machine.observations:
            out[kind].append(record)
        out[OutputKind.SNAPSHOT].append(snapshot(machine.m))
    # Cross-group root causes (host-wide, coordinator-wide), as the streaming driver applies them.
    out[OutputKind.REMOVAL] = correlate_all(out[OutputKind.REMOVAL], settings, brokers)
    # The rebalances as the replay files show them: with their decided triggers.
    out[OutputKind.REBALANCE] = apply_trigger_decisions(out[OutputKind.REBALANCE], out[OutputKind.REBALANCE_TRIGGER])
    return out
