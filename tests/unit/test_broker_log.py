"""Tests for streaming/logs (broker server.log -> group-coordinator Events).

Real lines are copied verbatim from tests/fixtures/kafka-{2.7,4.0}/*.log (the test checks that they
are still there). Lines for catalog entries the captures do not contain are built from the templates
in Kafka's own source (the log calls of its group coordinator); each says which Kafka version it
comes from.
"""
from __future__ import annotations

import collections
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from state import events as ev
from streaming.logs import catalog, files, layout, reasons
from streaming.logs import parser as bl
from streaming.logs.timeutil import log4j_to_epoch_ms
from streaming.quarantine import Quarantined
from tests.support.capture_expectations import FIXTURES

LOG_FILES = ["kafka-2.7/broker1-server.log", "kafka-2.7/broker2-server.log",
             "kafka-4.0/node1-server.log", "kafka-4.0/node2-server.log"]
UTC = ZoneInfo("UTC")
SCALA_GC = "kafka.coordinator.group.GroupCoordinator"
SCALA_GMM = "kafka.coordinator.group.GroupMetadataManager"
JAVA_GMM = "org.apache.kafka.coordinator.group.GroupMetadataManager"
TEMPLATE_TS = "2024-03-01 10:00:00,000"


def utc_ms(line: str) -> int:
    """Timestamp of a log line read as UTC, computed without the module under test."""
    ts = datetime.strptime(line[1:24], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=timezone.utc)
    return int(ts.timestamp() * 1000)


def events_of(line: str, *, source_id: str, seq: int, tz: tzinfo, default_broker: int | None = None) -> list[ev.Event]:
    """parse_line's result for a line the test expects to become events (neither ignored nor quarantined)."""
    result = bl.parse_line(line, source_id=source_id, seq=seq, tz=tz, default_broker=default_broker)
    assert isinstance(result, list), (line, result)
    return result


def scala(message: str, *, broker: int = 1, level: str = "INFO", logger: str = SCALA_GC) -> str:
    """A Scala GroupCoordinator line: `[GroupCoordinator <id>]: ` prefix."""
    return f"[{TEMPLATE_TS}] {level} [GroupCoordinator {broker}]: {message} ({logger})"


def scala_gmm(message: str, *, broker: int = 1, level: str = "INFO") -> str:
    return f"[{TEMPLATE_TS}] {level} [GroupMetadataManager brokerId={broker}] {message} ({SCALA_GMM})"


def unprefixed(message: str, logger: str, *, level: str = "INFO") -> str:
    return f"[{TEMPLATE_TS}] {level} {message} ({logger})"


def java(message: str, *, broker: int = 1, partition: int = 12, level: str = "INFO",
         logger: str = JAVA_GMM) -> str:
    """A Java coordinator line with the per-partition prefix."""
    return (f"[{TEMPLATE_TS}] {level} [GroupCoordinator id={broker} topic=__consumer_offsets "
            f"partition={partition}] {message} ({logger})")


@dataclass
class Case:
    entry: str                 # catalog entry name that must match
    origin: str                # fixture file, or "template <version>"
    line: str
    expected: list[dict[str, Any]] | None  # None: recognised, ignored


def E(kind: str, group: str, *, broker: int | None = 1, generation: int | None = None,
      member_id: str | None = None, reason: str | None = None, **data: Any) -> dict[str, Any]:
    return {"kind": kind, "group": group, "broker": broker, "generation": generation,
            "member_id": member_id, "reason": reason, "data": data}


MID_SC01 = "sc01-c1-50723939-8238-44f1-af4f-8a64270377a8"
MID_SC08 = "sc08-exp-c1-70b11e09-ec73-430b-84f9-4e385cd43d51"
MM_DYNAMIC = ("MemberMetadata(memberId=c-1-ab, groupInstanceId=None, clientId=c-1, clientHost=/10.0.0.1, "
              "sessionTimeoutMs=45000, rebalanceTimeoutMs=300000, supportedProtocols=List(range, cooperative-sticky))")
MM_STATIC = ("MemberMetadata(memberId=inst-1-ab, groupInstanceId=Some(inst-1), clientId=c-1, clientHost=/10.0.0.2, "
             "sessionTimeoutMs=45000, rebalanceTimeoutMs=300000, supportedProtocols=List(range))")

