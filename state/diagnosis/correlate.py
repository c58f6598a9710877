"""Cross-group root causes: host-wide and coordinator-wide bursts (pure Python, no Spark).

The per-group state machine decides crash vs pause from the group's own events; a burst of such
involuntary removals on one client host, or in many groups of one coordinator, has a common cause
that overrides them. The per-group stateful function cannot see other groups, so the driver (and
the plain-Python pipeline) feed every released removal record to a `Correlator`.

Determinism regardless of batching: a removal at t is classified with every candidate removal of
its cluster in [t - W, t + W]. A candidate at t' <= t + W is released by its group once event
time passes t' + `expiry_decision_ms`, so the correlator holds each record until the clock (the
watermark, from the "clock" rows) passes t + W + expiry_decision_ms; then every record that can
matter is known. Released candidates are kept for W more for later look-backs.
"""
from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from typing import Any

from state.outputs import OutputKind, upgrade_record
from state.diagnosis.rules import (
    DEFAULT_SETTINGS, MAX_SESSION_LOOKAROUND_MS, DiagnosisSettings
)

INVOLUNTARY_ROOT_CAUSES = ("process_crash", "process_pause", "host_wide", "coordinator_wide")


def is_candidate(rec: dict[str, Any]) -> bool:
    """An involuntary removal (expiry / session fence) of a dynamic member."""
    return (rec.get("cause") == "heartbeat_expiry" and rec.get("group_instance_id") is None
            and rec.get("root_cause") in INVOLUNTARY_ROOT_CAUSES)


class Correlator:
    def __init__(self, settings: DiagnosisSettings = DEFAULT_SETTINGS):
        self.s = settings
        self.window_ms = settings.correlation_window_ms()
        self.expiry_decision_ms = max(settings.pause_rejoin_window_ms, settings.coordinator_wide_window_ms)
        self.hold_ms = self.window_ms + self.expiry_decision_ms
        self.pending: list[dict[str, Any]] = []
        self.recent: list[dict[str, Any]] = []      # released candidates, for look-backs
        self.clock_ms: int | None = None

    # --- persistence (the driver's state file) ------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return {"pending": self.pending, "recent": self.recent, "clock_ms": self.clock_ms}

    def load_state(self, state: dict[str, Any] | None) -> None:
        """The held removal records as a release wrote them, in today's shape (upgrade_record)."""
        state = state or {}
        self.pending = [upgrade_record(OutputKind.REMOVAL, r) for r in state.get("pending") or []]
        self.recent = [upgrade_record(OutputKind.REMOVAL, r) for r in state.get("recent") or []]
        self.clock_ms = state.get("clock_ms")

    def next_deadline_ms(self) -> int | None:
        """The event time the watermark must pass for the next held record to be decided."""
        return min(r["removed_at_ms"] for r in self.pending) + self.hold_ms if self.pending else None

    # --- flow ---------------------------------------------------------------------------------
    def add(self, records: Iterable[dict[str, Any]]) -> None:
        self.pending.extend(records)

    def advance(self, clock_ms: int | None) -> list[dict[str, Any]]:
        """Event time reached `clock_ms`: classify and return the records that are decided."""
        if clock_ms is not None:
            self.clock_ms = clock_ms if self.clock_ms is None else max(self.clock_ms, clock_ms)
        if self.clock_ms is None:
            return []
        ready = [r for r in self.pending if self.clock_ms > r["removed_at_ms"] + self.hold_ms]
        if not ready:
            return []
        self.pending = [r for r in self.pending if not self.clock_ms > r["removed_at_ms"] + self.hold_ms]
        pool = _Pool([r for r in self.recent + self.pending + ready if is_candidate(r)])
        decided = []
        for rec in sorted(ready, key=_order):
            if is_candidate(rec):
                self._classify(rec, pool)
            decided.append(rec)
        self.recent = [r for r in self.recent + [r for r in ready if is_candidate(r)]
                       if r["removed_at_ms"] >= self.clock_ms - self.hold_ms - self.window_ms
                       - self.s.coordinator_wide_baseline_ms]
        return decided

    # --- rules --------------------------------------------------------------------------------
    def _host_window(self, rec: dict[str, Any]) -> int:
        if self.s.host_wide_window_ms:
            return self.s.host_wide_window_ms
        session = rec.get("session_timeout_ms") or self.s.consumer_session_timeout_ms
        return min(session, MAX_SESSION_LOOKAROUND_MS)

    def _classify(self, rec: dict[str, Any], pool: _Pool) -> None:
        t, cluster = rec["removed_at_ms"], rec["cluster"]
        host = rec.get("client_host")
        if host is not None:
            w = self._host_window(rec)
            same_host = pool.around(("host", cluster, host), t, w)
            if len(same_host) >= self.s.host_wide_min_removals:
                groups = sorted({r["group"] for r in same_host})
                span = max(r["removed_at_ms"] for r in same_host) - min(r["removed_at_ms"] for r in same_host)
                self._override(rec, "host_wide",
                               f"{len(same_host)} members on host {host} were removed involuntarily within "
                               f"{span / 1000:.1f} s (window {w / 1000:.1f} s, threshold "
                               f"{self.s.host_wide_min_removals}) in {len(groups)} group(s): "
                               f"{', '.join(groups[:5])}{' …' if len(groups) > 5 else ''}")
                return
        coordinator = rec.get("coordinator")
        if coordinator is not None:
            w = self.s.coordinator_wide_window_ms
            key = ("coordinator", cluster, coordinator)
            same = pool.around(key, t, w)
            groups = sorted({r["group"] for r in same})
            hosts = {r.get("client_host") for r in same}
            background = self._background_groups(pool, key, t, w)
            if len(groups) >= self.s.coordinator_wide_min_groups \
                    and len(hosts) >= self.s.coordinator_wide_min_groups \
                    and len(groups) >= self.s.coordinator_wide_background_factor * background:
                self._override(rec, "coordinator_wide",
                               f"{len(groups)} groups of coordinator broker {coordinator} lost members "
                               f"involuntarily within {w / 1000:.1f} s (threshold "
                               f"{self.s.coordinator_wide_min_groups}; background {background:.1f} groups per "
                               f"window), members on {len(hosts)} hosts: "
                               f"{', '.join(groups[:5])}{' …' if len(groups) > 5 else ''}")

    def _background_groups(self, pool: _Pool, key: tuple[Any, ...], t: int, w: int) -> float:
        """Groups of the coordinator expected to lose a member in a window of 2w anyway: their
        rate over the baseline before [t - w, t + w] (from the first such removal on)."""
        base = pool.between(key, t - w - self.s.coordinator_wide_baseline_ms, t - w)
        if not base:
            return 0.0
        span: int = max(t - w - int(base[0]["removed_at_ms"]), w)
        return len({r["group"] for r in base}) * 2 * w / span

    @staticmethod
    def _override(rec: dict[str, Any], root: str, text: str) -> None:
        if rec.get("root_cause") == root:
            return
        rec["evidence"] = f"{text} (per group: {rec.get('root_cause')}: {rec.get('evidence')})"
        rec["root_cause"] = root


