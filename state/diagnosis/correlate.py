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

from state.diagnosis.brokers import BrokerLog
from state.outputs import OutputKind, upgrade_record
from state.diagnosis.rules import (
    REJOIN_FIELD, DEFAULT_SETTINGS, MAX_SESSION_LOOKAROUND_MS, DiagnosisSettings, _secs
)
from state.vocabulary import Confidence, RemovalCause, RootCause

INVOLUNTARY_ROOT_CAUSES = (RootCause.PROCESS_CRASH, RootCause.PROCESS_PAUSE, RootCause.HOST_WIDE,
                           RootCause.COORDINATOR_WIDE)


def is_candidate(rec: dict[str, Any]) -> bool:
    """An involuntary removal (expiry / session fence) of a dynamic member, or one that never
    stopped (back within a heartbeat interval: its group's verdict is unknown)."""
    return (rec.get("cause") == RemovalCause.HEARTBEAT_EXPIRY and rec.get("group_instance_id") is None
            and (rec.get("root_cause") in INVOLUNTARY_ROOT_CAUSES or rec.get(REJOIN_FIELD) is not None))


def came_back_later(rec: dict[str, Any]) -> bool:
    """Its own group saw it come back, later than a live member would: it stopped (a pause)."""
    return _group_root(rec) == RootCause.PROCESS_PAUSE


def back_at_ms(rec: dict[str, Any]) -> int | None:
    gap = rec.get(REJOIN_FIELD)
    return None if gap is None else int(rec["removed_at_ms"]) + int(gap)