CASES: list[Case] = [
    # ---------------- classic rebalance lifecycle ----------------
    Case("scala_prepare_rebalance", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:21:58,686] INFO [GroupCoordinator 1]: Preparing to rebalance group sc08-offset-expiry in state PreparingRebalance with old generation 0 (__consumer_offsets-4) (reason: Adding new member sc08-exp-c1-70b11e09-ec73-430b-84f9-4e385cd43d51 with group instance id None) (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.PREPARE_REBALANCE, "sc08-offset-expiry", generation=0,
            reason=f"Adding new member {MID_SC08} with group instance id None",
            state="PreparingRebalance", offsets_partition=4, trigger="member_join", trigger_member=MID_SC08)]),
    Case("scala_prepare_rebalance", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:23:13,794] INFO [GroupCoordinator 1]: Preparing to rebalance group sc03-heartbeat-expiry in state PreparingRebalance with old generation 1 (__consumer_offsets-4) (reason: removing member sc03-c2-71387325-0692-46cd-be2c-72b58e7b893c on heartbeat expiration) (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.PREPARE_REBALANCE, "sc03-heartbeat-expiry", generation=1,
            reason="removing member sc03-c2-71387325-0692-46cd-be2c-72b58e7b893c on heartbeat expiration",
            state="PreparingRebalance", offsets_partition=4, trigger="heartbeat_expiry",
            trigger_member="sc03-c2-71387325-0692-46cd-be2c-72b58e7b893c")]),
    Case("scala_prepare_rebalance", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:22:10,557] INFO [GroupCoordinator 1]: Preparing to rebalance group sc08-offset-expiry in state PreparingRebalance with old generation 1 (__consumer_offsets-4) (reason: removing member sc08-exp-c1-70b11e09-ec73-430b-84f9-4e385cd43d51 on LeaveGroup) (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.PREPARE_REBALANCE, "sc08-offset-expiry", generation=1,
            reason=f"removing member {MID_SC08} on LeaveGroup", state="PreparingRebalance",
            offsets_partition=4, trigger="member_leave", trigger_member=MID_SC08)]),
    Case("scala_prepare_rebalance", "kafka-2.7/broker2-server.log",
         "[2026-11-21 19:25:41,159] INFO [GroupCoordinator 2]: Preparing to rebalance group sc05b-poll-timeout-kafka-python in state PreparingRebalance with old generation 2 (__consumer_offsets-5) (reason: leader sc05b-normal-f7d06270-7809-46e6-a2ac-6447b864ce45 re-joining group during Stable) (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.PREPARE_REBALANCE, "sc05b-poll-timeout-kafka-python", broker=2, generation=2,
            reason="leader sc05b-normal-f7d06270-7809-46e6-a2ac-6447b864ce45 re-joining group during Stable",
            state="PreparingRebalance", offsets_partition=5, trigger="leader_rejoin",
            trigger_member="sc05b-normal-f7d06270-7809-46e6-a2ac-6447b864ce45")]),
    Case("scala_prepare_rebalance", "template 3.2-4.0",  # KIP-800 client reason
         scala("Preparing to rebalance group g1 in state PreparingRebalance with old generation 4 (__consumer_offsets-12) "
               "(reason: Removing member c-1-ab on LeaveGroup; client reason: consumer poll timeout has expired.)"),
         [E(ev.PREPARE_REBALANCE, "g1", generation=4,
            reason="Removing member c-1-ab on LeaveGroup; client reason: consumer poll timeout has expired.",
            state="PreparingRebalance", offsets_partition=12, trigger="poll_timeout", trigger_member="c-1-ab",
            client_reason="consumer poll timeout has expired.")]),
    Case("scala_prepare_rebalance_no_reason", "template 2.0",
         scala("Preparing to rebalance group g1 with old generation 4 (__consumer_offsets-12)"),
         [E(ev.PREPARE_REBALANCE, "g1", generation=4, offsets_partition=12, trigger="unknown")]),
    Case("scala_prepare_rebalance_no_reason", "template 1.1",
         scala("Preparing to rebalance group g1 with old generation 0 (__consumer_offsets-3)", broker=0),
         [E(ev.PREPARE_REBALANCE, "g1", broker=0, generation=0, offsets_partition=3, trigger="unknown")]),
    Case("scala_stabilized", "template 1.1",
         scala("Stabilized group g1 generation 1 (__consumer_offsets-3)", broker=0),
         [E(ev.JOIN_COMPLETE, "g1", broker=0, generation=1, offsets_partition=3)]),
    Case("scala_assignment_received", "template 1.1",
         scala("Assignment received from leader for group g1 for generation 1", broker=0),
         [E(ev.ASSIGNMENT_RECEIVED, "g1", broker=0, generation=1)]),
    Case("scala_member_failed", "template 1.1",
         scala("Member c-1-ab in group g1 has failed, removing it from the group", broker=0),
         [E(ev.MEMBER_FAILED, "g1", broker=0, member_id="c-1-ab")]),
    Case("scala_member_left_2_0", "template 1.1 (DEBUG)",
         scala("Member c-1-ab in group g1 has left, removing it from the group", broker=0, level="DEBUG"),
         [E(ev.MEMBER_LEFT, "g1", broker=0, member_id="c-1-ab", pending=False)]),
    Case("java_prepare_rebalance", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:18:55,336] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=9] Preparing to rebalance group k4-sc01-single-join-leave in state PreparingRebalance with old generation 0 (reason: Adding new member sc01-c1-50723939-8238-44f1-af4f-8a64270377a8 with group instance id null; client reason: not provided). (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.PREPARE_REBALANCE, "k4-sc01-single-join-leave", generation=0,
            reason=f"Adding new member {MID_SC01} with group instance id null; client reason: not provided",
            state="PreparingRebalance", offsets_partition=9, trigger="member_join", trigger_member=MID_SC01,
            client_reason="not provided")]),
    Case("java_prepare_rebalance", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:21:09,894] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=8] Preparing to rebalance group k4-sc03-heartbeat-expiry in state PreparingRebalance with old generation 1 (reason: removing member sc03-c2-03c0e721-2df6-447f-810f-7181204b4f80 on heartbeat expiration.). (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.PREPARE_REBALANCE, "k4-sc03-heartbeat-expiry", broker=2, generation=1,
            reason="removing member sc03-c2-03c0e721-2df6-447f-810f-7181204b4f80 on heartbeat expiration.",
            state="PreparingRebalance", offsets_partition=8, trigger="heartbeat_expiry",
            trigger_member="sc03-c2-03c0e721-2df6-447f-810f-7181204b4f80")]),
    Case("java_prepare_rebalance", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:19:13,922] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=9] Preparing to rebalance group k4-sc01-single-join-leave in state PreparingRebalance with old generation 1 (reason: explicit `LeaveGroup` request for (sc01-c1-50723939-8238-44f1-af4f-8a64270377a8) members.). (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.PREPARE_REBALANCE, "k4-sc01-single-join-leave", generation=1,
            reason=f"explicit `LeaveGroup` request for ({MID_SC01}) members.", state="PreparingRebalance",
            offsets_partition=9, trigger="member_leave", trigger_member=MID_SC01, trigger_member_ids=[MID_SC01])]),
    Case("java_prepare_rebalance", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:20:06,917] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=6] Preparing to rebalance group k4-sc02-staggered-three in state PreparingRebalance with old generation 3 (reason: Leader sc02-c1-3baec6ed-7d65-44bc-b7c9-e4799bdf59d7 re-joining group during Stable; client reason: not provided). (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.PREPARE_REBALANCE, "k4-sc02-staggered-three", broker=2, generation=3,
            reason="Leader sc02-c1-3baec6ed-7d65-44bc-b7c9-e4799bdf59d7 re-joining group during Stable; client reason: not provided",
            state="PreparingRebalance", offsets_partition=6, trigger="leader_rejoin",
            trigger_member="sc02-c1-3baec6ed-7d65-44bc-b7c9-e4799bdf59d7", client_reason="not provided")]),
    Case("java_prepare_rebalance", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:31:38,747] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=6] Preparing to rebalance group k4-sc11-mixed-classic-first in state PreparingRebalance with old generation 2 (reason: Downgrade group k4-sc11-mixed-classic-first from consumer to classic.). (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.PREPARE_REBALANCE, "k4-sc11-mixed-classic-first", broker=2, generation=2,
            reason="Downgrade group k4-sc11-mixed-classic-first from consumer to classic.",
            state="PreparingRebalance", offsets_partition=6, trigger="group_conversion")]),
    Case("scala_stabilized", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:22:01,804] INFO [GroupCoordinator 1]: Stabilized group sc08-offset-expiry generation 1 (__consumer_offsets-4) (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.JOIN_COMPLETE, "sc08-offset-expiry", generation=1, offsets_partition=4)]),
    Case("scala_stabilized_with_members", "template 2.8-4.0",
         scala("Stabilized group g1 generation 5 (__consumer_offsets-12) with 3 members"),
         [E(ev.JOIN_COMPLETE, "g1", generation=5, offsets_partition=12, members=3)]),
    Case("java_stabilized", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:18:58,341] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=9] Stabilized group k4-sc01-single-join-leave generation 1 with 1 members. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.JOIN_COMPLETE, "k4-sc01-single-join-leave", generation=1, offsets_partition=9, members=1)]),
    Case("scala_assignment_received", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:22:02,153] INFO [GroupCoordinator 1]: Assignment received from leader for group sc08-offset-expiry for generation 1 (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.ASSIGNMENT_RECEIVED, "sc08-offset-expiry", generation=1)]),
    Case("scala_assignment_received_counts", "template 2.8",
         scala("Assignment received from leader for group g1 for generation 5. The group has 3 members, 1 of which are static."),
         [E(ev.ASSIGNMENT_RECEIVED, "g1", generation=5, members=3, static_members=1)]),
    Case("assignment_received_with_leader", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:18:58,347] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=9] Assignment received from leader sc01-c1-50723939-8238-44f1-af4f-8a64270377a8 for group k4-sc01-single-join-leave for generation 1. The group has 1 members, 0 of which are static. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.ASSIGNMENT_RECEIVED, "k4-sc01-single-join-leave", generation=1, member_id=MID_SC01,
            offsets_partition=9, members=1, static_members=0)]),
    Case("assignment_received_with_leader", "template scala 3.0-4.0",
         scala("Assignment received from leader c-1-ab for group g1 for generation 5. The group has 3 members, 0 of which are static."),
         [E(ev.ASSIGNMENT_RECEIVED, "g1", generation=5, member_id="c-1-ab", members=3, static_members=0)]),
    Case("scala_group_empty", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:22:10,558] INFO [GroupCoordinator 1]: Group sc08-offset-expiry with generation 2 is now empty (__consumer_offsets-4) (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.GROUP_EMPTY, "sc08-offset-expiry", generation=2, offsets_partition=4)]),
    Case("java_group_empty", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:19:13,922] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=9] Group k4-sc01-single-join-leave with generation 2 is now empty. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.GROUP_EMPTY, "k4-sc01-single-join-leave", generation=2, offsets_partition=9)]),

    # ---------------- classic joins ----------------
    Case("scala_new_member_id", "template 3.0-4.0 (INFO)",
         scala("Dynamic member with unknown member id joins group g1 in Empty state. Created a new member id c-1-ab and request the member to rejoin with this id."),
         [E(ev.MEMBER_CREATED, "g1", member_id="c-1-ab", static=False, group_instance_id=None, pending=True, state="Empty")]),
    Case("scala_new_member_id", "template 2.5-2.8 (DEBUG)",
         scala("Dynamic member with unknown member id joins group g1 in Stable state. Created a new member id c-1-ab and request the member to rejoin with this id.", level="DEBUG"),
         [E(ev.MEMBER_CREATED, "g1", member_id="c-1-ab", static=False, group_instance_id=None, pending=True, state="Stable")]),
    Case("scala_new_member_id_2_4", "template 2.4 (DEBUG)",
         scala("Dynamic member with unknown member id rejoins group g1 in Empty state. Created a new member id c-1-ab and request the member to rejoin with this id.", level="DEBUG"),
         [E(ev.MEMBER_CREATED, "g1", member_id="c-1-ab", static=False, group_instance_id=None, pending=True, state="Empty")]),
    Case("java_new_member_id", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:18:55,316] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=9] Dynamic member with unknown member id joins group k4-sc01-single-join-leave in Empty state. Created a new member id sc01-c1-50723939-8238-44f1-af4f-8a64270377a8 and requesting the member to rejoin with this id. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.MEMBER_CREATED, "k4-sc01-single-join-leave", member_id=MID_SC01, static=False,
            group_instance_id=None, pending=True, state="Empty", offsets_partition=9)]),
    Case("pending_dynamic_member_added", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:18:55,330] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=9] Pending dynamic member with id sc01-c1-50723939-8238-44f1-af4f-8a64270377a8 joins group k4-sc01-single-join-leave in Empty state. Adding to the group now. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.MEMBER_CREATED, "k4-sc01-single-join-leave", member_id=MID_SC01, static=False,
            group_instance_id=None, pending=False, state="Empty", offsets_partition=9)]),
    Case("pending_dynamic_member_added", "template scala 3.0-3.9 (DEBUG)",
         scala("Pending dynamic member with id c-1-ab joins group g1 in PreparingRebalance state. Adding to the group now.", level="DEBUG"),
         [E(ev.MEMBER_CREATED, "g1", member_id="c-1-ab", static=False, group_instance_id=None, pending=False,
            state="PreparingRebalance")]),
    Case("scala_member_added_unknown_id", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:26:29,153] INFO [GroupCoordinator 1]: Static Member with unknown member id joins group sc06-static-membership in Empty state. Created a new member id sc06-inst-1-a40772ac-fb37-4682-b9c3-6ad810f52fb0 for this member and add to the group. (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.MEMBER_CREATED, "sc06-static-membership", member_id="sc06-inst-1-a40772ac-fb37-4682-b9c3-6ad810f52fb0",
            static=True, pending=False, state="Empty")]),
    Case("scala_member_added_unknown_id", "template 3.0-4.0",
         scala("Dynamic Member with unknown member id joins group g1 in Empty state. Created a new member id c-1-ab for this member and add to the group."),
         [E(ev.MEMBER_CREATED, "g1", member_id="c-1-ab", static=False, pending=False, state="Empty")]),
    Case("java_member_added_unknown_id", "template java 3.7-4.2",
         java("Dynamic member with unknown member id joins group g1 in state Empty. Created a new member id c-1-ab and added the member to the group."),
         [E(ev.MEMBER_CREATED, "g1", member_id="c-1-ab", static=False, group_instance_id=None, pending=False,
            state="Empty", offsets_partition=12)]),
    Case("scala_member_added_specific_id", "template 2.5-2.8 (DEBUG)",
         scala("Dynamic Member with specific member id c-1-ab joins group g1 in PreparingRebalance state. Adding to the group now.", level="DEBUG"),
         [E(ev.MEMBER_CREATED, "g1", member_id="c-1-ab", static=False, group_instance_id=None, pending=False,
            state="PreparingRebalance")]),
    Case("scala_static_member_added", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:26:29,153] INFO [GroupCoordinator 1]: Adding new static member Some(sc06-inst-1) to group sc06-static-membership with member id sc06-inst-1-a40772ac-fb37-4682-b9c3-6ad810f52fb0. (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.MEMBER_CREATED, "sc06-static-membership", member_id="sc06-inst-1-a40772ac-fb37-4682-b9c3-6ad810f52fb0",
            static=True, pending=False, group_instance_id="sc06-inst-1")]),
    Case("scala_static_member_added_3_0", "template 3.0-4.0",
         scala("Static member with groupInstanceId=inst-1 and unknown member id joins group g1 in Empty state. Created a new member id inst-1-ab for this member and add to the group."),
         [E(ev.MEMBER_CREATED, "g1", member_id="inst-1-ab", static=True, pending=False, group_instance_id="inst-1",
            state="Empty")]),
    Case("java_static_member_added", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:24:06,245] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=4] Static member with groupInstanceId=k4-sc06-inst-1 and unknown member id joins group k4-sc06-static-membership in Empty state. Created a new member id k4-sc06-inst-1-6931ee6a-eedb-4210-8ed8-06c4496f2f45 for this member and added to the group. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.MEMBER_CREATED, "k4-sc06-static-membership", broker=2,
            member_id="k4-sc06-inst-1-6931ee6a-eedb-4210-8ed8-06c4496f2f45", static=True, pending=False,
            group_instance_id="k4-sc06-inst-1", state="Empty", offsets_partition=4)]),
    Case("scala_static_member_replaced", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:26:45,960] INFO [GroupCoordinator 1]: Static member Some(sc06-inst-1) of group sc06-static-membership with unknown member id rejoins, assigning new member id sc06-inst-1-dc7d974b-89e6-454c-b0e9-dec886d60ce4, while old member id sc06-inst-1-a40772ac-fb37-4682-b9c3-6ad810f52fb0 will be removed. (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.STATIC_MEMBER_REPLACED, "sc06-static-membership", member_id="sc06-inst-1-dc7d974b-89e6-454c-b0e9-dec886d60ce4",
            group_instance_id="sc06-inst-1", old_member_id="sc06-inst-1-a40772ac-fb37-4682-b9c3-6ad810f52fb0")]),
    Case("static_member_replaced", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:24:28,282] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=4] Static member with groupInstanceId=k4-sc06-inst-2 and unknown member id joins group k4-sc06-static-membership in Stable state. Replacing previously mapped member k4-sc06-inst-2-d4471f44-2cf8-443d-b168-f34ea6030db0 with this groupInstanceId. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.STATIC_MEMBER_REPLACED, "k4-sc06-static-membership", broker=2, group_instance_id="k4-sc06-inst-2",
            old_member_id="k4-sc06-inst-2-d4471f44-2cf8-443d-b168-f34ea6030db0", state="Stable", offsets_partition=4)]),
    Case("scala_static_member_replaced_no_group", "template 2.3-2.4 (no group id in the text)",
         scala("Static member Some(inst-1) with unknown member id rejoins, assigning new member id inst-1-new, while old member inst-1-old will be removed."),
         None),

    # ---------------- classic removals ----------------
    Case("scala_member_failed", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:23:13,794] INFO [GroupCoordinator 1]: Member sc03-c2-71387325-0692-46cd-be2c-72b58e7b893c in group sc03-heartbeat-expiry has failed, removing it from the group (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.MEMBER_FAILED, "sc03-heartbeat-expiry", member_id="sc03-c2-71387325-0692-46cd-be2c-72b58e7b893c")]),
    Case("java_member_failed", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:30:31,037] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=5] Member sc10-classic-00-c1-2f8d60bb-72dc-4d67-adf3-5ac077ccdd9d in group k4-sc10-classic-00 has failed, removing it from the group. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.MEMBER_FAILED, "k4-sc10-classic-00", member_id="sc10-classic-00-c1-2f8d60bb-72dc-4d67-adf3-5ac077ccdd9d",
            offsets_partition=5)]),
    Case("scala_member_left_2_4", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:22:10,556] INFO [GroupCoordinator 1]: Member[group.instance.id None, member.id sc08-exp-c1-70b11e09-ec73-430b-84f9-4e385cd43d51] in group sc08-offset-expiry has left, removing it from the group (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.MEMBER_LEFT, "sc08-offset-expiry", member_id=MID_SC08, group_instance_id=None, pending=False)]),
    Case("scala_member_left_2_4", "kafka-2.7/broker2-server.log",  # 2.7 bug: Some(null) for reloaded members
         "[2026-11-21 19:29:28,513] INFO [GroupCoordinator 2]: Member[group.instance.id Some(null), member.id sc07-c1-f9617da5-a673-42ba-8003-e2e2485aa79b] in group sc07-coordinator-failover has left, removing it from the group (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.MEMBER_LEFT, "sc07-coordinator-failover", broker=2, member_id="sc07-c1-f9617da5-a673-42ba-8003-e2e2485aa79b",
            group_instance_id=None, pending=False)]),
    Case("scala_member_left_2_4", "template 2.4-2.8 (static member)",
         scala("Member[group.instance.id Some(inst-1), member.id inst-1-ab] in group g1 has left, removing it from the group"),
         [E(ev.MEMBER_LEFT, "g1", member_id="inst-1-ab", group_instance_id="inst-1", pending=False)]),
    Case("scala_member_left_2_0", "template 2.2-2.3",
         scala("Member c-1-ab in group g1 has left, removing it from the group"),
         [E(ev.MEMBER_LEFT, "g1", member_id="c-1-ab", pending=False)]),
    Case("scala_member_left_2_0", "template 2.0-2.1 (DEBUG)",
         scala("Member c-1-ab in group g1 has left, removing it from the group", level="DEBUG"),
         [E(ev.MEMBER_LEFT, "g1", member_id="c-1-ab", pending=False)]),
    Case("scala_member_left_3_2", "template 3.2-4.0",
         scala(f"Member {MM_DYNAMIC} has left group g1 through explicit `LeaveGroup`; client reason: consumer poll timeout has expired."),
         [E(ev.MEMBER_LEFT, "g1", member_id="c-1-ab", group_instance_id=None, pending=False,
            client_reason="consumer poll timeout has expired.", client_id="c-1", client_host="/10.0.0.1")]),
    Case("scala_member_left_3_2", "template 3.2-4.0 (static member)",
         scala(f"Member {MM_STATIC} has left group g1 through explicit `LeaveGroup`; client reason: the consumer is being closed"),
         [E(ev.MEMBER_LEFT, "g1", member_id="inst-1-ab", group_instance_id="inst-1", pending=False,
            client_reason="the consumer is being closed", client_id="c-1", client_host="/10.0.0.2")]),
    Case("scala_member_left_3_0", "template 3.0-3.1",
         scala(f"Member {MM_DYNAMIC} has left group g1 through explicit `LeaveGroup` request"),
         [E(ev.MEMBER_LEFT, "g1", member_id="c-1-ab", group_instance_id=None, pending=False,
            client_id="c-1", client_host="/10.0.0.1")]),
    Case("java_member_left", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:19:13,920] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=9] [Group k4-sc01-single-join-leave] Member sc01-c1-50723939-8238-44f1-af4f-8a64270377a8 has left group through explicit `LeaveGroup` request; client reason: not provided (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.MEMBER_LEFT, "k4-sc01-single-join-leave", member_id=MID_SC01, pending=False,
            client_reason="not provided", offsets_partition=9)]),
    Case("scala_pending_member_leaving", "template 2.2-2.8",
         scala("Pending member c-1-ab is leaving group g1."),
         [E(ev.MEMBER_LEFT, "g1", member_id="c-1-ab", pending=True)]),
    Case("scala_pending_member_left", "template 3.0-4.0",
         scala("Pending member with memberId=c-1-ab has left group g1 through explicit `LeaveGroup` request"),
         [E(ev.MEMBER_LEFT, "g1", member_id="c-1-ab", pending=True)]),
    Case("java_pending_member_left", "template java 3.7-4.2",
         java("[Group g1] Pending member c-1-ab has left group through explicit `LeaveGroup` request; client reason: the consumer is being closed"),
         [E(ev.MEMBER_LEFT, "g1", member_id="c-1-ab", pending=True, client_reason="the consumer is being closed",
            offsets_partition=12)]),
    Case("pending_member_expired", "template scala 2.2-4.0",
         scala("Pending member c-1-ab in group g1 has been removed after session timeout expiration."),
         [E(ev.PENDING_MEMBER_EXPIRED, "g1", member_id="c-1-ab")]),
    Case("pending_member_expired", "template java 3.7-4.2",
         java("Pending member c-1-ab in group g1 has been removed after session timeout expiration."),
         [E(ev.PENDING_MEMBER_EXPIRED, "g1", member_id="c-1-ab", offsets_partition=12)]),
    Case("scala_members_not_joined_2_7", "kafka-2.7/broker2-server.log",
         "[2026-11-21 19:25:49,160] INFO [GroupCoordinator 2]: Group sc05b-poll-timeout-kafka-python remove dynamic members who haven't joined: Set(sc05b-slow-8f5ff9ab-8615-4f54-befd-cd971c95b649) (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.MEMBERS_NOT_JOINED, "sc05b-poll-timeout-kafka-python", broker=2,
            member_ids=["sc05b-slow-8f5ff9ab-8615-4f54-befd-cd971c95b649"])]),
    Case("members_not_joined", "template scala 2.8-4.0",
         scala("Group g1 removed dynamic members who haven't joined: HashSet(c-1-ab, c-2-cd, c-3-ef)"),
         [E(ev.MEMBERS_NOT_JOINED, "g1", member_ids=["c-1-ab", "c-2-cd", "c-3-ef"])]),
    Case("members_not_joined", "template java 3.7-4.2",
         java("Group g1 removed dynamic members who haven't joined: [c-1-ab, c-2-cd]"),
         [E(ev.MEMBERS_NOT_JOINED, "g1", member_ids=["c-1-ab", "c-2-cd"], offsets_partition=12)]),
    Case("scala_members_not_synced", "template 2.8.1-4.0 (DEBUG)",
         scala("Group g1 removed members who haven't sent their sync request: Set(c-1-ab)", level="DEBUG"),
         [E(ev.MEMBERS_NOT_SYNCED, "g1", member_ids=["c-1-ab"])]),
    Case("java_members_not_synced", "template java 3.7-4.2 (DEBUG)",
         java("Group g1 removed members who haven't sent their sync requests: [c-1-ab, c-2-cd]", level="DEBUG"),
         [E(ev.MEMBERS_NOT_SYNCED, "g1", member_ids=["c-1-ab", "c-2-cd"], offsets_partition=12)]),

    # ---------------- load / unload / dead / deleted ----------------
    Case("scala_group_loading", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:28:12,432] INFO [GroupCoordinator 1]: Loading group metadata for sc05b-poll-timeout-kafka-python with generation 6 (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.GROUP_LOADED, "sc05b-poll-timeout-kafka-python", generation=6)]),
    Case("scala_group_unloading", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:29:02,425] INFO [GroupCoordinator 1]: Unloading group metadata for sc07-coordinator-failover with generation 1 (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.GROUP_UNLOADED, "sc07-coordinator-failover", generation=1)]),
    Case("java_group_loaded", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:26:02,049] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0] Loaded classic group k4-sc07-coordinator-failover-b with 3 members. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.GROUP_LOADED, "k4-sc07-coordinator-failover-b", group_type="classic", members=3, offsets_partition=0)]),
    Case("java_classic_group_unloading", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:26:51,147] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0] [GroupId=k4-sc07-coordinator-failover-b] Unloading group metadata for generation 1. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.GROUP_UNLOADED, "k4-sc07-coordinator-failover-b", generation=1, offsets_partition=0)]),
    Case("java_modern_group_unloaded", "template java 3.8-4.2",
         java("[GroupId=g1] Unloaded group metadata for group epoch 7."),
         [E(ev.GROUP_UNLOADED, "g1", generation=7, offsets_partition=12)]),
    Case("scala_group_dead", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:24:14,034] INFO [GroupMetadataManager brokerId=1] Group sc08-offset-expiry transitioned to Dead in generation 2 (kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.GROUP_DEAD, "sc08-offset-expiry", generation=2)]),
    Case("groups_deleted", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:33:51,663] INFO [GroupCoordinator 1]: The following groups were deleted: sc08-delete-group. A total of 2 offsets were removed. (kafka.coordinator.group.GroupCoordinator)",
         [E(ev.GROUP_DELETED, "sc08-delete-group", offsets_removed_total=2)]),
    Case("groups_deleted", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:27:43,428] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=8] The following groups were deleted: k4-sc08-delete-empty. A total of 6 offsets were removed. (org.apache.kafka.coordinator.group.GroupCoordinatorShard)",
         [E(ev.GROUP_DELETED, "k4-sc08-delete-empty", broker=2, offsets_removed_total=6, offsets_partition=8)]),
    Case("groups_deleted", "template scala 2.0-4.0 (several groups in one line)",
         scala_gmm("The following groups were deleted: g1, g2, g3. A total of 7 offsets were removed.", broker=3),
         [E(ev.GROUP_DELETED, g, broker=3, offsets_removed_total=7) for g in ("g1", "g2", "g3")]),
    Case("scala_groups_deleted_1_1", "template 1.1 (no offsets count)",
         scala("The following groups were deleted: g1, g2", broker=0),
         [E(ev.GROUP_DELETED, g, broker=0) for g in ("g1", "g2")]),
    Case("scala_groups_deleted_1_1", "template 1.1 (one group)",
         scala("The following groups were deleted: g1"),
         [E(ev.GROUP_DELETED, "g1")]),

    # ---------------- KIP-848 consumer groups ----------------
    Case("consumer_group_epoch_bumped", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:17:53,059] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=1] [GroupId k4-smoke-g] Bumped group epoch to 1. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.GROUP_EPOCH_BUMPED, "k4-smoke-g", generation=1, offsets_partition=1)]),
    Case("consumer_group_epoch_bumped_4_1", "template 4.1+",
         java("[GroupId g1] Bumped group epoch to 8 with metadata hash -4112343214."),
         [E(ev.GROUP_EPOCH_BUMPED, "g1", generation=8, metadata_hash=-4112343214, offsets_partition=12)]),
    Case("consumer_target_assignment", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:17:53,068] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=1] [GroupId k4-smoke-g] Computed a new target assignment for epoch 1 with 'uniform' assignor in 8ms. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.TARGET_ASSIGNMENT, "k4-smoke-g", generation=1, assignor="uniform", duration_ms=8, offsets_partition=1)]),
    Case("consumer_target_assignment_3_8", "template 3.8-3.9",
         java("[GroupId g1] Computed a new target assignment for epoch 8 with 'range' assignor in 3ms: {AbC=MemberAssignmentImpl(partitions={t1=[0, 1]})}."),
         [E(ev.TARGET_ASSIGNMENT, "g1", generation=8, assignor="range", duration_ms=3, offsets_partition=12)]),
    Case("consumer_target_assignment_3_7", "template 3.7",
         java("[GroupId g1] Computed a new target assignment for epoch 8 with 'uniform' assignor: {AbC=MemberAssignment(targetPartitions={t1=[0]})}."),
         [E(ev.TARGET_ASSIGNMENT, "g1", generation=8, assignor="uniform", offsets_partition=12)]),
    Case("consumer_member_joined", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:17:53,051] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=1] [GroupId k4-smoke-g] Member WLAp9ronRLWs/Gq7JdNBDw joins the consumer group using the consumer protocol. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.CONSUMER_MEMBER_JOINED, "k4-smoke-g", group_type="consumer", member_id="WLAp9ronRLWs/Gq7JdNBDw", protocol="consumer",
            static=False, group_instance_id=None, offsets_partition=1)]),
    Case("consumer_member_joined", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:31:21,373] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=6] [GroupId k4-sc11-mixed-classic-first] Member sc11-classic-c1-e8ca7dd4-78d2-475f-a192-b1cce469f567 joins the consumer group using the classic protocol. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.CONSUMER_MEMBER_JOINED, "k4-sc11-mixed-classic-first", group_type="consumer", broker=2,
            member_id="sc11-classic-c1-e8ca7dd4-78d2-475f-a192-b1cce469f567", protocol="classic", static=False,
            group_instance_id=None, offsets_partition=6)]),
    Case("consumer_member_joined_3_7", "template 3.7-3.8",
         java("[GroupId g1] Member AbC joins the consumer group."),
         [E(ev.CONSUMER_MEMBER_JOINED, "g1", group_type="consumer", member_id="AbC", protocol="consumer", static=False,
            group_instance_id=None, offsets_partition=12)]),
    Case("consumer_static_member_joined", "template 3.9-4.2",
         java("[GroupId g1] Static member AbC with instance id inst-1 joins the consumer group using the consumer protocol."),
         [E(ev.CONSUMER_MEMBER_JOINED, "g1", group_type="consumer", member_id="AbC", protocol="consumer", static=True,
            group_instance_id="inst-1", offsets_partition=12)]),
    Case("consumer_static_member_joined_3_7", "template 3.7-3.8",
         java("[GroupId g1] Static member AbC with instance id inst-1 joins the consumer group."),
         [E(ev.CONSUMER_MEMBER_JOINED, "g1", group_type="consumer", member_id="AbC", protocol="consumer", static=True,
            group_instance_id="inst-1", offsets_partition=12)]),
    Case("consumer_static_member_replaced", "template 3.9-4.2",
         java("[GroupId g1] Static member with instance id inst-1 re-joins the consumer group using the consumer protocol. Created a new member NeW to replace the existing member OlD."),
         [E(ev.STATIC_MEMBER_REPLACED, "g1", group_type="consumer", member_id="NeW", old_member_id="OlD", group_instance_id="inst-1",
            protocol="consumer", offsets_partition=12)]),
    Case("consumer_static_member_replaced_3_8", "template 3.8",
         java("[GroupId g1] Static member with unknown member id and instance id inst-1 re-joins the consumer group. Created a new member NeW to replace the existing member OlD."),
         [E(ev.STATIC_MEMBER_REPLACED, "g1", group_type="consumer", member_id="NeW", old_member_id="OlD", group_instance_id="inst-1",
            protocol="consumer", offsets_partition=12)]),
    Case("consumer_static_member_rejoined_3_7", "template 3.7",
         java("[GroupId g1] Static member NeW with instance id inst-1 re-joins the consumer group."),
         [E(ev.STATIC_MEMBER_REPLACED, "g1", group_type="consumer", member_id="NeW", old_member_id=None, group_instance_id="inst-1",
            protocol="consumer", offsets_partition=12)]),
    Case("consumer_member_left", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:17:53,398] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=1] [GroupId k4-smoke-g] Member WLAp9ronRLWs/Gq7JdNBDw left the consumer group. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.CONSUMER_MEMBER_LEFT, "k4-smoke-g", group_type="consumer", member_id="WLAp9ronRLWs/Gq7JdNBDw", static=False, temporary=False,
            offsets_partition=1)]),
    Case("consumer_static_member_left", "template 4.0-4.2",
         java("[GroupId g1] Static member AbC with instance id inst-1 temporarily left the consumer group."),
         [E(ev.CONSUMER_MEMBER_LEFT, "g1", group_type="consumer", member_id="AbC", static=True, temporary=True, group_instance_id="inst-1",
            offsets_partition=12)]),
    Case("consumer_static_member_left", "template 3.7-3.9",
         java("[GroupId g1] Static Member AbC with instance id inst-1 left the consumer group."),
         [E(ev.CONSUMER_MEMBER_LEFT, "g1", group_type="consumer", member_id="AbC", static=True, temporary=False, group_instance_id="inst-1",
            offsets_partition=12)]),
    Case("consumer_classic_member_left", "template 4.0-4.2",
         java("[GroupId g1] Dynamic member c-1-ab has left group through explicit `LeaveGroup` request; client reason: not provided"),
         [E(ev.CONSUMER_MEMBER_LEFT, "g1", group_type="consumer", member_id="c-1-ab", static=False, temporary=False, protocol="classic",
            client_reason="not provided", offsets_partition=12)]),
    Case("consumer_classic_member_left", "template 4.0-4.2 (static)",
         java("[GroupId g1] Static member inst-1-ab with instance id inst-1 has left group through explicit `LeaveGroup` request; client reason: not provided"),
         [E(ev.CONSUMER_MEMBER_LEFT, "g1", group_type="consumer", member_id="inst-1-ab", static=True, temporary=False, protocol="classic",
            group_instance_id="inst-1", client_reason="not provided", offsets_partition=12)]),
    Case("consumer_classic_member_left_3_8", "template 3.8-3.9",
         java("[Group g1] Dynamic Member c-1-ab has left group through explicit `LeaveGroup` request; client reason: not provided"),
         [E(ev.CONSUMER_MEMBER_LEFT, "g1", group_type="consumer", member_id="c-1-ab", static=False, temporary=False, protocol="classic",
            client_reason="not provided", offsets_partition=12)]),
    Case("consumer_member_fenced_session", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:28:48,616] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=1] [GroupId k4-sc09-consumer-protocol] Member qXRXK9EuQdenouQW3D3jyA fenced from the group because the member session expired. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.CONSUMER_MEMBER_FENCED, "k4-sc09-consumer-protocol", member_id="qXRXK9EuQdenouQW3D3jyA",
            fence_reason="session", offsets_partition=1)]),
    Case("consumer_member_fenced_session", "template 3.8-3.9 (double dot)",
         java("[GroupId g1] Member AbC fenced from the group because the member session expired.."),
         [E(ev.CONSUMER_MEMBER_FENCED, "g1", member_id="AbC", fence_reason="session", offsets_partition=12)]),
    Case("consumer_member_fenced_session_3_7", "template 3.7",
         java("[GroupId g1] Member AbC fenced from the group because its session expired."),
         [E(ev.CONSUMER_MEMBER_FENCED, "g1", member_id="AbC", fence_reason="session", offsets_partition=12)]),
    Case("consumer_member_fenced_rebalance", "template 3.8-4.2",
         java("[GroupId g1] Member AbC fenced from the group because it failed to transition from epoch 5 within 300000ms."),
         [E(ev.CONSUMER_MEMBER_FENCED, "g1", member_id="AbC", fence_reason="rebalance", member_epoch=5,
            timeout_ms=300000, offsets_partition=12)]),
    Case("consumer_member_fenced_rebalance_3_7", "template 3.7",
         java("[GroupId g1] Member AbC fenced from the group because it failed to revoke partitions within 45000ms."),
         [E(ev.CONSUMER_MEMBER_FENCED, "g1", member_id="AbC", fence_reason="rebalance", timeout_ms=45000,
            offsets_partition=12)]),
    Case("consumer_member_fenced_join", "template 4.0-4.2",
         java("[GroupId g1] Member c-1-ab fenced from the group because the classic member failed to join within the rebalance timeout."),
         [E(ev.CONSUMER_MEMBER_FENCED, "g1", member_id="c-1-ab", fence_reason="join", offsets_partition=12)]),
    Case("consumer_member_fenced_sync", "template 3.8-3.9 (double dot)",
         java("[GroupId g1] Member c-1-ab fenced from the group because the member failed to sync within timeout.."),
         [E(ev.CONSUMER_MEMBER_FENCED, "g1", member_id="c-1-ab", fence_reason="sync", offsets_partition=12)]),
    Case("consumer_group_converted_to_consumer", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:31:20,697] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=6] [GroupId k4-sc11-mixed-classic-first] Converted the classic group to a consumer group. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.GROUP_CONVERTED, "k4-sc11-mixed-classic-first", broker=2, to="consumer", empty=False, offsets_partition=6)]),
    Case("consumer_group_converted_to_consumer", "template 4.0-4.2 (empty group)",
         java("[GroupId g1] Converted the empty classic group to a consumer group."),
         [E(ev.GROUP_CONVERTED, "g1", to="consumer", empty=True, offsets_partition=12)]),
    Case("consumer_group_converted_to_classic", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:31:38,747] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=6] [GroupId k4-sc11-mixed-classic-first] Converted the consumer group to a classic group. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.GROUP_CONVERTED, "k4-sc11-mixed-classic-first", broker=2, to="classic", empty=False, offsets_partition=6)]),
    Case("consumer_classic_new_member_id", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:32:09,772] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=2] [GroupId k4-sc11b-mixed-consumer-first] Dynamic member with unknown member id joins the consumer group. Created a new member id yeayOOUSTQy5Wq10W68dBA and requesting the member to rejoin with this id. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         [E(ev.MEMBER_CREATED, "k4-sc11b-mixed-consumer-first", group_type="consumer", broker=2, member_id="yeayOOUSTQy5Wq10W68dBA",
            static=False, group_instance_id=None, pending=True, protocol="classic", offsets_partition=2)]),

    # ---------------- recognised, ignored ----------------
    Case("static_member_no_rebalance", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:26:45,961] INFO [GroupCoordinator 1]: Static member which joins during Stable stage and doesn't affect selectProtocol will not trigger rebalance. (kafka.coordinator.group.GroupCoordinator)",
         None),
    Case("static_member_no_rebalance", "kafka-4.0/node2-server.log",
         "[2026-11-21 19:24:28,283] INFO [GroupCoordinator id=2 topic=__consumer_offsets partition=4] Static member which joins during Stable stage and doesn't affect the selected protocol will not trigger a rebalance. (org.apache.kafka.coordinator.group.GroupMetadataManager)",
         None),
    Case("static_member_no_rebalance", "template 2.5-2.6",
         scala("Static member joins during Stable stage will not trigger rebalance."), None),
    Case("scala_static_member_loaded", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:28:12,423] INFO Static member MemberMetadata(memberId=sc05b-normal-f7d06270-7809-46e6-a2ac-6447b864ce45, groupInstanceId=Some(null), clientId=sc05b-normal, clientHost=/127.0.0.1, sessionTimeoutMs=6000, rebalanceTimeoutMs=8000, supportedProtocols=List(range), ).groupInstanceId of group sc05b-poll-timeout-kafka-python loaded with member id sc05b-normal-f7d06270-7809-46e6-a2ac-6447b864ce45 at generation 1. (kafka.coordinator.group.GroupMetadata$)",
         None),
    Case("scala_member_loaded", "template 2.8-4.0",
         unprefixed(f"Loaded member {MM_DYNAMIC} in group g1 with generation 5.", "kafka.coordinator.group.GroupMetadata$"),
         None),
    Case("scala_partition_load_unload", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:21:25,705] INFO [GroupMetadataManager brokerId=1] Scheduling loading of offsets and group metadata from __consumer_offsets-6 (kafka.coordinator.group.GroupMetadataManager)",
         None),
    Case("scala_partition_load_unload", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:21:25,711] INFO [GroupMetadataManager brokerId=1] Finished loading offsets and group metadata from __consumer_offsets-6 in 5 milliseconds, of which 2 milliseconds was spent in the scheduler. (kafka.coordinator.group.GroupMetadataManager)",
         None),
    Case("scala_partition_unloaded", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:21:25,717] INFO [GroupMetadataManager brokerId=1] Finished unloading __consumer_offsets-3. Removed 0 cached offsets and 0 cached groups. (kafka.coordinator.group.GroupMetadataManager)",
         None),
    Case("scala_partition_unloaded", "template 2.8.1+",
         scala_gmm("Finished unloading __consumer_offsets-3 for coordinator epoch 4. Removed 2 cached offsets and 1 cached groups."),
         None),
    Case("scala_elected_resigned", "template 2.8.1-4.0",
         scala("Elected as the group coordinator for partition 12 in epoch 3"), None),
    Case("scala_expired_offsets_removed", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:24:14,036] INFO [GroupMetadataManager brokerId=1] Removed 2 expired offsets in 3 milliseconds. (kafka.coordinator.group.GroupMetadataManager)",
         None),
    Case("group_offsets_deleted", "template 2.4-4.0",
         scala("The following offsets of the group g1 were deleted: t1-0, t1-1. A total of 2 offsets were removed."), None),
    Case("deleted_partition_offsets_removed", "template 2.0-4.0",
         scala_gmm("Removed 3 offsets associated with deleted partitions: t1-0, t1-1, t1-2."), None),
    Case("coordinator_lifecycle", "kafka-2.7/broker1-server.log",
         "[2026-11-21 19:21:14,033] INFO [GroupCoordinator 1]: Starting up. (kafka.coordinator.group.GroupCoordinator)",
         None),
    Case("coordinator_lifecycle", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:17:33,098] INFO [GroupCoordinator id=1] Startup complete. (org.apache.kafka.coordinator.group.GroupCoordinatorService)",
         None),
    Case("scala_member_not_found", "template 2.5-2.8",
         scala("Member id c-1-ab was not found in g1 during heartbeat completion check"), None),
    Case("heartbeat_expiry_after_unload", "template 2.4-4.0",
         scala("Received notification of heartbeat expiration for member c-1-ab after group g1 had already been unloaded or deleted."),
         None),
    Case("rejoin_in_unexpected_state", "template 2.2-4.0 (WARN)",
         scala("Attempt to add rejoining member c-1-ab of group g1 in unexpected group state Dead", level="WARN"), None),
    Case("failed_to_write_empty_metadata", "template 2.0-4.0 (WARN)",
         scala("Failed to write empty metadata for group g1: The coordinator is not available.", level="WARN"), None),
    Case("failed_to_persist_metadata", "template java 3.7+ (WARN)",
         java("Failed to persist metadata for group g1 static member NeW with group instance id inst-1 due to NOT_COORDINATOR. Reverting to old member id OlD.", level="WARN"),
         None),
    Case("group_dead_skip_rebalance", "template java 3.7+",
         java("Group g1 is dead, skipping rebalance stage."), None),
    Case("no_members_rejoined", "template 2.3-4.0 (ERROR)",
         scala("Group g1 could not complete rebalance because no members rejoined", level="ERROR"), None),
    Case("leader_failed_to_join", "template java 3.7+ (ClassicGroup)",
         java("Group leader [memberId: c-1-ab, groupInstanceId: None] failed to join before the rebalance timeout. Member c-2-cd was elected as the new leader.",
              logger="org.apache.kafka.coordinator.group.classic.ClassicGroup"),
         None),
    Case("leader_failed_to_join", "template scala 2.3-4.0 (GroupMetadata)",
         unprefixed(f"Group leader [member.id: c-1-ab, group.instance.id: None] failed to join before rebalance timeout, while new leader {MM_DYNAMIC} was elected.",
                    "kafka.coordinator.group.GroupMetadata"),
         None),
    Case("empty_assignments", "template 2.5-4.0 (WARN)",
         scala("Setting empty assignments for members Set(c-2-cd) of g1 for generation 5", level="WARN"), None),
    Case("unexpected_sync_expiration", "template 2.8.1-4.0 (ERROR)",
         scala("Received unexpected notification of sync expiration for g1 with an old generation 4 while the group has 5.", level="ERROR"),
         None),
    Case("scala_static_member_id_mismatch", "template 2.5-2.8 (ERROR, GroupMetadata)",
         unprefixed("given member.id c-1-ab is identified as a known static member inst-1, but not matching the expected member.id c-1-xy during JoinGroup, will respond with instance fenced error",
                    "kafka.coordinator.group.GroupMetadata", level="ERROR"),
         None),
    Case("static_member_request_fenced", "template 3.0-4.0",
         unprefixed("Request memberId=c-1-ab for static member with groupInstanceId=inst-1 is fenced by current memberId=c-1-xy during operation JoinGroup",
                    "kafka.coordinator.group.GroupMetadata"),
         None),
    Case("scala_unknown_message_key", "template 3.5-4.0 (WARN)",
         scala_gmm("Unknown message key with version 3 while loading offsets and group metadata from __consumer_offsets-12. Ignoring it. It could be a left over from an aborted upgrade."),
         None),
    Case("loader_unknown_record_type", "template 3.6-4.1 (WARN, CoordinatorLoaderImpl)",
         unprefixed("Unknown record type 16 while loading offsets and group metadata from __consumer_offsets-12. Ignoring it. It could be a left over from an aborted upgrade.",
                    "kafka.coordinator.group.CoordinatorLoaderImpl", level="WARN"),
         None),
    Case("scala_simple_group_created", "template 4.0 (Scala)",
         scala("Creating simple consumer group g1 via manual offset commit."), None),
    Case("java_simple_group_created", "template 4.0+",
         java("[GroupId g1] Creating a simple consumer group via manual offset commit."), None),
    Case("java_partition_load_unload", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:17:52,260] INFO [GroupCoordinator id=1] Scheduling loading of metadata from __consumer_offsets-9 with epoch 0 (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)",
         None),
    Case("java_partition_load_unload", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:17:52,318] INFO [GroupCoordinator id=1] Ignored unloading metadata for __consumer_offsets-4 in epoch OptionalInt[0] since metadata was never loaded. (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)",
         None),
    Case("java_runtime_lifecycle", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:33:11,425] INFO [GroupCoordinator id=1] Closing coordinator runtime. (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)",
         None),
    Case("java_event_processor_thread", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:17:32,690] INFO [group-coordinator-event-processor-0]: Starting (org.apache.kafka.coordinator.common.runtime.MultiThreadedEventProcessor$EventProcessorThread)",
         None),
    Case("java_tombstones_generated", "kafka-4.0/node1-server.log",
         "[2026-11-21 19:20:07,339] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=1] Generated 5 tombstone records while cleaning up group metadata in 1 milliseconds. (org.apache.kafka.coordinator.group.GroupCoordinatorShard)",
         None),
    Case("consumer_member_subscription_changed", "template 3.7-3.9",
         java("[GroupId g1] Member AbC updated its subscribed topics to: [t1, t2]."), None),
    Case("consumer_metadata_computed", "template 3.7-3.9",
         java("[GroupId g1] Computed new subscription metadata: {t1=TopicMetadata(id=x, name=t1, numPartitions=3)}."), None),
    Case("consumer_member_assignment_state", "template 3.8-3.9",
         java("[GroupId g1] Member AbC new assignment state: epoch=5, previousEpoch=4, state=STABLE, assignedPartitions=[t1-0] and revokedPartitions=[]."),
         [E(ev.MEMBER_ASSIGNMENT_STATE, "g1", member_id="AbC", group_type="consumer", member_epoch=5,
            previous_member_epoch=4, state_name="STABLE", offsets_partition=12)]),
    Case("share_member_assignment_state", "template 3.9-4.4 (a 4.4.0 broker line)",
         java("[GroupId k440-share] Member zc2HAbgBTlq4tthZjnKteg new assignment state: epoch=3, previousEpoch=2, "
              "state=STABLE, assignedPartitions=[4ixAWNnEQByJ6Fxzg3PkMQ-0, 4ixAWNnEQByJ6Fxzg3PkMQ-1].", partition=7),
         [E(ev.MEMBER_ASSIGNMENT_STATE, "k440-share", member_id="zc2HAbgBTlq4tthZjnKteg", group_type="share",
            member_epoch=3, previous_member_epoch=2, state_name="STABLE", offsets_partition=7)]),
    Case("consumer_member_reconciliation", "template 3.6-3.7",
         java("[GroupId g1] Member AbC transitioned from Stable to Reconciling."), None),
    Case("consumer_static_member_rejected", "template 3.7-3.9",
         java("[GroupId g1] Static member NeW with instance id inst-1 cannot join the group because the instance id is is owned by member OlD."),
         None),
    Case("group_conversion_refused", "template 4.0+",
         java("Cannot upgrade classic group g1 to consumer group because online upgrade is disabled."), None),
    Case("group_conversion_refused", "template 3.8+ (WARN, malformed protocol)",
         java("Cannot upgrade the classic group g1 to consumer group because the embedded consumer protocol is "
              "malformed: Error reading field 'topics'.", level="WARN"), None),
    Case("group_conversion_refused", "template 3.8+ (WARN, downgrade)",
         java("Cannot downgrade the consumer group g1: fail to parse the Consumer Protocol consumer.", level="WARN"),
         None),
    Case("consumer_regex_refresh", "template 4.0+",
         java("[GroupId g1] Scanned 12 topics to refresh regular expressions [t.*] in 3ms."), None),

    # ---------------- recognised, ignored: added by the catalog audit (apache/kafka tags 1.1.0-3.9.0) ----------------
    Case("scala_partition_load_unload", "template 2.0-4.0",
         scala_gmm("Already loading offsets and group metadata from __consumer_offsets-3"), None),
    Case("scala_partition_load_unload", "template 1.1 (Finished loading, no scheduler time)",
         scala_gmm("Finished loading offsets and group metadata from __consumer_offsets-3 in 12 milliseconds."), None),
    # ---------------- 0.10.2 (logger kafka.coordinator.*, no offsets partition) ----------------
    Case("scala_prepare_restabilize_0_10", "template 0.10.2",
         "[2017-03-01 10:00:00,123] INFO [GroupCoordinator 1]: Preparing to restabilize group g1 with old generation 4 "
         "(kafka.coordinator.GroupCoordinator)",
         [E(ev.PREPARE_REBALANCE, "g1", generation=4, trigger="unknown")]),
    Case("scala_stabilized_0_10", "template 0.10.2",
         "[2017-03-01 10:00:00,123] INFO [GroupCoordinator 1]: Stabilized group g1 generation 5 "
         "(kafka.coordinator.GroupCoordinator)",
         [E(ev.JOIN_COMPLETE, "g1", generation=5)]),
    Case("scala_group_empty_0_10", "template 0.10.2",
         "[2017-03-01 10:00:00,123] INFO [GroupCoordinator 1]: Group g1 with generation 5 is now empty "
         "(kafka.coordinator.GroupCoordinator)",
         [E(ev.GROUP_EMPTY, "g1", generation=5)]),
    Case("scala_partition_load_unload_0_10", "template 0.10.2",
         "[2017-03-01 10:00:00,123] INFO [Group Metadata Manager on Broker 1]: Loading offsets and group metadata "
         "from __consumer_offsets-3 (kafka.coordinator.GroupMetadataManager)", None),
    Case("scala_partition_load_unload_0_10", "template 0.10.2 (finished)",
         "[2017-03-01 10:00:00,123] INFO [Group Metadata Manager on Broker 1]: Finished loading offsets from "
         "__consumer_offsets-3 in 12 milliseconds. (kafka.coordinator.GroupMetadataManager)", None),
    Case("scala_follower_transition_0_10", "template 0.10.2",
         "[2017-03-01 10:00:00,123] INFO [Group Metadata Manager on Broker 1]: Removed 2 cached groups for "
         "__consumer_offsets-3 on follower transition. (kafka.coordinator.GroupMetadataManager)", None),
    # 0.11-1.0: the 1.1 wordings, with the `[Group Metadata Manager on Broker N]: ` prefix
    Case("scala_partition_load_unload", "template 0.11-1.0",
         "[2018-03-01 10:00:00,123] INFO [Group Metadata Manager on Broker 1]: Finished loading offsets and group "
         "metadata from __consumer_offsets-3 in 12 milliseconds. (kafka.coordinator.group.GroupMetadataManager)",
         None),
    Case("scala_offset_load_in_progress_1_1", "template 1.1",
         scala_gmm("Offset load from __consumer_offsets-3 already in progress."), None),
    Case("scala_stale_epoch_load_unload", "template 2.8.1-4.0",
         scala_gmm("Not loading offsets and group metadata for __consumer_offsets-3 in epoch 4 since current epoch is 5"),
         None),
    Case("scala_stale_epoch_load_unload", "template 2.8.1-4.0 (unload)",
         scala_gmm("Not removing offsets and group metadata for __consumer_offsets-3 in epoch 4 since current epoch is Some(5)"),
         None),
    Case("scala_partition_load_problem", "template 1.1-4.0 (ERROR)",
         scala_gmm("Error loading offsets from __consumer_offsets-3", level="ERROR"), None),
    Case("scala_partition_load_problem", "template 1.1-4.0 (WARN)",
         scala_gmm("Attempted to load offsets and group metadata from __consumer_offsets-3, but found no log",
                   level="WARN"), None),
    Case("loader_buffer_larger", "template scala 2.0.1-4.0 (WARN)",
         scala_gmm("Loaded offsets and group metadata from __consumer_offsets-3 with buffer larger (6291456 bytes) "
                   "than configured offsets.load.buffer.size (5242880 bytes)", level="WARN"), None),
    Case("loader_buffer_larger", "template CoordinatorLoaderImpl 3.6+ (WARN)",
         unprefixed("Loaded metadata from __consumer_offsets-3 with buffer larger (6291456 bytes) than configured "
                    "buffer size (5242880 bytes).", "kafka.coordinator.group.CoordinatorLoaderImpl", level="WARN"),
         None),
    Case("coordinator_loader_shutting_down", "template CoordinatorLoaderImpl 3.6+ (WARN)",
         unprefixed("Coordinator loader is already shutting down.", "kafka.coordinator.group.CoordinatorLoaderImpl",
                    level="WARN"), None),
    Case("loader_record_failed", "template CoordinatorLoaderImpl 3.6+ (ERROR)",
         unprefixed("Deserializing record DefaultRecord(offset=12, timestamp=1, key=7 bytes, value=9 bytes) from "
                    "__consumer_offsets-3 failed due to: Error reading field 'epoch'.",
                    "kafka.coordinator.group.CoordinatorLoaderImpl", level="ERROR"), None),
    Case("scala_append_metadata_failed", "template 1.1-4.0 (ERROR)",
         scala_gmm("Appending metadata message for group g1 generation 5 failed due to NOT_LEADER_FOR_PARTITION, "
                   "returning UNKNOWN error code to the client", level="ERROR"), None),
    Case("scala_append_metadata_failed", "template 1.1-4.0 (ERROR, unexpected)",
         scala_gmm("Appending metadata message for group g1 generation 5 failed due to unexpected error: "
                   "org.apache.kafka.common.errors.KafkaStorageException", level="ERROR"), None),
    Case("scala_tombstone_append_failed", "template 1.1-4.0 (ERROR)",
         scala_gmm("Failed to append 3 tombstones to __consumer_offsets-3 for expired/deleted offsets and/or "
                   "metadata for group g1.", level="ERROR"), None),
    Case("scala_mixed_offset_commits", "template 1.1-4.0 (WARN)",
         scala_gmm("group: g1 with leader: c-1-ab has received offset commits from consumers as well as "
                   "transactional producers. Mixing both types of offset commits will generally result in surprises "
                   "and should be avoided.", level="WARN"), None),
    Case("scala_cleanup_not_coordinator", "template 1.1-4.0",
         scala_gmm("BrokerId 1 is no longer a coordinator for the group g1. Proceeding cleanup for other alive groups"),
         None),
    Case("scala_txn_marker_group_moved", "template 1.1-4.0",
         scala_gmm("Group g1 has moved away from 1 after transaction marker was written but before the cache was "
                   "updated. The cache on the new group owner will be updated instead."), None),
    Case("consumer_protocol_parse_failed", "template scala 2.4-4.0 (WARN, GroupMetadata)",
         unprefixed("Failed to parse Consumer Protocol consumer:range of group g1. Consumer group coordinator is not "
                    "aware of the subscribed topics.", "kafka.coordinator.group.GroupMetadata", level="WARN"), None),
    Case("consumer_protocol_parse_failed", "template java 3.7+ (WARN, ClassicGroup)",
         java("Failed to parse Consumer Protocol consumer:range of group g1. Consumer group coordinator is not aware "
              "of the subscribed topics.", level="WARN", logger="org.apache.kafka.coordinator.group.classic.ClassicGroup"),
         None),
    Case("scala_callback_failed", "template 3.3.2-4.0 (ERROR, GroupMetadata)",
         unprefixed("Failed to invoke join callback for c-1-ab due to java.lang.IllegalStateException: boom.",
                    "kafka.coordinator.group.GroupMetadata", level="ERROR"), None),
    Case("java_event_processor_thread", "template 3.7+ (ERROR)",
         "[2024-03-01 10:00:00,000] ERROR [group-coordinator-event-processor-1]: Failed to run event "
         "CoordinatorWriteEvent(name=consumer-group-heartbeat) due to: boom. "
         "(org.apache.kafka.coordinator.common.runtime.MultiThreadedEventProcessor$EventProcessorThread)", None),
    Case("java_tombstones_generated", "template 3.8+ (deleted partitions)",
         java("Generated 4 tombstone records in 2 milliseconds while deleting offsets for partitions [t1-0, t1-1].",
              logger="org.apache.kafka.coordinator.group.GroupCoordinatorShard"), None),
    Case("java_runtime_misc", "template 3.7+ (CoordinatorRuntime)",
         "[2024-03-01 10:00:00,000] INFO [GroupCoordinator id=1] The coordinator __consumer_offsets-3 is already "
         "loading metadata. (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)", None),
    Case("java_runtime_misc", "template 3.7+ (CoordinatorRuntime, ERROR)",
         "[2024-03-01 10:00:00,000] ERROR [GroupCoordinator id=1] Failed to load metadata from __consumer_offsets-3 "
         "with epoch 7 due to org.apache.kafka.common.errors.NotLeaderOrFollowerException: x. "
         "(org.apache.kafka.coordinator.group.runtime.CoordinatorRuntime)", None),
    Case("java_runtime_misc", "template 3.8+ (CoordinatorRuntime)",
         "[2024-03-01 10:00:00,000] INFO [GroupCoordinator id=1] Ignored loading metadata from __consumer_offsets-3 "
         "since current epoch 7 is larger than or equals to 6. "
         "(org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)", None),
    Case("java_service_misc", "template 3.8+ (ERROR, GroupCoordinatorService)",
         "[2024-03-01 10:00:00,000] ERROR [GroupCoordinator id=1] Operation consumer-group-heartbeat with "
         "ConsumerGroupHeartbeatRequestData(groupId='g1') hit an unexpected exception: boom. "
         "(org.apache.kafka.coordinator.group.GroupCoordinatorService)", None),
    Case("java_service_misc", "template 3.7+ (WARN, GroupCoordinatorService)",
         "[2024-03-01 10:00:00,000] WARN [GroupCoordinator id=1] Group coordinator is already running. "
         "(org.apache.kafka.coordinator.group.GroupCoordinatorService)", None),
    Case("java_unknown_group_type", "template 3.8+ (WARN)",
         java("Loaded group g1 with an unknown group type STREAMS.", level="WARN"), None),
    Case("java_unknown_group_type", "template 3.9+ (WARN)",
         java("onUnloaded group with an unknown group type STREAMS.", level="WARN"), None),
    Case("java_txn_offset_materialization_skipped", "template 3.8+ (OffsetMetadataManager)",
         java("Skipped the materialization of transactional offset commit OffsetAndMetadata(offset=5) for producer "
              "id 7 in group g1 with topic t1, partition 0 since its record offset 9 is smaller than the record "
              "offset 12 of the last committed offset.",
              logger="org.apache.kafka.coordinator.group.OffsetMetadataManager"), None),
    Case("java_share_group_metrics_state", "template 4.0 (WARN, GroupCoordinatorMetricsShard)",
         java("Unknown new share group state: Stable", level="WARN",
              logger="org.apache.kafka.coordinator.group.metrics.GroupCoordinatorMetricsShard"), None),

    # ---------------- 3.6 and 4.1-4.4 (tests/data/coordinator_templates.jsonl) ----------------
    Case("consumer_target_assignment_3_6", "template 3.6",
         java("[GroupId g1] Computed a new target assignment for epoch 5: {AbC=Assignment(partitions={})}."),
         [E(ev.TARGET_ASSIGNMENT, "g1", generation=5, group_type="consumer", offsets_partition=12)]),
    Case("share_member_joined", "template 3.9-4.4",
         java("[GroupId sg1] Member AbC joins the share group using the share protocol."),
         [E(ev.CONSUMER_MEMBER_JOINED, "sg1", member_id="AbC", group_type="share", protocol="share", static=False,
            group_instance_id=None, offsets_partition=12)]),
    Case("share_member_left", "template 3.9-4.4", java("[GroupId sg1] Member AbC left the share group."),
         [E(ev.CONSUMER_MEMBER_LEFT, "sg1", member_id="AbC", group_type="share", static=False, temporary=False,
            offsets_partition=12)]),
    Case("streams_epoch_bumped", "template 4.2-4.4",
         java("[GroupId st1][MemberId m1] Bumped streams group epoch to 12 with metadata hash -85634022 and "
              "validated topic epoch 0."),
         [E(ev.GROUP_EPOCH_BUMPED, "st1", generation=12, group_type="streams", prefix_member="m1",
            metadata_hash=-85634022, validated_topology_epoch=0, offsets_partition=12)]),
    Case("streams_epoch_bumped_4_1", "template 4.1",
         java("[GroupId st1][MemberId m1] Bumped streams group epoch to 12 with metadata hash 7."),
         [E(ev.GROUP_EPOCH_BUMPED, "st1", generation=12, group_type="streams", prefix_member="m1",
            metadata_hash=7, offsets_partition=12)]),
    Case("streams_member_joined", "template 4.1-4.4", java("[GroupId st1][MemberId m1] Member joins the streams group."),
         [E(ev.CONSUMER_MEMBER_JOINED, "st1", member_id="m1", group_type="streams", protocol="streams", static=False,
            group_instance_id=None, offsets_partition=12)]),
    Case("streams_static_member_joined", "template 4.4",
         java("[GroupId st1][MemberId m1] Static member m1 with instance id i-1 joins the streams group."),
         [E(ev.CONSUMER_MEMBER_JOINED, "st1", member_id="m1", group_type="streams", protocol="streams", static=True,
            group_instance_id="i-1", prefix_member="m1", offsets_partition=12)]),
    Case("streams_static_member_replaced", "template 4.4",
         java("[GroupId st1][MemberId m2] Static member with instance id i-1 re-joins the streams group using the "
              "streams protocol. Created a new member m2 to replace the existing member m1."),
         [E(ev.STATIC_MEMBER_REPLACED, "st1", member_id="m2", group_type="streams", protocol="streams",
            group_instance_id="i-1", old_member_id="m1", prefix_member="m2", offsets_partition=12)]),
    Case("streams_member_left", "template 4.1-4.4",
         java("[GroupId st1][MemberId m1] Member m1 left the streams group."),
         [E(ev.CONSUMER_MEMBER_LEFT, "st1", member_id="m1", group_type="streams", static=False, temporary=False,
            prefix_member="m1", offsets_partition=12)]),
    Case("streams_static_member_left", "template 4.4",
         java("[GroupId st1][MemberId m1] Static member m1 with instance id i-1 temporarily left the streams group."),
         [E(ev.CONSUMER_MEMBER_LEFT, "st1", member_id="m1", group_type="streams", static=True, temporary=True,
            group_instance_id="i-1", prefix_member="m1", offsets_partition=12)]),
    Case("streams_member_fenced_session", "template 4.1-4.4",
         java("[GroupId st1] Streams member m1 fenced from the group because the member session expired.."),
         [E(ev.CONSUMER_MEMBER_FENCED, "st1", member_id="m1", group_type="streams", fence_reason="session",
            offsets_partition=12)]),
    Case("streams_member_assignment_state", "template 4.1-4.4",
         java("[GroupId st1][MemberId m1] Member's new assignment state: epoch=12, previousEpoch=11, state=STABLE, "
              "assignedTasks={0=[0, 1]} and tasksPendingRevocation={}."),
         [E(ev.MEMBER_ASSIGNMENT_STATE, "st1", member_id="m1", group_type="streams", member_epoch=12,
            previous_member_epoch=11, state_name="STABLE", offsets_partition=12)]),
    Case("streams_assignment_configs_changed", "template 4.2-4.4",
         java("[GroupId st1][MemberId m1] Assignment configurations changed to {num.standby.replicas=1}. "
              "Triggering rebalance."),
         [E(ev.REBALANCE_REQUESTED, "st1", group_type="streams", trigger="metadata_change", prefix_member="m1",
            assignment_configs="{num.standby.replicas=1}", offsets_partition=12)]),
    Case("streams_member_metadata_updated", "template 4.3-4.4",
         java("[GroupId st1][MemberId m1] Member updated its member metadata to StreamsGroupMember(memberId=m1)."),
         [E(ev.REBALANCE_REQUESTED, "st1", group_type="streams", trigger="metadata_change", prefix_member="m1",
            offsets_partition=12)]),
    Case("streams_member_metadata_updated_4_1", "template 4.1",
         java("[GroupId st1] Member m1 updated its member metdata to StreamsGroupMember(memberId=m1)."),
         [E(ev.REBALANCE_REQUESTED, "st1", member_id="m1", group_type="streams", trigger="metadata_change",
            offsets_partition=12)]),
    Case("streams_topology_initialized", "template 4.1-4.4",
         java("[GroupId st1][MemberId m1] Member initialized the topology with epoch 0"),
         [E(ev.STREAMS_TOPOLOGY, "st1", group_type="streams", ready=None, prefix_member="m1", topology_epoch=0,
            offsets_partition=12)]),
    Case("streams_topology_ready", "template 4.2-4.4",
         java("[GroupId st1][MemberId m1] Valid topic configuration found in 120ms, topology epoch 0 is now "
              "initialized.", logger="org.apache.kafka.coordinator.group.streams.topics.InternalTopicManager"),
         [E(ev.STREAMS_TOPOLOGY, "st1", group_type="streams", ready=True, prefix_member="m1", topology_epoch=0,
            offsets_partition=12)]),
    Case("streams_topology_missing_topics", "template 4.3-4.4",
         java("[GroupId st1][MemberId m1] Valid topic configuration found in 120ms, but internal topics are missing "
              "for topology epoch 0: st1-store-changelog"),
         [E(ev.STREAMS_TOPOLOGY, "st1", group_type="streams", ready=False, not_ready_reason="internal_topics_missing",
            prefix_member="m1", topology_epoch=0, problem="st1-store-changelog", offsets_partition=12)]),
    Case("streams_topology_failed", "template 4.3-4.4 (WARN)",
         java("[GroupId st1][MemberId m1] Topic configuration failed for topology epoch 0 in 3ms: Number of "
              "partitions for source topic in1 is not known.", level="WARN"),
         [E(ev.STREAMS_TOPOLOGY, "st1", group_type="streams", ready=False,
            not_ready_reason="topic_configuration_failed", prefix_member="m1", topology_epoch=0,
            problem="Number of partitions for source topic in1 is not known.", offsets_partition=12)]),
    Case("streams_group_converted_from_classic", "template 4.2-4.4",
         java("[GroupId st1] Converted the empty classic group to a streams group."),
         [E(ev.GROUP_CONVERTED, "st1", to="streams", empty=True, offsets_partition=12)]),
    Case("streams_group_converted_to_classic", "template 4.2-4.4",
         java("[GroupId st1] Converted the empty streams group to a classic group."),
         [E(ev.GROUP_CONVERTED, "st1", to="classic", empty=True, offsets_partition=12)]),
    Case("streams_topology_4_1", "template 4.1",
         java("Valid topic configuration found, topology epoch 0 is now initialized.",
              logger="org.apache.kafka.coordinator.group.streams.topics.InternalTopicManager"), None),
    Case("streams_topology_configuring", "template 4.1-4.4",
         java("[GroupId st1][MemberId m1] Configuring the topology 0"), None),
    Case("streams_stale_topology_epoch", "template 4.1-4.4",
         java("[GroupId st1][MemberId m1] Member joined with stale topology epoch 0"), None),
    Case("streams_metadata_hash", "template 4.1-4.4",
         java("[GroupId st1][MemberId m1] Computed new metadata hash: 8563402215486210467."), None),
    Case("streams_shutdown_requested", "template 4.1-4.4",
         java("[GroupId st1][MemberId m1] Shutdown requested for the streams application."), None),
    Case("streams_topology_description", "template 4.4 (WARN)",
         unprefixed("Topology-description cleanup cycle is already started.",
                    "org.apache.kafka.coordinator.group.streams.StreamsGroupTopologyDescriptionManager",
                    level="WARN"), None),
    Case("streams_internal_errors", "template 4.2-4.4 (WARN)",
         java("[GroupId st1] Cannot compute delayed target assignment: configured topology is not present",
              level="WARN"), None),
    Case("streams_internal_errors", "template 4.4 (ERROR)",
         java("[GroupId st1] The refined assignment does not hand out as many active tasks as the target assignment. "
              "Reconciling towards the target assignment instead, so tasks that have to move do so without warming "
              "up first. Target assignment: {0=[0, 1]}, refined assignment: {0=[0]}.", level="ERROR"), None),
    Case("streams_task_assignor", "template 4.1 (ERROR)",
         unprefixed("Unable to assign active task 0_1 to any member.",
                    "org.apache.kafka.coordinator.group.streams.assignor.StickyTaskAssignor", level="ERROR"), None),
    Case("java_cleanup_generated_4_3", "template 4.3-4.4",
         java("Generated 3 tombstone records in 12 milliseconds while deleting offsets for topics [t1].",
              logger="org.apache.kafka.coordinator.group.GroupCoordinatorShard"), None),
    Case("java_runtime_failures_4_x", "template 4.2-4.4 (WARN)",
         java("Tried to flush an empty batch for __consumer_offsets-12.", level="WARN",
              logger="org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime"), None),
    Case("group_config_capped", "template 4.3-4.4 (WARN)",
         unprefixed("The group config 'consumer.session.timeout.ms' for group 'g1' has value 100 which is below "
                    "the broker's allowed minimum 1000. The effective value will be capped to 1000.",
                    "org.apache.kafka.coordinator.group.GroupConfig", level="WARN"), None),
    Case("share_group_state_bookkeeping", "template 4.2-4.4 (WARN)",
         java("Some topics for share group id sg1 were not found in the metadata image - [t1]", level="WARN"),
         None),
    Case("delayed_target_assignment", "template 4.2-4.4",
         java("[GroupId g1] Skipping delayed target assignment: group is empty"), None),
    Case("assignment_epochs_mismatch", "template 4.3-4.4 (ERROR)",
         java("[GroupId g1] Size of assignment epochs 2 is not equal to partitions 3 for topic t1. Using default "
              "epoch 5 for all partitions.", level="ERROR"), None),
    Case("server_side_assignor", "template 3.7-4.0",
         unprefixed("The subscription list is empty, returning an empty assignment",
                    "org.apache.kafka.coordinator.group.assignor.UniformHeterogeneousAssignmentBuilder"), None),
    Case("network_partition_metadata_client", "template 4.2-4.4",
         unprefixed("NetworkPartitionMetadataClient sendThread initialized and started",
                    "org.apache.kafka.coordinator.group.NetworkPartitionMetadataClient"), None),
    Case("group_error_free_text", "template 3.7-4.4 (ERROR)",
         java("[GroupId g1] Failed to compute a new target assignment for epoch 5: boom.", level="ERROR"), None),
]


