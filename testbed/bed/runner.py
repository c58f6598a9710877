"""The scenario runner: drives members and the cluster, and records the ground truth.

Every action goes to the timeline (JSON lines: action, group, member, client_id, ts_ms
(epoch ms UTC, taken right before the action), pid, plus action fields), and waits are on
events: a member's "assigned" line, a shipped server.log line, a process exit."""
from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

from testbed.bed.members import Member, MemberSpec
from testbed.bed.procs import BedError, wait_for


def now_ms() -> int:
    return time.time_ns() // 1_000_000


class DataProducer(threading.Thread):
    """A steady trickle of records (`rate` per second) so members have something to consume
    and commit (offset commits are what __consumer_offsets must show). The client's partitioner
    spreads them at random; with `partitions`, they go round the partitions in turn, so each gets
    rate / partitions a second, evenly (what a partition received over a few seconds is then
    known, not a draw)."""

    def __init__(self, bootstrap: str, topic: str, rate: float = 20.0, partitions: int | None = None):
        super().__init__(name=f"kafkabed-data-{topic}", daemon=True)
        from confluent_kafka import Producer
        self.topic, self.rate, self.partitions = topic, rate, partitions
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "log_level": 2})
        self._halt = threading.Event()
        self.sent = 0

    def run(self) -> None:
        while not self._halt.wait(1.0 / self.rate):
            try:
                # -1: the client's partitioner picks (produce's own default)
                partition = self.sent % self.partitions if self.partitions else -1
                self._producer.produce(self.topic, value=f"{self.sent}".encode(), partition=partition)
                self.sent += 1
            except BufferError:
                pass
            self._producer.poll(0)

    def stop(self) -> None:
        self._halt.set()
        self.join(5)
        self._producer.flush(5)


