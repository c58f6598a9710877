"""The log/offsets cross-check: every classic generation should show up in both sources.

The log says a generation completed (or its JOIN phase ended); the offsets topic has its
GroupMetadata record. A generation seen in one source only, once both sources deliver events for
the group and a grace period has passed, is a `source_mismatch` anomaly: lines or records were
lost, filtered or never shipped.
"""
from __future__ import annotations

from typing import Any

from state import events as E
from state.model import GenerationCheck, GroupModel
from state.outputs import source_mismatch_record

# A classic generation seen in one source waits this long (event time) for the other source's
# evidence before it is flagged (the GroupMetadata record is appended within milliseconds of
# "Assignment received"; 10 s also covers small clock skew).
SOURCE_CHECK_GRACE_MS = 10_000

_LOG_EVIDENCE = (E.JOIN_COMPLETE, E.ASSIGNMENT_RECEIVED, E.GROUP_EMPTY, E.PREPARE_REBALANCE)


def both_sources(model: GroupModel) -> bool:
    return E.SOURCE_LOG in model.seen_sources and E.SOURCE_OFFSETS in model.seen_sources


def note_generation_evidence(model: GroupModel, ev: E.Event) -> None:
    """Note which source has shown the event's classic generation."""
    gen = ev.generation
    if gen is None or gen <= 0:
        return   # generation 0: the Java coordinator's creation record, no rebalance
    if model.checked_generation is not None and gen <= model.checked_generation:
        return   # a rewrite of a checked generation (static member replaced) or a late line
    if ev.source == E.SOURCE_LOG and ev.kind in _LOG_EVIDENCE:
        # "Preparing to rebalance ... old generation N" also shows N existed (e.g. the
        # record a consumer -> classic downgrade writes, whose next line is that one).
        side = "log"
    elif ev.source == E.SOURCE_OFFSETS and ev.kind == E.GROUP_METADATA:
        side = "offsets"
    else:
        return
    c = model.generation_checks.get(str(gen))
    if c is None:
        c = model.generation_checks[str(gen)] = GenerationCheck(
            log=False, log_completed=False, offsets=False, ts_ms=ev.ts_ms,
            due_ms=ev.ts_ms + SOURCE_CHECK_GRACE_MS, source_id=ev.source_id, seq=ev.seq)
    if side == "offsets":
        c.offsets = True
    else:
        c.log = True
        if ev.kind in (E.ASSIGNMENT_RECEIVED, E.GROUP_EMPTY):
            c.log_completed = True


def resolve_source_checks(model: GroupModel, now_ms: int) -> list[dict[str, Any]]:
    """Anomaly records of the generations whose grace has passed with evidence from one source
    only, when the group has events from both sources (otherwise a source is not configured)."""
    if not model.generation_checks:
        return []
    due = sorted((c.due_ms, int(g)) for g, c in model.generation_checks.items() if now_ms > c.due_ms)
    both = both_sources(model)
    anomalies = []
    for _, gen in due:
        c = model.generation_checks.pop(str(gen))
        model.checked_generation = gen if model.checked_generation is None else max(model.checked_generation, gen)
        if not both:
            continue
        if c.log_completed and not c.offsets:
            seen, missing = "log", "offsets"
        elif c.offsets and not c.log:
            seen, missing = "offsets", "logs"
        else:
            continue
        anomalies.append(source_mismatch_record(model, gen, c, seen, missing))
        model.source_mismatches += 1
    return anomalies