def _fixture_text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8", errors="replace")


def _project(event: ev.Event) -> dict[str, Any]:
    return {"kind": event.kind, "group": event.group, "broker": event.broker, "generation": event.generation,
            "member_id": event.member_id, "reason": event.reason, "data": event.data}


@pytest.mark.parametrize("case", CASES, ids=[f"{c.entry}@{c.origin}" for c in CASES])
def test_catalog_case(case: Case) -> None:
    if not case.origin.startswith("template"):
        assert case.line + "\n" in _fixture_text(case.origin), "fixture line must be copied verbatim"
    parsed = bl.parse_line_detailed(case.line, source_id="src-1", seq=42, tz=UTC)
    assert parsed.entry is not None and parsed.entry.name == case.entry
    if case.expected is None:
        assert parsed.outcome == bl.OUTCOME_IGNORED
        assert parsed.result is None
        return
    assert parsed.outcome == bl.OUTCOME_EVENTS
    assert isinstance(parsed.result, list)
    assert [_project(e) for e in parsed.result] == case.expected
    for event in parsed.result:
        assert (event.source, event.source_id, event.seq) == (ev.SOURCE_LOG, "src-1", 42)
        assert event.ts_ms == utc_ms(case.line)
        assert event.kind in ev.LOG_KINDS
        if event.kind == ev.PREPARE_REBALANCE:
            assert event.data["trigger"] in ev.TRIGGERS