class _Pool:
    """The candidate removals indexed by (cluster, host) and (cluster, coordinator), each sorted by
    removal time: the records of one key within +-w of t are a bisected slice, so classifying n
    removals costs n log n plus the bursts they find, not n x pool (issue 15: 10,000 expiries
    decided at once took 74 s)."""

    def __init__(self, records: list[dict[str, Any]]) -> None:
        index: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for r in records:
            if r.get("client_host") is not None:
                index.setdefault(("host", r["cluster"], r["client_host"]), []).append(r)
            if r.get("coordinator") is not None:
                index.setdefault(("coordinator", r["cluster"], r["coordinator"]), []).append(r)
        self._records = {k: sorted(v, key=lambda r: r["removed_at_ms"]) for k, v in index.items()}
        self._times = {k: [r["removed_at_ms"] for r in v] for k, v in self._records.items()}

    def around(self, key: tuple[Any, ...], t: int, w: int) -> list[dict[str, Any]]:
        """The records of `key` in [t - w, t + w]."""
        times = self._times.get(key)
        if not times:
            return []
        return self._records[key][bisect_left(times, t - w):bisect_right(times, t + w)]

    def between(self, key: tuple[Any, ...], start: int, end: int) -> list[dict[str, Any]]:
        """The records of `key` in [start, end), oldest first."""
        times = self._times.get(key)
        if not times:
            return []
        return self._records[key][bisect_left(times, start):bisect_left(times, end)]


def _order(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["removed_at_ms"], r["cluster"], r["group"], r["member_id"], r.get("seq") or 0)


def correlate_all(records: list[dict[str, Any]], settings: DiagnosisSettings = DEFAULT_SETTINGS
                  ) -> list[dict[str, Any]]:
    """Every record at once (plain-Python pipeline, tests)."""
    c = Correlator(settings)
    c.add(records)
    return c.advance(2 ** 62)