class Runner:
    def __init__(self, cluster, out_dir: Path, shipper=None, java_lib: Path | None = None,
                 streams_lib: Path | None = None):
        self.cluster, self.shipper = cluster, shipper
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.java_lib, self.streams_lib = java_lib, streams_lib
        self.timeline: list[dict] = []
        self.members: list[Member] = []
        self.producers: list[DataProducer] = []
        self._file = open(self.out_dir / "timeline.jsonl", "a")
        self._seq = 0

    # ------------------------------------------------------------------ ground truth
    def record(self, action: str, group: str | None = None, member: Member | None = None,
               ts_ms: int | None = None, **fields) -> dict:
        entry = {"action": action, "group": group, "ts_ms": ts_ms or now_ms()}
        if member is not None:
            entry.update(member=member.spec.client_id, client_id=member.spec.client_id, pid=member.pid,
                         library=member.spec.library, protocol=member.spec.protocol,
                         instance_id=member.spec.instance_id, group=member.spec.group, host=member.spec.host)
        entry.update(fields)
        self.timeline.append(entry)
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()
        return entry

    def mark(self) -> int:
        return len(self.timeline)

    # ------------------------------------------------------------------ setup
    def topic(self, name: str, partitions: int = 4, rf: int = 1, rate: float = 20.0, in_turn: bool = False) -> str:
        """A topic, and (`rate`) a producer writing to it: `in_turn`, to each partition in turn."""
        self.cluster.create_topic(name, partitions, rf)
        self.record("create_topic", topic=name, partitions=partitions)
        if rate:
            prod = DataProducer(self.cluster.bootstrap, name, rate, partitions if in_turn else None)
            prod.start()
            self.producers.append(prod)
        return name

    def add_partitions(self, topic: str, total: int, groups: list[str]) -> None:
        """Increases `topic` to `total` partitions. `groups`: the groups subscribed to it, whose
        epoch-based (KIP-848 consumer, streams) coordinators bump their epoch for the new metadata
        (the judge's `metadata_change`); the entry names the first as its `group` and all in `groups`."""
        self.record("add_partitions", group=groups[0] if groups else None, groups=list(groups), topic=topic,
                    partitions=total)
        t0 = time.monotonic()
        self.cluster.add_partitions(topic, total)
        self.record("partitions_added", group=groups[0] if groups else None, groups=list(groups), topic=topic,
                    partitions=total, seconds=round(time.monotonic() - t0, 3))

    # ------------------------------------------------------------------ members
    def start(self, spec: MemberSpec, wait: bool = True, timeout: float = 60.0) -> Member:
        lib = self.streams_lib if spec.library == "java-streams" else self.java_lib
        self._seq += 1
        ts = now_ms()
        m = Member(spec, self.cluster.bootstrap, self.out_dir, lib, name=f"{self._seq:03d}-{spec.client_id}")
        self.members.append(m)
        self.record("start", member=m, ts_ms=ts, session_timeout_ms=spec.session_timeout_ms,
                    max_poll_interval_ms=spec.max_poll_interval_ms)
        if wait:
            self.wait_joined(m, timeout)
        return m

    def wait_joined(self, m: Member, timeout: float = 60.0, since: int = 0) -> dict:
        ev = m.wait_event("assigned", timeout, since)
        self.record("joined", member=m, ts_ms=ev["ts_ms"], partitions=ev.get("partitions"))
        return ev

    def wait_reassigned(self, members: list[Member], marks: list[int], timeout: float = 60.0) -> None:
        """Every member printed a new 'assigned' after its mark (the rebalance completed)."""
        for m, k in zip(members, marks):
            ev = m.wait_event("assigned", timeout, k)
            self.record("reassigned", member=m, ts_ms=ev["ts_ms"], partitions=ev.get("partitions"))

    def wait_given(self, m: Member, since: int, timeout: float = 60.0) -> dict:
        """The member's client was given partitions after its mark: a cooperative client's first
        assignment after a join can be empty (what it gets waits for the follow-up rebalance)."""
        ev = m.wait_event("assigned", timeout, since, where=lambda e: bool(e.get("partitions")))
        self.record("reassigned", member=m, ts_ms=ev["ts_ms"], partitions=ev.get("partitions"))
        return ev

    def wait_taken_over(self, partitions: set, survivors: list[Member], marks: list[int],
                        timeout: float = 60.0) -> None:
        """Every one of `partitions` (what a killed or leaving member owned: `Member.owned` before
        it went) was given to one of `survivors` after its mark (a cooperative or KIP-848
        assignor may give nothing new to some of them)."""
        def taken() -> bool:
            given = {p for m, k in zip(survivors, marks) for ev in list(m.events)[k:]
                     if ev.get("event") == "assigned" for p in ev.get("partitions") or []}
            return partitions <= given
        wait_for(taken, timeout, f"the others to take over partitions {sorted(partitions)}")
        for m, k in zip(survivors, marks):
            ev = next((e for e in list(m.events)[k:] if e.get("event") == "assigned" and e.get("partitions")), None)
            if ev is not None:
                self.record("reassigned", member=m, ts_ms=ev["ts_ms"], partitions=ev.get("partitions"))

    def kill(self, m: Member) -> None:
        if _commits_tell(m):
            self._await_commit_schedule(m)
        self.record("kill", member=m, signal="SIGKILL")
        m.kill()

    def _await_commit_schedule(self, m: Member, fresh: bool = False, timeout: float = 15.0) -> None:
        """A static member sends no LeaveGroup, so only its commits tell its close from its crash
        (docs/diagnosis.md, static members): before the bed stops one, it has made
        STATIC_SCHEDULED_COMMITS auto-commits since it was last assigned (a schedule to read; the
        commit on a revocation is off it). `fresh`: and one more after now, so that a close comes
        right after a scheduled commit and what it commits stands apart from the schedule (a close
        in the last fifth of the interval reads as a crash: the documented limit, not bed luck)."""
        def since_assigned() -> int:
            events = list(m.events)
            last = max((i for i, e in enumerate(events) if e.get("event") == "assigned"), default=-1)
            return sum(1 for e in events[last + 1:] if _committed(e))
        wait_for(lambda: since_assigned() >= STATIC_SCHEDULED_COMMITS, timeout,
                 f"{STATIC_SCHEDULED_COMMITS} auto-commits of {m.spec.client_id} since it was assigned", interval=0.05)
        if fresh:
            m.wait_event("committed", timeout, m.mark(), where=_committed)

    def pause(self, m: Member) -> None:
        self.record("pause", member=m, signal="SIGSTOP")
        m.pause()

    def resume(self, m: Member) -> None:
        self.record("resume", member=m, signal="SIGCONT")
        m.resume()

    def stop_polling(self, m: Member) -> None:
        self.record("stop_polling", member=m)
        m.stop_polling()
        ev = m.wait_event("stopped_polling", 10)
        self.record("stopped_polling", member=m, ts_ms=ev["ts_ms"])

    def resume_polling(self, m: Member) -> None:
        """The stalled member polls again (its slow batch ended): the client rejoins."""
        k = m.mark()
        self.record("resume_polling", member=m)
        m.resume_polling()
        ev = m.wait_event("resumed_polling", 10, k)
        self.record("resumed_polling", member=m, ts_ms=ev["ts_ms"])

    def leave(self, m: Member, timeout: float = 30.0) -> None:
        if _commits_tell(m):
            self._await_commit_schedule(m, fresh=True)
        self.record("leave", member=m, signal="SIGTERM")
        m.close(timeout)
        closed = next((e for e in m.events if e.get("event") == "closed"), None)
        self.record("closed", member=m, ts_ms=closed["ts_ms"] if closed else now_ms())

    def restart(self, m: Member, gap_s: float = 0.0, how: str = "kill", wait: bool = True) -> Member:
        """Stops `m` (kill: SIGKILL; close: SIGTERM) and starts the same spec again after
        `gap_s` seconds (a static member restarting within or beyond its session timeout)."""
        (self.kill if how == "kill" else self.leave)(m)
        if gap_s:
            time.sleep(gap_s)   # the gap IS the scenario (within / beyond the session timeout)
        return self.start(m.spec, wait=wait)

    def storm(self, base: MemberSpec, n: int, rounds: int, timeout: float = 60.0) -> list[Member]:
        """`n` members join together; then each round one leaves and a new one joins, without
        waiting for the group to settle in between (a rebalance storm)."""
        from dataclasses import replace
        live = [self.start(replace(base, client_id=f"{base.client_id}-{i}"), wait=False) for i in range(n)]
        for m in live:
            self.wait_joined(m, timeout)
        for r in range(rounds):
            self.leave(live.pop(0), timeout)
            live.append(self.start(replace(base, client_id=f"{base.client_id}-{n + r}"), wait=False))
        for m in live:
            self.wait_joined(m, timeout)
        return live

    # ------------------------------------------------------------------ group / cluster
    def delete_group(self, group: str) -> None:
        self.record("delete_group", group=group)
        self.cluster.delete_group(group)

    def wait_committed(self, group: str, timeout: float = 30.0) -> dict:
        """Until `group` has committed offsets (auto-commit runs every second in the members)."""
        from testbed.bed.admin import committed_offsets
        got = wait_for(lambda: committed_offsets(self.cluster.admin(), group), timeout,
                       f"committed offsets of group {group}", interval=0.3)
        self.record("committed", group=group, partitions=len(got))
        return got

    def wait_offsets_gone(self, group: str, timeout: float) -> None:
        """Until the group has no committed offsets left (expired by the broker)."""
        from testbed.bed.admin import committed_offsets
        self.record("await_offset_expiry", group=group)
        wait_for(lambda: not committed_offsets(self.cluster.admin(), group), timeout,
                 f"the committed offsets of group {group} to expire", interval=1.0)
        self.record("offsets_expired", group=group)

    def stop_coordinator(self, group: str, how: str = "SIGTERM") -> int:
        """Stops the group's coordinator broker: SIGTERM (a controlled shutdown) or SIGKILL (a crash)."""
        self.cluster.await_in_sync()      # a broker restarted before: its replicas must have caught up
        bid = self.cluster.coordinator_of(group)
        self.record("stop_broker", group=group, broker_id=bid, signal=how)
        secs = self.cluster.stop_broker(bid) if how == "SIGTERM" else self.cluster.kill_broker(bid)
        self.record("broker_stopped", group=group, broker_id=bid, seconds=round(secs, 3))
        return bid

    def start_broker(self, bid: int) -> None:
        self.record("start_broker", broker_id=bid)
        self.cluster.start_broker(bid)
        self.record("broker_started", broker_id=bid)

    def wait_log(self, pattern: str, timeout: float = 60.0, since: dict | None = None, count: int = 1):
        if self.shipper is None:
            raise BedError("wait_log needs a LogShipper")
        return self.shipper.wait_line(pattern, timeout, since, count)

    def wait_exit(self, m: Member, timeout: float = 30.0) -> int:
        def exited() -> tuple[int] | None:     # a 1-tuple: an exit code of 0 is truthy in it
            code = m.proc.popen.poll()
            return None if code is None else (code,)
        return wait_for(exited, timeout, f"member {m.spec.client_id} to exit")[0]

    # ------------------------------------------------------------------ teardown
    def close(self) -> None:
        """Stops producers and every member still alive (SIGCONT first, then SIGKILL); then adds
        every member's assignment callbacks to the timeline (`record_callbacks`)."""
        for p in self.producers:
            p.stop()
        for m in self.members:
            if m.alive():
                m.proc.signal(signal.SIGCONT)
                m.kill()
            else:
                m.proc.close_files()
        self.record_callbacks()
        self._file.close()

    def record_callbacks(self) -> None:
        """What each member's client said it was given or had taken away, when (its rebalance
        listener; cooperative and KIP-848 clients name only what changed): the ground truth of
        who consumed which partition (expect.ownership_gaps). Added at the end, so the timeline
        is in time order only once sorted."""
        for m in self.members:
            for ev in list(m.events):
                if ev.get("event") in ("assigned", "revoked", "lost"):
                    self.record("callback", member=m, ts_ms=ev["ts_ms"], callback=ev["event"],
                                partitions=ev.get("partitions") or [])

    def __enter__(self) -> Runner:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# Auto-commits a static member makes after it was assigned before the bed stops it (Runner.kill,
# .leave): three commit times are what the rule reads (state/diagnosis/holding.py).
STATIC_SCHEDULED_COMMITS = 3


def _committed(event: dict) -> bool:
    """An auto-commit that wrote offsets: kafka-python calls back at once, without a request, for
    one with nothing to commit (right after an assignment, before the first fetch)."""
    return event.get("event") == "committed" and bool(event.get("partitions"))


def _commits_tell(m: Member) -> bool:
    """A static classic member whose client reports its auto-commits (member.py, kafka-python)."""
    return bool(m.spec.instance_id) and m.spec.library == "kafka-python" and m.spec.protocol == "classic"