def test_every_catalog_entry_has_a_case() -> None:
    names = [e.name for e in catalog.CATALOG]
    assert len(names) == len(set(names)), "catalog entry names must be unique"
    assert set(names) == {c.entry for c in CASES}


def test_catalog_entries_are_well_formed() -> None:
    for entry in catalog.CATALOG:
        assert entry.family in ("scala", "java", "both"), entry.name
        assert entry.kind is None or entry.kind in ev.LOG_KINDS, entry.name
        assert entry.versions, entry.name


# --- exactly one entry per line --------------------------------------------------------------------

def _family(logger: str) -> str | None:
    """scala (kafka.coordinator.group.*, 0.10.2's kafka.coordinator.*), java, or None."""
    return layout.full_logger_family(logger)


def _matching_entries(line: str) -> list[str]:
    header = layout.HEADER_RE.match(line)
    assert header is not None, line
    family, level = _family(header.group(4)), header.group(2)
    _, _, body = layout.split_coordinator_prefix(header.group(3))
    found = [e for e in catalog.CATALOG if e.family in (family, "both") and e.pattern.fullmatch(body)
             and (e.levels is None or level in e.levels)]
    specific = [e.name for e in found if not e.fallback]
    return specific or [e.name for e in found]


def _coordinator_lines(name: str) -> list[str]:
    return [line for _, line in files.iter_log_file(str(FIXTURES / name))
            if (header := layout.HEADER_RE.match(line)) and _family(header.group(4))]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.entry}@{c.origin}" for c in CASES])