class Correlator:
    def __init__(self, settings: DiagnosisSettings = DEFAULT_SETTINGS):
        self.s = settings
        self.window_ms = settings.correlation_window_ms()
        self.expiry_decision_ms = max(settings.pause_rejoin_window_ms, settings.coordinator_wide_window_ms)
        self.hold_ms = self.window_ms + self.expiry_decision_ms
        self.pending: list[dict[str, Any]] = []
        self.recent: list[dict[str, Any]] = []      # released candidates, for look-backs
        self.clock_ms: int | None = None
        # The brokers' own lines about their peers and themselves (state/diagnosis/brokers.py).
        self.brokers = BrokerLog()

    # --- persistence (the driver's state file) ------------------------------------------------
    def to_state(self) -> dict[str, Any]:
        return {"pending": self.pending, "recent": self.recent, "clock_ms": self.clock_ms,
                "brokers": self.brokers.to_state()}

    def load_state(self, state: dict[str, Any] | None) -> None:
        """The held removal records as a release wrote them, in today's shape (upgrade_record)."""
        state = state or {}
        self.pending = [upgrade_record(OutputKind.REMOVAL, r) for r in state.get("pending") or []]
        self.recent = [upgrade_record(OutputKind.REMOVAL, r) for r in state.get("recent") or []]
        self.clock_ms = state.get("clock_ms")
        self.brokers = BrokerLog.from_state(state.get("brokers"))

    def next_deadline_ms(self) -> int | None:
        """The event time the watermark must pass for the next held record to be decided."""
        return min(r["removed_at_ms"] for r in self.pending) + self.hold_ms if self.pending else None

    # --- flow ---------------------------------------------------------------------------------
    def note_brokers(self, records: Iterable[dict[str, Any]]) -> None:
        """Broker lifecycle records (OutputKind.BROKER_EVENT) of a batch."""
        self.brokers.add(records)

    def add(self, records: Iterable[dict[str, Any]]) -> None:
        for r in records:
            if r.get("group_root_cause") is None:     # a record of a release before the field
                r["group_root_cause"] = r.get("root_cause")
            self.pending.append(r)

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
        oldest = min((r["removed_at_ms"] for r in self.pending), default=self.clock_ms)
        self.brokers.prune(min(oldest, self.clock_ms - self.hold_ms) - self.window_ms - self.s.broker_death_window_ms)
        return decided

    # --- rules --------------------------------------------------------------------------------
    def _host_window(self, rec: dict[str, Any]) -> int:
        if self.s.host_wide_window_ms:
            return self.s.host_wide_window_ms
        session = rec.get("session_timeout_ms") or self.s.consumer_session_timeout_ms
        return min(session, MAX_SESSION_LOOKAROUND_MS)

    def _classify(self, rec: dict[str, Any], pool: _Pool) -> None:
        # The coordinator's own evidence first: members that expire while their coordinator moves
        # share a cause whatever their addresses.
        if rec.get("group_root_cause") == RootCause.COORDINATOR_WIDE or self._coordinator_stall(rec, pool):
            return
        # A member its group saw come back later than a live one would paused on its own: a burst
        # of its coordinator's groups does not explain it (it still counts in the burst).
        if not came_back_later(rec) and self._coordinator_burst(rec, pool):
            return
        self._host_wide(rec, pool)

    def _coordinator_stall(self, rec: dict[str, Any], pool: _Pool) -> bool:
        """A broker of the cluster died shortly before: members of several groups of one
        coordinator expired together, or this one never stopped (it came back within a heartbeat
        interval). Its coordinator could not commit its writes, nor answer heartbeats, while the
        dead broker was still an in-sync replica of its __consumer_offsets partitions. A member
        that came back only later stopped on its own (a pause), stall or not."""
        t, cluster, coordinator = rec["removed_at_ms"], rec["cluster"], rec.get("coordinator")
        death = self.brokers.death_before(cluster, t, self.s.broker_death_window_ms)
        if death is None:
            return False

        def back_in_time(r: dict[str, Any]) -> bool:
            """Back by the latest end of the stall plus one heartbeat interval."""
            back = back_at_ms(r)
            return back is not None and back <= death.at_ms + self.s.coordinator_stall_max_ms + \
                self.s.alive_rejoin_ms(r.get("protocol"))

        def own_pause(r: dict[str, Any]) -> bool:
            return came_back_later(r) and not back_in_time(r)
        if own_pause(rec):
            return False
        together = self.s.coordinator_stall_together_ms
        near = [] if coordinator is None else pool.around(("coordinator", cluster, coordinator), t, together)
        near = [r for r in near if r["removed_at_ms"] >= death.at_ms and not own_pause(r)]
        groups = sorted({r["group"] for r in near} | {rec["group"]})
        gap = rec.get(REJOIN_FIELD) if back_in_time(rec) else None
        if gap is None and len(groups) < self.s.coordinator_stall_min_groups:
            return False
        text = (f"broker {death.broker} died {_secs(t - death.at_ms)} before ({death.evidence}); "
                f"{len(groups)} group(s) of coordinator broker {coordinator if coordinator is not None else '?'} "
                f"lost members within {_secs(together)} of each other: "
                f"{', '.join(groups[:5])}{' …' if len(groups) > 5 else ''}")
        if gap is not None:
            text += (f"; it came back {_secs(gap)} after its removal, before the stall can have ended: it never "
                     "stopped, its coordinator did (it could not commit its writes, nor answer heartbeats, while "
                     "the dead broker was still an in-sync replica of its __consumer_offsets partitions)")
        why = ("a broker died just before, and the member never stopped" if gap is not None else
               "a broker died just before, and members of several groups of one coordinator were removed at once")
        self._override(rec, RootCause.COORDINATOR_WIDE, text, Confidence.MEDIUM, why)
        return True

    def _host_wide(self, rec: dict[str, Any], pool: _Pool) -> None:
        """A host's members removed together: how many, how close in time, what share of the host's
        members in those groups, and whether they met the same fate (all crashed or all paused)."""
        t, cluster, host = rec["removed_at_ms"], rec["cluster"], rec.get("client_host")
        if host is None or _group_root(rec) == RootCause.UNKNOWN:
            return      # (unknown: it never stopped, so neither did its host)
        w = self._host_window(rec)
        same_host = pool.around(("host", cluster, host), t, w)
        if len(same_host) < 2:
            return
        fates = {_group_root(r) for r in same_host}
        span = max(r["removed_at_ms"] for r in same_host) - min(r["removed_at_ms"] for r in same_host)
        groups = sorted({r["group"] for r in same_host})
        # Members of those groups on the host that were not removed (each group's largest count).
        known = {g: max((r.get("host_members") or 0 for r in same_host if r["group"] == g), default=0)
                 for g in groups}
        spared = sum(max(0, known[g] - sum(1 for r in same_host if r["group"] == g)) for g in groups)
        census = all(known[g] for g in groups)
        clients = {r.get("client_id") for r in same_host if r.get("client_id")}
        together = span <= self.s.host_wide_together_ms
        enough = len(same_host) >= self.s.host_wide_min_removals
        if len(fates) > 1:
            return      # some came back, some did not: no common cause on the host
        if not (enough or (together and census and spared == 0)):
            return
        if census and spared > len(same_host):
            return      # most of the host's members in these groups went on: independent failures
        if together and census and spared == 0:
            sure, why = (Confidence.HIGH if enough else Confidence.MEDIUM), (
                f"every member the host had in {'these groups' if len(groups) > 1 else 'the group'} was removed "
                f"within {span / 1000:.1f} s")
        elif together or (census and spared == 0):
            sure, why = Confidence.MEDIUM, "many of the host's members were removed close together"
        else:
            sure, why = Confidence.LOW, (f"{len(same_host)} removals on the host within {span / 1000:.1f} s; "
                                "independent failures close together look the same")
        detail = (f"{len(same_host)} members on host {host} were removed involuntarily within "
                  f"{span / 1000:.1f} s (window {w / 1000:.1f} s) in {len(groups)} group(s): "
                  f"{', '.join(groups[:5])}{' …' if len(groups) > 5 else ''}; "
                  f"{len(clients)} distinct client id(s); "
                  + (f"{spared} other member(s) of the host in these groups stayed" if census
                     else "the host's other members are not known"))
        self._override(rec, RootCause.HOST_WIDE, detail, sure, why)

    def _coordinator_burst(self, rec: dict[str, Any], pool: _Pool) -> bool:
        t, cluster, coordinator = rec["removed_at_ms"], rec["cluster"], rec.get("coordinator")
        if coordinator is None:
            return False
        w = self.s.coordinator_wide_window_ms
        key = ("coordinator", cluster, coordinator)
        same = pool.around(key, t, w)
        groups = sorted({r["group"] for r in same})
        hosts = {r.get("client_host") for r in same}
        background = self._background_groups(pool, key, t, w)
        if len(groups) >= self.s.coordinator_wide_min_groups \
                and len(hosts) >= self.s.coordinator_wide_min_groups \
                and len(groups) >= self.s.coordinator_wide_background_factor * background:
            self._override(rec, RootCause.COORDINATOR_WIDE,
                           f"{len(groups)} groups of coordinator broker {coordinator} lost members "
                           f"involuntarily within {w / 1000:.1f} s (threshold "
                           f"{self.s.coordinator_wide_min_groups}; background {background:.1f} groups per "
                           f"window), members on {len(hosts)} hosts: "
                           f"{', '.join(groups[:5])}{' …' if len(groups) > 5 else ''}",
                           Confidence.MEDIUM, "many groups of one coordinator lost members at once, on many hosts")
            return True
        return False

    def _background_groups(self, pool: _Pool, key: tuple[Any, ...], t: int, w: int) -> float:
        """Groups of the coordinator expected to lose a member in a window of 2w anyway: their
        rate over the baseline before [t - w, t + w] (from the first such removal on)."""
        base = pool.between(key, t - w - self.s.coordinator_wide_baseline_ms, t - w)
        if not base:
            return 0.0
        span: int = max(t - w - int(base[0]["removed_at_ms"]), w)
        return len({r["group"] for r in base}) * 2 * w / span

    @staticmethod
    def _override(rec: dict[str, Any], root: str, text: str, confidence: str, reason: str) -> None:
        if rec.get("root_cause") == root:
            return
        rec["evidence"] = f"{text} (per group: {rec.get('root_cause')}: {rec.get('evidence')})"
        rec["root_cause"] = root
        rec["root_cause_confidence"], rec["root_cause_confidence_reason"] = confidence, reason


def _group_root(r: dict[str, Any]) -> str | None:
    """The verdict of a removal's own group, before any cross-group override (`add` sets it on
    records of releases before the field)."""
    return r.get("group_root_cause") or r.get("root_cause")


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


def correlate_all(records: list[dict[str, Any]], settings: DiagnosisSettings = DEFAULT_SETTINGS,
                  brokers: Iterable[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """Every record at once (plain-Python pipeline, tests); `brokers`: the broker records."""
    c = Correlator(settings)
    c.note_brokers(brokers)
    c.add(records)
    return c.advance(2 ** 62)
