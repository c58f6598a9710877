"""What a rebalance cost in records: `records_delayed`, the records that arrived on the partitions
it stopped while each was stopped (pure Python; `run` only, docs/impact.md "Records delayed").

The state machine says when each partition a measured classic rebalance ended the stop of had
stopped (a PARTITION_STOPS row: every stop ends at the rebalance's completion); the driver's lag
sampler knows the partitions' end offsets over the last HISTORY_SAMPLES samples (state/lag.py).
A partition's delayed records are its end offset at the completion minus its end offset when it
stopped, each interpolated between the samples around it. So a rebalance waits here until a
sample at or after its completion has come (about one sampling interval), then its
rebalance_cost record goes out, once:

- measured: `records_delayed` and the figure per topic;
- not measurable: null, and `records_delayed_unknown_reason` says why (a stop older than the
  kept samples, such as a backlog read long after; a partition whose end offsets could not be
  had; no sample after the completion within MAX_WAIT_SAMPLES intervals).

Not measured: consumer (KIP-848) groups, whose partitions stop and resume at moments of their
own, and what a later poll-timeout decision adds to a leave's stops (rebalance_trigger records).
"""
from __future__ import annotations

from typing import Any

from state.lag import END_LATER, LagBook
from state.outputs import rebalance_cost_record

# A rebalance waits at most this many sampling intervals after its completion for a sample.
MAX_WAIT_SAMPLES = 3
# Rebalances waiting at most (a burst beyond it: the oldest go out unmeasured).
MAX_PENDING = 10_000
REASON_TOO_MANY = "too_many_waiting"


class RebalanceCosts:
    """The PARTITION_STOPS rows waiting for the end offsets around their stops."""

    def __init__(self, sample_seconds: float) -> None:
        self.max_wait_s = MAX_WAIT_SAMPLES * sample_seconds
        self.pending: list[dict[str, Any]] = []

    def note(self, stops: dict[str, Any]) -> None:
        self.pending.append(stops)

    def due(self, book: LagBook, now_s: float) -> list[dict[str, Any]]:
        """The rebalance_cost records that can be had at `now_s` (Unix seconds); the others wait."""
        out: list[dict[str, Any]] = []
        now_ms = int(now_s * 1000)
        while len(self.pending) > MAX_PENDING:
            out.append(rebalance_cost_record(self.pending.pop(0), None, {}, REASON_TOO_MANY, now_ms))
        waiting = []
        for stops in self.pending:
            record = self._measure(book, stops, now_s)
            if record is None:
                waiting.append(stops)
            else:
                out.append(record)
        self.pending = waiting
        return out

    def _measure(self, book: LagBook, stops: dict[str, Any], now_s: float) -> dict[str, Any] | None:
        end_s = stops["completed_at_ms"] / 1000
        asks = []
        for topic, partition, stopped_at_ms in stops["stops"]:
            asks += [((topic, partition), min(stopped_at_ms / 1000, end_s)), ((topic, partition), end_s)]
        ends = book.ends_at(stops["cluster"], asks)
        reason = next((e for e in ends if isinstance(e, str) and e != END_LATER), None)
        if reason is None and END_LATER in ends:
            if now_s - end_s <= self.max_wait_s:
                return None
            reason = END_LATER
        if reason is not None:
            return rebalance_cost_record(stops, None, {}, reason, int(now_s * 1000))
        by_topic: dict[str, int] = {}
        for i, (topic, _, _) in enumerate(stops["stops"]):
            start, end = ends[2 * i], ends[2 * i + 1]
            assert isinstance(start, int) and isinstance(end, int)
            by_topic[topic] = by_topic.get(topic, 0) + max(0, end - start)
        return rebalance_cost_record(stops, sum(by_topic.values()), by_topic, None, int(now_s * 1000))


def _key(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["cluster"], r["group"], r.get("generation"), r.get("started_at_ms"))


def apply_rebalance_costs(rebalances: list[dict[str, Any]], costs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rebalance records with what their rebalance_costs record says (`records_delayed`, and
    `records_delayed_unknown_reason` when null): what `report` shows of an event sink."""
    by_key = {_key(c): c for c in costs}
    out = []
    for r in rebalances:
        cost = by_key.get(_key(r))
        if cost is not None:
            r = {**r, "records_delayed": cost.get("records_delayed"),
                 "records_delayed_unknown_reason": cost.get("records_delayed_unknown_reason")}
        out.append(r)
    return out