def test_case_matches_exactly_one_entry(case: Case) -> None:
    # A linear scan over the whole catalog, independent of the first-word dispatch.
    assert _matching_entries(case.line) == [case.entry]


@pytest.mark.parametrize("name", LOG_FILES)
def test_fixture_lines_match_at_most_one_entry(name: str) -> None:
    for line in _coordinator_lines(name):
        assert len(_matching_entries(line)) <= 1, line


# --- whole files ---------------------------------------------------------------------------------

# kind -> substrings; a line counts once if it contains any of them. Counted on the raw file, on
# lines naming a coordinator logger. In these captures each such line yields exactly one event.
KIND_MARKERS = {
    ev.PREPARE_REBALANCE: ["Preparing to rebalance group"],
    ev.JOIN_COMPLETE: ["Stabilized group"],
    ev.ASSIGNMENT_RECEIVED: ["Assignment received from leader"],
    ev.GROUP_EMPTY: ["is now empty"],
    ev.MEMBER_FAILED: ["has failed, removing it from the group"],
    ev.MEMBER_LEFT: ["has left, removing it from the group", "has left group through explicit `LeaveGroup`"],
    ev.MEMBERS_NOT_JOINED: ["members who haven't joined"],
    ev.MEMBER_CREATED: ["Created a new member id", "Pending dynamic member with id", "Adding new static member"],
    ev.STATIC_MEMBER_REPLACED: ["with unknown member id rejoins", "Replacing previously mapped member"],
    ev.GROUP_DEAD: ["transitioned to Dead"],
    ev.GROUP_DELETED: ["The following groups were deleted"],
    ev.GROUP_LOADED: ["Loading group metadata for", "Loaded classic group", "Loaded consumer group"],
    ev.GROUP_UNLOADED: ["Unloading group metadata for"],
    ev.CONSUMER_MEMBER_JOINED: ["joins the consumer group using the"],
    ev.CONSUMER_MEMBER_LEFT: ["left the consumer group"],
    ev.CONSUMER_MEMBER_FENCED: ["fenced from the group"],
    ev.GROUP_EPOCH_BUMPED: ["Bumped group epoch to"],
    ev.TARGET_ASSIGNMENT: ["Computed a new target assignment"],
    ev.GROUP_CONVERTED: ["] Converted the "],
}


