"""A capture of share and streams groups on a real 4.2+ cluster, in the layout of the bundled
captures (tests/fixtures/kafka-*): each broker's server.log, the whole `__consumer_offsets`
topic as a JSONL dump, and the ground-truth timeline of what was done to the groups.

`scripts/capture-modern-groups VERSION OUT_DIR` is `main`. What it does (4.2+, 2 brokers, the
bed's short timeouts: share and streams sessions 6 s):
  share:   members a and b join; b is SIGKILLed (its session expires: a fence); c joins;
           a and c close (leave).
  streams: instance a starts; b starts (the tasks move); b is SIGKILLed (a fence); a closes.
"""
from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
from pathlib import Path

from testbed.bed.capture import read_topic
from testbed.bed.cluster import KafkaCluster
from testbed.bed.members import MemberSpec
from testbed.bed.procs import BedError
from testbed.bed.runner import Runner
from testbed.bed.running import java_libs
from testbed.bed.shipper import LogShipper


def dump_offsets_topic(bootstrap: str, out: Path, timeout: float = 60.0) -> int:
    """Every record of __consumer_offsets, to the current end of each partition, in the dump
    format `replay --offsets` reads."""
    rows = read_topic(bootstrap, None, timeout)
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return len(rows)


def _fence_line(runner: Runner, group: str, since: dict, streams: bool) -> None:
    pattern = (rf"\[GroupId {re.escape(group)}\] Streams member \S+ fenced" if streams
               else rf"\[GroupId {re.escape(group)}\] Member \S+ fenced from the group")
    line = runner.wait_log(pattern, 60, since)[0]
    runner.record("fenced_logged", group=group, ts_ms=line.read_ms)


def share(runner: Runner, group: str, topic: str) -> None:
    def spec(c: str) -> MemberSpec:
        return MemberSpec("java-share", group, [topic], f"{group}-{c}")
    # A share consumer has no rebalance callback (its "assigned" comes at subscribe time): the
    # broker's join line says it is in the group.
    joined = rf"\[GroupId {re.escape(group)}\] Member \S+ joins the share group"
    since = runner.shipper.mark()
    a = runner.start(spec("a"), wait=False)
    b = runner.start(spec("b"), wait=False)
    runner.wait_log(joined, 60, since, count=2)
    runner.record("joined_logged", group=group, members=2)
    since = runner.shipper.mark()
    runner.kill(b)
    _fence_line(runner, group, since, streams=False)
    since = runner.shipper.mark()
    c = runner.start(spec("c"), wait=False)
    runner.wait_log(joined, 60, since)
    runner.record("joined_logged", group=group, members=1)
    runner.leave(a)
    runner.leave(c)


def streams(runner: Runner, group: str, topic: str) -> None:
    runner.cluster.create_topic(f"{group}-out", 1, 1)

    def spec(c: str) -> MemberSpec:
        return MemberSpec("java-streams", group, [topic], f"{group}-{c}", protocol="streams")
    a = runner.start(spec("a"))
    mark = a.mark()
    b = runner.start(spec("b"))
    runner.wait_reassigned([a], [mark])
    since = runner.shipper.mark()
    runner.kill(b)
    _fence_line(runner, group, since, streams=True)
    since = runner.shipper.mark()
    runner.leave(a)
    # Kafka Streams may close without leaving: its session then expires (6 s).
    runner.wait_log(rf"\[GroupId {re.escape(group)}\].* (?:left the streams group|fenced from the group)", 30, since)
    runner.record("gone_logged", group=group, member=a)


def capture(version: str, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    java_lib, streams_lib, notes = java_libs(version)
    if java_lib is None or streams_lib is None:
        raise BedError(f"the Java share/streams members need kafka-clients and kafka-streams: {notes}")
    work = out / "work"
    with KafkaCluster(version, workdir=work / "cluster") as cluster:
        shipper = LogShipper(cluster, "kafkabed-broker-logs").start()
        try:
            runner = Runner(cluster, work, shipper, java_lib, streams_lib)
            for name, drive in (("share", share), ("streams", streams)):
                group = f"k{version.replace('.', '')}-{name}"
                topic = runner.topic(f"{group}-in", 2, 1)
                runner.record("scenario", group=group, scenario=name)
                drive(runner, group, topic)
            runner.close()
            shipper.wait_acked()
            records = dump_offsets_topic(cluster.bootstrap, out / "offsets-topic.jsonl")
        finally:
            shipper.stop(drain=False, timeout=10)
        for broker_id in cluster.running_brokers():
            shutil.copy(cluster.server_log_path(broker_id), out / f"broker{broker_id}-server.log")
    shutil.copy(work / "timeline.jsonl", out / "ground-truth.jsonl")
    shutil.rmtree(work)
    return {"version": version, "offsets_records": records, "notes": notes}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="scripts/capture-modern-groups", description=__doc__.split("\n\n")[0])
    p.add_argument("version", help="Kafka 4.2 or newer, e.g. 4.4.0")
    p.add_argument("out", type=Path, help="the capture directory (created)")
    args = p.parse_args(argv)
    try:
        summary = capture(args.version, args.out)
    except (BedError, TimeoutError) as exc:
        print(f"capture-modern-groups: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
