"""The few broker lines that are not the group coordinator's but say when a broker died
(state/diagnosis/brokers.py reads deaths from them; docs/diagnosis.md, "The coordinator stall").

  * a peer's replica fetcher (or the ZooKeeper-mode controller's channel) cannot reach a broker
    (org.apache.kafka.clients.NetworkClient): `[ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0]
    Connection to node 2 (/10.0.0.2:9092) could not be established. Node may not be available.`
    (2.x-3.x: `Broker may not be available.`), `[Controller id=1, targetBrokerId=2] Connection to ...`;
  * a __consumer_offsets partition's leader drops a follower from its ISR (kafka.cluster.Partition):
    `[Partition __consumer_offsets-7 broker=1] Shrinking ISR from 1,2 to 1. Leader: (...). Out of
    sync replicas: (brokerId: 2, endOffset: 10, lastCaughtUpTimeMs: 1700000000000).` (other
    topics' shrinks say nothing about a coordinator and are not read);
  * the controller fencing a broker whose session lapsed (KRaft QuorumController: `Fencing broker 2
    at epoch 29 because its session has timed out.`) or seeing it unregistered (the ZooKeeper-mode
    controller: `Newly added brokers: , deleted brokers: 2, bounced brokers: ...`), in the
    controller's own log, when it is shipped;
  * a broker's own start and controlled shutdown lines (kafka.server.BrokerServer, KafkaServer):
    `[BrokerServer id=2] Transition from SHUTDOWN to STARTING`, `... from STARTED to
    SHUTTING_DOWN`, and ZooKeeper mode's `[KafkaServer id=2] starting` / `shutting down` / `started`.

Every such line contains one of layout.BROKER_LINE_MARKERS: the readers and the Spark job's filter keep
the lines with one (streaming/logs/merge.py, streaming/spark/steps.py), so these few reach the
parse step beside the coordinator's, and the rest of a broker's log still does not.
"""
from __future__ import annotations

import re

from state import events as E
from state.events import Event


_UNREACHABLE = re.compile(
    r"\[(?:ReplicaFetcher replicaId=(?P<fetcher>\d+), leaderId=\d+, fetcherId=\d+"
    r"|Controller id=(?P<controller>\d+), targetBrokerId=\d+)\] "
    r"Connection to node (?P<subject>\d+) \(.*\) could not be established\. (?:Node|Broker) may not be available\.")
_SHRINK = re.compile(
    r"\[Partition __consumer_offsets-(?P<partition>\d+) broker=(?P<broker>\d+)\] "
    r"Shrinking ISR from (?P<before>[\d,]+) to (?P<after>[\d,]*)\b(?P<rest>.*)")
_OUT_OF_SYNC = re.compile(r"\(brokerId: (?P<id>\d+), endOffset: -?\d+(?:, lastCaughtUpTimeMs: (?P<ms>-?\d+))?\)")
_FENCED = re.compile(r"\[QuorumController id=(?P<broker>\d+)\] Fencing broker (?P<subject>\d+) at epoch -?\d+ "
                     r"because its session has timed out\.")
_DELETED = re.compile(r"\[Controller id=(?P<broker>\d+)\] Newly added brokers: [\d, ]*, "
                      r"deleted brokers: (?P<deleted>[\d, ]*), ")
_KRAFT = re.compile(r"\[BrokerServer id=(?P<broker>\d+)\] Transition from (?P<from>\w+) to (?P<to>\w+)")
_ZK = re.compile(r"\[KafkaServer id=(?P<broker>\d+)\] (?P<what>starting|shutting down|started)")

_KRAFT_KINDS = {("SHUTDOWN", "STARTING"): E.BROKER_STARTING, ("STARTED", "SHUTTING_DOWN"): E.BROKER_SHUTTING_DOWN,
                ("STARTING", "SHUTTING_DOWN"): E.BROKER_SHUTTING_DOWN}
_ZK_KINDS = {"starting": E.BROKER_STARTING, "shutting down": E.BROKER_SHUTTING_DOWN, "started": E.BROKER_STARTED}


def broker_events(message: str, ts_ms: int, source_id: str, seq: int, precision: int = 1) -> list[Event]:
    """The broker events of one message (the text after the layout's header); [] for any other.
    `precision`: how many ms the line's time spans (1000 in a layout without milliseconds), kept
    in data[TS_PRECISION] as for the coordinator's events."""
    def _event(kind: str, ts_ms: int, broker: int, source_id: str, seq: int, **data: int) -> Event:
        fields: dict[str, int] = dict(data)
        if precision > 1:
            fields[E.TS_PRECISION] = precision
        return Event(group=E.BROKER_EVENTS_GROUP, ts_ms=ts_ms, source=E.SOURCE_LOG, source_id=source_id, seq=seq,
                     kind=kind, broker=broker, data=fields)

    if " could not be established. " in message:
        m = _UNREACHABLE.match(message)
        return [] if m is None else [_event(E.BROKER_UNREACHABLE, ts_ms, int(m["fetcher"] or m["controller"]),
                                            source_id, seq, subject=int(m["subject"]))]
    if "Shrinking ISR from " in message:
        m = _SHRINK.match(message)
        if m is None:
            return []
        after = set(m["after"].split(","))
        caught_up = {int(o["id"]): int(o["ms"]) for o in _OUT_OF_SYNC.finditer(m["rest"]) if o["ms"] is not None}
        out = []
        for subject in (int(b) for b in m["before"].split(",") if b and b not in after):
            data = {"subject": subject, "partition": int(m["partition"])}
            if subject in caught_up:
                data["last_caught_up_ms"] = caught_up[subject]
            out.append(_event(E.BROKER_OUT_OF_SYNC, ts_ms, int(m["broker"]), source_id, seq, **data))
        return out
    if " because its session has timed out." in message:
        m = _FENCED.match(message)
        return [] if m is None else [_event(E.BROKER_FENCED, ts_ms, int(m["broker"]), source_id, seq,
                                            subject=int(m["subject"]))]
    if ", deleted brokers: " in message:
        m = _DELETED.match(message)
        return [] if m is None else [_event(E.BROKER_FENCED, ts_ms, int(m["broker"]), source_id, seq, subject=int(b))
                                     for b in m["deleted"].replace(" ", "").split(",") if b]
    m = _KRAFT.match(message)
    if m is not None:
        kind = _KRAFT_KINDS.get((m["from"], m["to"]))
        return [] if kind is None else [_event(kind, ts_ms, int(m["broker"]), source_id, seq)]
    m = _ZK.match(message)
    if m is not None and message.endswith(m["what"]):
        return [_event(_ZK_KINDS[m["what"]], ts_ms, int(m["broker"]), source_id, seq)]
    return []