# The broker lines the monitor reads (streaming/logs/brokers.py), found by plain substrings.
BROKER_KIND_MARKERS = {
    ev.BROKER_STARTING: ["] starting (kafka.server.KafkaServer)", "Transition from SHUTDOWN to STARTING"],
    ev.BROKER_SHUTTING_DOWN: ["] shutting down (kafka.server.KafkaServer)", "Transition from STARTED to SHUTTING_DOWN",
                              "Transition from STARTING to SHUTTING_DOWN"],
    ev.BROKER_STARTED: ["] started (kafka.server.KafkaServer)"],
    ev.BROKER_UNREACHABLE: ["could not be established. Broker may not be available. (org.apache.kafka.clients",
                            "could not be established. Node may not be available. (org.apache.kafka.clients"],
}


def _parse_file(name: str):
    return list(bl.parse_log_file(str(FIXTURES / name), tz=UTC, source_id=name))


@pytest.mark.parametrize("name", LOG_FILES)
def test_real_log_has_no_quarantine_and_expected_kind_counts(name: str) -> None:
    parsed = _parse_file(name)
    outcomes = collections.Counter(p.outcome for _, _, p in parsed)
    assert outcomes[bl.OUTCOME_UNKNOWN] == 0 and outcomes[bl.OUTCOME_UNPARSEABLE] == 0, [
        line for _, line, p in parsed if isinstance(p.result, Quarantined)][:5]

    kinds = collections.Counter(e.kind for _, _, p in parsed if p.outcome in (bl.OUTCOME_EVENTS, bl.OUTCOME_BROKER)
                                for e in p.result)
    assert not any(e.kind in ev.BROKER_KINDS for _, _, p in parsed if p.outcome == bl.OUTCOME_EVENTS for e in p.result)
    raw_lines = [line for _, line, _ in parsed
                 if any(marker in line for marker in layout.COORDINATOR_LOGGER_MARKERS)]
    expected = {kind: sum(1 for line in raw_lines if any(s in line for s in subs))
                for kind, subs in KIND_MARKERS.items()}
    assert {k: n for k, n in kinds.items() if k not in ev.BROKER_KINDS} == {k: n for k, n in expected.items() if n}
    # the broker lines read for broker deaths, and only those (the captures' replica fetchers always
    # reached their leaders: no unreachable peer, no ISR shrink of __consumer_offsets)
    broker_expected = {kind: sum(1 for _, line, _ in parsed if any(s in line for s in subs))
                       for kind, subs in BROKER_KIND_MARKERS.items()}
    assert {k: n for k, n in kinds.items() if k in ev.BROKER_KINDS} == {k: n for k, n in broker_expected.items() if n}
    assert any(k in ev.BROKER_KINDS for k in kinds)

    # Every coordinator line is either an event or recognised; nothing else comes out of them.
    for _, line, p in parsed:
        if (header := layout.HEADER_RE.match(line)) and _family(header.group(4)):
            assert p.outcome in (bl.OUTCOME_EVENTS, bl.OUTCOME_IGNORED), line
        elif p.outcome == bl.OUTCOME_BROKER:
            assert {e.kind for e in p.result} <= ev.BROKER_KINDS and layout.has_broker_marker(line), line
        else:
            assert p.result is None and p.outcome in (bl.OUTCOME_NOT_COORDINATOR, bl.OUTCOME_CONTINUATION), line
    for seq, _, p in parsed:
        for event in p.result or []:
            assert event.seq == seq and event.source_id == name


