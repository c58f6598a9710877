"""Broker deaths, read from the brokers' own lines about their peers and themselves (pure Python).

The parse step turns a few lines that are not the group coordinator's into broker events
(streaming/logs/brokers.py, state/events.py BROKER_KINDS): a peer's replica fetcher that cannot
reach a broker, a __consumer_offsets partition's leader dropping a follower from its ISR, a broker's
start-up banner, its controlled shutdown. They pass the stateful step as
records (OutputKind.BROKER_EVENT) and reach the driver's correlator, which keeps them here.

A broker died at the first report of a peer that lost it (the fetcher's failed connection, or the
ISR shrink, dated by the follower's last catch-up when the line gives it) that no controlled
shutdown of its own explains (its "shutting down" line since its last start). Reports of one
broker belong to one death until the broker starts again. A start-up banner with no shutdown
line since the broker's previous start confirms that it crashed.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from state import events as E

_PEER_REPORTS = (E.BROKER_UNREACHABLE, E.BROKER_OUT_OF_SYNC, E.BROKER_FENCED)
_OWN_STARTS = (E.BROKER_STARTING, E.BROKER_STARTED)


def broker_record(cluster: str, ts_ms: int, kind: str, broker: int | None, data: dict[str, Any]) -> dict[str, Any]:
    """A broker event as the record the stateful step passes to the driver."""
    return {"cluster": cluster, "ts_ms": ts_ms, "kind": kind, "broker": broker, **data}


@dataclass(frozen=True)
class BrokerDeath:
    cluster: str
    broker: int
    at_ms: int
    evidence: str        # in words, for the removal records it explains


def _clock(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%H:%M:%S.%f")[:-3]


def _report_ms(r: dict[str, Any]) -> int:
    """When the peer lost it: the follower's last catch-up, when the ISR shrink gives it."""
    caught_up = r.get("last_caught_up_ms")
    return min(int(caught_up), int(r["ts_ms"])) if isinstance(caught_up, int) and caught_up > 0 else int(r["ts_ms"])


def _how(r: dict[str, Any]) -> str:
    if r["kind"] == E.BROKER_UNREACHABLE:
        return f"broker {r.get('broker')} could not reach it from {_clock(int(r['ts_ms']))}"
    if r["kind"] == E.BROKER_FENCED:
        return f"controller {r.get('broker')} fenced or unregistered it at {_clock(int(r['ts_ms']))}"
    return (f"broker {r.get('broker')} dropped it from the ISR of __consumer_offsets-{r.get('partition')} at "
            f"{_clock(int(r['ts_ms']))}")


class BrokerLog:
    """The broker records of the recent past, per cluster, in time order."""

    def __init__(self, records: list[dict[str, Any]] | None = None) -> None:
        self.records: list[dict[str, Any]] = sorted(records or [], key=_order)
        self._deaths: dict[str, list[BrokerDeath]] = {}     # per cluster, until the records change

    def to_state(self) -> list[dict[str, Any]]:
        return self.records

    @classmethod
    def from_state(cls, state: list[dict[str, Any]] | None) -> BrokerLog:
        return cls(list(state or []))

    def add(self, records: Iterable[dict[str, Any]]) -> None:
        new = list(records)
        if new:
            self.records = sorted(self.records + new, key=_order)
            self._deaths = {}

    def prune(self, before_ms: int) -> None:
        """Forget what is older than `before_ms`, but each broker's newest start and shutdown
        (a later report must know whether a shutdown of its own explains it)."""
        keep_own: dict[tuple[str, int | None, str], dict[str, Any]] = {}
        for r in self.records:
            if r["kind"] not in _PEER_REPORTS:
                keep_own[(r["cluster"], r.get("broker"), r["kind"])] = r
        kept = {id(r) for r in keep_own.values()}
        records = [r for r in self.records if r["ts_ms"] >= before_ms or id(r) in kept]
        if len(records) != len(self.records):
            self.records, self._deaths = records, {}

    def deaths(self, cluster: str) -> list[BrokerDeath]:
        """Every death of a broker of `cluster` the records show, oldest first."""
        if cluster not in self._deaths:
            self._deaths[cluster] = self._read_deaths(cluster)
        return self._deaths[cluster]

    def _read_deaths(self, cluster: str) -> list[BrokerDeath]:
        out: list[BrokerDeath] = []
        shutdown: dict[int, int] = {}          # broker -> its last "shutting down" line
        open_death: dict[int, int] = {}        # broker -> index in `out` of its death, until it starts
        for r in self.records:
            if r["cluster"] != cluster:
                continue
            kind = r["kind"]
            if kind in _PEER_REPORTS:
                subject = r.get("subject")
                if not isinstance(subject, int) or subject in open_death:
                    continue
                at = _report_ms(r)
                if subject in shutdown and shutdown[subject] <= at:
                    continue        # its controlled shutdown began: planned, until it starts again
                open_death[subject] = len(out)
                out.append(BrokerDeath(cluster, subject, at, _how(r)))
                continue
            own = r.get("broker")
            if not isinstance(own, int):
                continue
            if kind == E.BROKER_SHUTTING_DOWN:
                shutdown[own] = int(r["ts_ms"])
            elif kind in _OWN_STARTS:
                # a shutdown before the broker's (re)start explains nothing after it
                planned = shutdown.pop(own, -1)
                i = open_death.pop(own, None)
                if i is not None and kind == E.BROKER_STARTING and planned < out[i].at_ms:
                    d = out[i]
                    out[i] = BrokerDeath(d.cluster, d.broker, d.at_ms, f"{d.evidence}; it started again at "
                                         f"{_clock(int(r['ts_ms']))} with no shutdown before")
        return out

    def death_before(self, cluster: str, t_ms: int, window_ms: int) -> BrokerDeath | None:
        """The latest death of a broker of `cluster` at most `window_ms` before `t_ms`."""
        found = [d for d in self.deaths(cluster) if d.at_ms <= t_ms <= d.at_ms + window_ms]
        return found[-1] if found else None


def _order(r: dict[str, Any]) -> tuple[Any, ...]:
    return (r["ts_ms"], r.get("source_id") or "", r.get("seq") or 0, r["kind"])