def _kind_totals(version: str) -> collections.Counter:
    totals: collections.Counter = collections.Counter()
    for name in LOG_FILES:
        if name.startswith(version):
            totals.update(e.kind for _, _, p in _parse_file(name) if p.outcome == bl.OUTCOME_EVENTS for e in p.result)
    return totals


def test_kafka_4_0_totals_match_capture_log_events() -> None:
    # Counts of /work/shared/captures/kafka-4.0/log-group-events.jsonl, written by the capture's own
    # analysis script from both node logs (an independent parser).
    totals = _kind_totals("kafka-4.0")
    assert totals[ev.PREPARE_REBALANCE] == 61
    assert totals[ev.JOIN_COMPLETE] == 40
    assert totals[ev.ASSIGNMENT_RECEIVED] == 39
    assert totals[ev.MEMBER_LEFT] == 46
    assert totals[ev.GROUP_EPOCH_BUMPED] == 45
    assert totals[ev.TARGET_ASSIGNMENT] == 31
    assert totals[ev.CONSUMER_MEMBER_JOINED] == 26
    assert totals[ev.GROUP_EMPTY] == 21
    assert totals[ev.CONSUMER_MEMBER_LEFT] == 19
    assert totals[ev.MEMBER_FAILED] == 9
    assert totals[ev.GROUP_UNLOADED] == 8
    assert totals[ev.GROUP_LOADED] == 6
    assert totals[ev.CONSUMER_MEMBER_FENCED] == 4
    assert totals[ev.GROUP_CONVERTED] == 3
    assert totals[ev.STATIC_MEMBER_REPLACED] == 1
    assert totals[ev.GROUP_DELETED] == 1
    assert totals[ev.MEMBER_CREATED] == 50 + 50 + 4 + 1  # new ids, pending joins, static new, KIP-848 classic


def test_kafka_2_7_totals_match_capture_readme() -> None:
    # README: "It followed every one of the 54 'Stabilized' lines"; 10 groups expired (+sc08 itself).
    totals = _kind_totals("kafka-2.7")
    assert totals[ev.JOIN_COMPLETE] == 54
    assert totals[ev.ASSIGNMENT_RECEIVED] == 54
    assert totals[ev.GROUP_DEAD] == 11
    assert totals[ev.MEMBERS_NOT_JOINED] == 2
    assert totals[ev.GROUP_DELETED] == 1


# --- rebalance reasons -----------------------------------------------------------------------------

@pytest.mark.parametrize("reason, expected", [
    # 2.1-2.2 / 2.5-3.1 / 3.2-4.0 / Java: joins
    ("Adding new member c-1", {"trigger": "member_join", "trigger_member": "c-1"}),
    ("Adding new member c-1 with group instanceid Some(i1)", {"trigger": "member_join", "trigger_member": "c-1"}),
    ("Adding new member c-1 with group instance id None; client reason: need to re-join with the given member-id: c-1",
     {"trigger": "member_join", "trigger_member": "c-1",
      "client_reason": "need to re-join with the given member-id: c-1"}),
    ("Adding new member c-1 with group instance id None; client reason: ",  # 3.2+ client sends ""
     {"trigger": "member_join", "trigger_member": "c-1", "client_reason": ""}),
    ("Member c-1 joining group during PreparingRebalance; client reason: r",
     {"trigger": "member_join", "trigger_member": "c-1", "client_reason": "r"}),
    ("Member c-1 is joining group during Stable; client reason: not provided",
     {"trigger": "member_join", "trigger_member": "c-1", "client_reason": "not provided"}),
    # leaves
    ("removing member c-1 on LeaveGroup", {"trigger": "member_leave", "trigger_member": "c-1"}),
    ("Removing member c-1 on LeaveGroup; client reason: the consumer is being closed",
     {"trigger": "member_leave", "trigger_member": "c-1", "client_reason": "the consumer is being closed"}),
    ("Removing member c-1 on LeaveGroup; client reason: consumer poll timeout has expired.",
     {"trigger": "poll_timeout", "trigger_member": "c-1", "client_reason": "consumer poll timeout has expired."}),
    ("explicit `LeaveGroup` request for (c-1, c-2) members.",
     {"trigger": "member_leave", "trigger_member_ids": ["c-1", "c-2"]}),
    # the client's free text does not change the coordinator's classification
    ("Removing member c-1 on LeaveGroup; client reason: Adding new member x",
     {"trigger": "member_leave", "trigger_member": "c-1", "client_reason": "Adding new member x"}),
    # expiry
    ("removing member c-1 on heartbeat expiration", {"trigger": "heartbeat_expiry", "trigger_member": "c-1"}),
    ("removing member c-1 on heartbeat expiration.", {"trigger": "heartbeat_expiry", "trigger_member": "c-1"}),
    # leader / metadata / static
    ("leader c-1 re-joining group during Stable", {"trigger": "leader_rejoin", "trigger_member": "c-1"}),
    ("Leader c-1 re-joining group during Stable; client reason: not provided",
     {"trigger": "leader_rejoin", "trigger_member": "c-1", "client_reason": "not provided"}),
    ("Updating metadata for member c-1", {"trigger": "metadata_change", "trigger_member": "c-1"}),
    ("Updating metadata for member c-1 during CompletingRebalance; client reason: r",
     {"trigger": "metadata_change", "trigger_member": "c-1", "client_reason": "r"}),
    ("Group's selectedProtocol will change because static member i1-x with instance id Some(i1) joined with change of protocol",
     {"trigger": "static_member_replaced", "trigger_member": "i1-x"}),
    ("Updating metadata for static member i1-x with instance id i1; client reason: r",
     {"trigger": "static_member_replaced", "trigger_member": "i1-x", "client_reason": "r"}),
    ("Downgrade group g1 from consumer to classic.", {"trigger": "group_conversion"}),
    ("Downgrade group g1 from consumer to classic for member leaving.", {"trigger": "member_leave"}),
    ("Downgrade group g1 from consumer to classic for static member replacement with different subscription.",
     {"trigger": "static_member_replaced"}),
    ("Downgrade group g1 from consumer to classic with stale assignment.", {"trigger": "group_conversion"}),
    # timeouts / failover / errors
    ("Removing Set(c-1, c-2) on pending sync request expiration",
     {"trigger": "rebalance_timeout", "trigger_member_ids": ["c-1", "c-2"]}),
    ("Removing [c-1] on pending sync request expiration",
     {"trigger": "rebalance_timeout", "trigger_member_ids": ["c-1"], "trigger_member": "c-1"}),
    ("Freshly-loaded group is over capacity (GroupConfig(...).groupMaxSize). Rebalacing in order to give a chance for consumers to commit offsets",
     {"trigger": "coordinator_failover"}),
    ("Freshly-loaded group g1 (size 5) is over capacity 3. Rebalancing in order to give a chance for consumers to commit offsets",
     {"trigger": "coordinator_failover"}),
    ("error when storing group assignment during SyncGroup (member: c-1)",
     {"trigger": "assignment_store_failed", "trigger_member": "c-1"}),
    ("Error NOT_COORDINATOR when storing group assignmentduring SyncGroup (member: c-1).",
     {"trigger": "assignment_store_failed", "trigger_member": "c-1"}),
    ("something a future version says", {"trigger": "unknown"}),
    (None, {"trigger": "unknown"}),
])
def test_classify_rebalance_reason(reason: str | None, expected: dict) -> None:
    assert reasons.classify_rebalance_reason(reason) == expected


# --- timestamps ------------------------------------------------------------------------------------

def test_timezone_shifts_epoch_by_the_local_offset() -> None:
    line = CASES[0].line  # 2026-11-21 19:21:58,686 (CET, UTC+1 in Berlin)
    as_utc = events_of(line, source_id="s", seq=1, tz=UTC)[0].ts_ms
    as_berlin = events_of(line, source_id="s", seq=1, tz=ZoneInfo("Europe/Berlin"))[0].ts_ms
    assert as_utc == utc_ms(line) == 1795288918686
    assert as_utc - as_berlin == 3_600_000
    summer = scala("Stabilized group g1 generation 5 (__consumer_offsets-12)").replace(TEMPLATE_TS, "2024-07-01 12:00:00,250")
    assert (events_of(summer, source_id="s", seq=1, tz=UTC)[0].ts_ms
            - events_of(summer, source_id="s", seq=1, tz=ZoneInfo("Europe/Berlin"))[0].ts_ms) == 7_200_000


def test_local_ts_conversion_matches_datetime_across_dst() -> None:
    berlin = ZoneInfo("Europe/Berlin")
    for ts in ["2024-03-31 01:59:59,999", "2024-03-31 03:00:00,000", "2024-10-27 01:59:59,999",
               "2024-10-27 02:30:00,500", "2024-10-27 03:00:00,000", "2024-12-31 23:59:59,999"]:
        naive = datetime.strptime(ts, "%Y-%m-%d %H:%M:%S,%f")
        expected = round(naive.replace(tzinfo=berlin).timestamp() * 1000)  # fold=0: first occurrence
        assert log4j_to_epoch_ms(ts, berlin) == expected, ts
        assert log4j_to_epoch_ms(ts, berlin) == expected, ts  # second call hits the cache


# --- garbage, continuations, non-coordinator lines -------------------------------------------------

def test_truncated_header_with_coordinator_marker_is_unparseable() -> None:
    """A layout that is not understood (here: a cut line) is quarantined as unparseable and told
    apart from an unknown template (outcome unknown_layout)."""
    line = ("[2026-11-21 19:21:26,163] INFO [GroupCoordinator 2]: Preparing to rebalance group sc01 "
            "(kafka.coordinator.group.GroupCoord")
    parsed = bl.parse_line_detailed(line, source_id="f.log", seq=7, tz=UTC)
    assert parsed.outcome == bl.OUTCOME_UNKNOWN_LAYOUT
    result = parsed.result
    assert isinstance(result, Quarantined)
    assert (result.reason, result.source, result.source_id, result.seq, result.raw) == (
        "unparseable_line", ev.SOURCE_LOG, "f.log", 7, line)


def test_garbled_line_and_bad_timestamp_are_unparseable() -> None:
    garbled = "19:21:26,163 INFO [GroupCoordinator 2]: Stabilized group g (kafka.coordinator.group.GroupCoordinator)"
    quarantined = bl.parse_line(garbled, source_id="f", seq=1, tz=UTC)
    assert isinstance(quarantined, Quarantined)
    assert quarantined.reason == "unparseable_line"
    bad_date = scala("Stabilized group g1 generation 5 (__consumer_offsets-12)").replace(TEMPLATE_TS, "2026-13-45 19:21:26,163")
    quarantined = bl.parse_line(bad_date, source_id="f", seq=1, tz=UTC)
    assert isinstance(quarantined, Quarantined)
    assert quarantined.reason == "unparseable_line"


@pytest.mark.parametrize("line", [
    scala("Something new happened to group g1"),
    scala("Something new happened to group g1", level="WARN"),
    java("[GroupId g1] Member AbC did something new.", level="WARN"),
    unprefixed("Unexpected loader message", "org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime"),
])
def test_unknown_coordinator_message_is_quarantined(line: str) -> None:
    parsed = bl.parse_line_detailed(line, source_id="f.log", seq=3, tz=UTC)
    assert parsed.outcome == bl.OUTCOME_UNKNOWN and parsed.entry is None
    assert isinstance(parsed.result, Quarantined)
    assert parsed.result.reason == "unknown_coordinator_line"
    assert parsed.result.raw == line and parsed.result.ts_ms == utc_ms(line)


def test_quarantined_raw_is_truncated() -> None:
    line = scala("Something new " + "x" * 5000)
    result = bl.parse_line(line, source_id="f", seq=1, tz=UTC)
    assert isinstance(result, Quarantined) and result.raw == line[:2000]


def test_unmatched_debug_lines_are_ignored_not_quarantined() -> None:
    debug_unknown = scala("Member c-1 has already been removed from the group.", level="DEBUG")
    parsed = bl.parse_line_detailed(debug_unknown, source_id="f", seq=1, tz=UTC)
    assert (parsed.outcome, parsed.result) == (bl.OUTCOME_DEBUG, None)
    # 4.0 logs the target assignment at INFO and again, with the assignment, at DEBUG: no duplicate event.
    debug_dup = java("[GroupId g1] Computed a new target assignment for epoch 8 with 'uniform' assignor in 3ms: {AbC=x}.",
                     level="DEBUG")
    assert bl.parse_line_detailed(debug_dup, source_id="f", seq=1, tz=UTC).outcome == bl.OUTCOME_DEBUG


@pytest.mark.parametrize("line", [
    "\tat kafka.coordinator.group.GroupCoordinator.handleJoinGroup(GroupCoordinator.scala:123)",
    "    at org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime.run(CoordinatorRuntime.java:10)",
    "at kafka.coordinator.group.GroupMetadataManager.storeGroup(GroupMetadataManager.scala:300)",
    "Caused by: org.apache.kafka.common.errors.NotCoordinatorException: This is not the correct coordinator.",
    "\t... 12 more",
    "... 3 more",
    "java.io.IOException: Connection reset by peer",
    "org.apache.kafka.common.errors.CoordinatorLoadInProgressException",
    "kafka.common.KafkaException: kafka.coordinator.group.GroupCoordinator failed",
    "",
])
def test_continuation_lines_belong_to_previous_entry(line: str) -> None:
    assert layout.is_continuation(line)
    parsed = bl.parse_line_detailed(line, source_id="f", seq=1, tz=UTC)
    assert (parsed.outcome, parsed.result) == (bl.OUTCOME_CONTINUATION, None)


@pytest.mark.parametrize("line", [
    CASES[0].line,
    "[2026-11-21 19:21:26,163] INFO [KafkaServer id=1] started (kafka.server.KafkaServer)",
    "Some random text",
    "group.coordinator.rebalance.protocols = [classic, consumer]",
])
def test_not_continuation(line: str) -> None:
    assert not layout.is_continuation(line)


@pytest.mark.parametrize("line", [
    "[2026-11-21 19:21:26,163] INFO [KafkaServer id=1] Starting controlled shutdown (kafka.server.KafkaServer)",
    "[2026-11-21 19:21:26,163] INFO [Partition topic-1 broker=1] Shrinking ISR from 1,2 to 1. Leader: (highWatermark: "
    "1, endOffset: 2). Out of sync replicas: (brokerId: 2, endOffset: 1). (kafka.cluster.Partition)",
    "[2026-11-21 19:21:26,163] WARN [Producer clientId=x] Connection to node 2 (/127.0.0.1:1) could not be "
    "established. Node may not be available. (org.apache.kafka.clients.NetworkClient)",
    "[2026-11-21 19:21:26,163] INFO [TransactionCoordinator id=1] Starting up. (kafka.coordinator.transaction.TransactionCoordinator)",
    "[2026-11-21 19:21:26,163] INFO [ShareCoordinator id=1] Closing coordinator runtime. (org.apache.kafka.coordinator.common.runtime.CoordinatorRuntime)",
    "[2026-11-21 19:21:26,163] INFO [share-coordinator-event-processor-0]: Starting (org.apache.kafka.coordinator.common.runtime.MultiThreadedEventProcessor$EventProcessorThread)",
    "[2026-11-21 19:21:26,163] INFO [KafkaApi-1] mentions kafka.coordinator.group.GroupCoordinator in its text (kafka.server.KafkaApis)",
    "Some random text without a header",
])
def test_non_coordinator_lines_yield_nothing(line: str) -> None:
    parsed = bl.parse_line_detailed(line, source_id="f", seq=1, tz=UTC)
    assert (parsed.outcome, parsed.result) == (bl.OUTCOME_NOT_COORDINATOR, None)


def test_lines_without_any_marker_never_yield_anything() -> None:
    for name in LOG_FILES:
        for seq, line in files.iter_log_file(str(FIXTURES / name)):
            if not any(marker in line for marker in layout.COORDINATOR_LOGGER_MARKERS):
                result = bl.parse_line(line, source_id=name, seq=seq, tz=UTC)
                assert result is None or (layout.has_broker_marker(line) and isinstance(result, list) and all(
                    e.kind in ev.BROKER_KINDS and e.group == ev.BROKER_EVENTS_GROUP for e in result)), line


# --- broker id ---------------------------------------------------------------------------------------

def test_broker_comes_from_prefix_else_default() -> None:
    no_prefix = unprefixed("Stabilized group g1 generation 5 (__consumer_offsets-12)", SCALA_GC)
    assert events_of(no_prefix, source_id="f", seq=1, tz=UTC, default_broker=7)[0].broker == 7
    assert events_of(no_prefix, source_id="f", seq=1, tz=UTC)[0].broker is None
    prefixed = scala("Stabilized group g1 generation 5 (__consumer_offsets-12)", broker=3)
    assert events_of(prefixed, source_id="f", seq=1, tz=UTC, default_broker=7)[0].broker == 3


def test_split_coordinator_prefix() -> None:
    assert layout.split_coordinator_prefix("[GroupCoordinator 2]: Starting up.") == (2, None, "Starting up.")
    assert layout.split_coordinator_prefix("[GroupMetadataManager brokerId=5] Removed 1 expired offsets in 2 milliseconds.") == (
        5, None, "Removed 1 expired offsets in 2 milliseconds.")
    assert layout.split_coordinator_prefix("[GroupCoordinator id=1 topic=__consumer_offsets partition=49] x") == (1, 49, "x")
    assert layout.split_coordinator_prefix("[GroupCoordinator id=3] y") == (3, None, "y")
    assert layout.split_coordinator_prefix("[GroupId g] z") == (None, None, "[GroupId g] z")


# --- files -------------------------------------------------------------------------------------------

def test_iter_log_file_is_one_based_and_tolerates_bad_utf8(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(b"first\r\nsecond \xff\xfe bytes\nthird")
    assert list(files.iter_log_file(str(path))) == [
        (1, "first"), (2, "second \ufffd\ufffd bytes"), (3, "third")]


def test_parse_log_file_reports_every_line() -> None:
    name = LOG_FILES[0]
    parsed = list(bl.parse_log_file(str(FIXTURES / name), tz=UTC))
    assert [seq for seq, _, _ in parsed] == list(range(1, len(_fixture_text(name).splitlines()) + 1))
