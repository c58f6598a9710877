"""The pager check: real faults on real brokers, through `rebalance-monitor run`, a real Prometheus
with the project's rules and a real Alertmanager with the project's configuration, to the bed's
webhook receiver (testbed/bed/pager.py). Per incident: seconds from the fault (the bed's timeline)
to the first page, how many pages, whether the page names the right root cause and groups. Benign
activity must page nobody. One incident runs with Alertmanager down from its fault for 30 s: the
page must still come, once (Prometheus sends its firing alerts again when Alertmanager is back).

    python -m testbed.judge.pager_check [--only NAME ...] [--quiet-seconds S] [--out DIR]

Last line: incidents=N paged=P page_p50_seconds=A page_p95_seconds=B pages_per_incident_max=K
root_cause_right=R benign_pages=F (and the outage's and the dead man's switch's figures). Exit 1 when
an incident is not paged, is paged more than once or with a wrong root cause or without its groups,
when benign activity pages, or when Alertmanager sends a ticket that a paging incident explains.

A page is a notification of the `pager` receiver with status "firing"; Alertmanager's resolved
notifications are not pages. A page belongs to the case whose incident its alerts name (subject
and groups), else to the case running when it came.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from testbed.bed import stall
from testbed.bed.cluster import KafkaCluster
from testbed.bed.members import MemberSpec
from testbed.bed.pager import Pager
from testbed.bed.procs import BedError, BedTimeout, kill_all, wait_for
from testbed.bed.receiver import Notification
from testbed.bed.runner import Runner, now_ms
from testbed.bed.running import java_libs
from testbed.bed.scenarios import EMPTY, FAILED, Ctx, _start_all, poll_timeout
from testbed.bed.shipper import LogShipper
from testbed.judge.live_run import LiveRun
from testbed.monitor import MonitorSettings
from testbed.stats import percentile

VERSION = "4.4.0"
LOG_TOPIC = "kafkabed-broker-logs"
# How long after a fault the check waits for its page (a broker's page waits 20 s of `for:`, 10 s
# of group wait, and the monitor's and Prometheus' seconds), and how long after the page or a
# benign case it keeps listening for more.
PAGE_TIMEOUT_S = 150.0
AFTER_PAGE_S = 25.0
BENIGN_LISTEN_S = 45.0
# Removals within the monitor's broker_death_window_seconds after a broker's death are the
# broker's: the next fault comes later than that.
AFTER_BROKER_DEATH_S = 70.0
OUTAGE_S = 30.0
HOST = "127.0.0.3"


@dataclass
class Outcome:
    """What a case did: the fault time, and what its page must say."""
    fault_ms: int | None = None          # None: benign
    alertname: str | None = None
    root_cause: str | None = None
    subject: str | None = None
    groups: set[str] = field(default_factory=set)
    broker_death: bool = False


@dataclass
class Case:
    name: str
    incident: bool
    run: Callable[[CheckRun, Runner, str], Outcome]
    outage: bool = False                 # Alertmanager down for OUTAGE_S from the fault


@dataclass
class Result:
    case: Case
    group: str
    outcome: Outcome
    started_ms: int
    ended_ms: int = 0
    pages: list[Notification] = field(default_factory=list)
    error: str | None = None

    @property
    def first_page_s(self) -> float | None:
        if not self.pages or self.outcome.fault_ms is None:
            return None
        return round((self.pages[0].received_ms - self.outcome.fault_ms) / 1000, 1)

    def page_labels(self) -> list[dict]:
        return [a.get("labels", {}) for n in self.pages for a in n.alerts]

    def page_annotations(self) -> list[dict]:
        return [a.get("annotations", {}) for n in self.pages for a in n.alerts]

    def root_cause_right(self) -> bool:
        o = self.outcome
        return bool(self.pages) and any(
            lab.get("alertname") == o.alertname and lab.get("root_cause") == o.root_cause
            and (o.subject is None or lab.get("subject") == o.subject) for lab in self.page_labels())

    def named_groups(self) -> set[str]:
        out: set[str] = set()
        for ann in self.page_annotations():
            out |= set((ann.get("groups") or "").split())
        out |= {lab["group"] for lab in self.page_labels() if lab.get("group")}
        return out

    def groups_right(self) -> bool:
        return self.outcome.groups <= self.named_groups()

    def problems(self) -> list[str]:
        out = [f"bed: {self.error}"] if self.error else []
        if not self.case.incident:
            if self.pages:
                out.append(f"benign activity paged {len(self.pages)} time(s): {self.page_labels()}")
            return out
        if not self.pages:
            out.append("not paged")
            return out
        if len(self.pages) > 1:
            out.append(f"paged {len(self.pages)} times: {[n.group_key for n in self.pages]}")
        if not self.root_cause_right():
            out.append(f"root cause: expected {self.outcome.alertname}/{self.outcome.root_cause}"
                       f"/{self.outcome.subject}, got {self.page_labels()}")
        if not self.groups_right():
            out.append(f"groups: expected {sorted(self.outcome.groups)}, the page named {sorted(self.named_groups())}")
        return out


class CheckRun:
    def __init__(self, out: Path, quiet_s: float, log=print):
        self.out = out
        self.quiet_s = quiet_s
        self.log = log
        self.cluster = KafkaCluster(VERSION, workdir=out / "cluster")
        self.java_lib: Path | None = None
        self.streams_lib: Path | None = None
        self.shipper: LogShipper | None = None
        self.live: LiveRun | None = None
        self.pager: Pager | None = None
        self.last_broker_death_ms = 0

    # ------------------------------------------------------------------ the bed
    def start(self) -> None:
        t0 = time.monotonic()
        self.cluster.start()
        self.java_lib, self.streams_lib, _ = java_libs(VERSION)
        self.shipper = LogShipper(self.cluster, LOG_TOPIC).start()
        # the product's diagnosis defaults (host_wide_min_removals 3: the host case runs on a
        # loopback address of its own), the bed's short lateness and trigger
        settings = MonitorSettings(host_wide_min_removals=None)
        self.live = LiveRun(self.cluster, self.shipper, self.out, settings, self.java_lib, self.streams_lib).start()
        monitor = self.live.require_monitor()
        assert monitor.port is not None
        self.pager = Pager(self.out / "pager", monitor.port, f"kafka-{VERSION}").start()
        self.log(f"pager-check: Kafka {VERSION}, monitor, Prometheus and Alertmanager up in "
                 f"{time.monotonic() - t0:.0f} s")

    def close(self) -> None:
        if self.pager is not None:
            self.pager.stop()
        if self.live is not None:
            self.live.close()
        if self.shipper is not None:
            self.shipper.stop()
        self.cluster.close()

    def runner(self, name: str) -> Runner:
        return Runner(self.cluster, self.out / "cases" / name, self.shipper, self.java_lib, self.streams_lib)

    # ------------------------------------------------------------------ a case
    def run_case(self, case: Case, index: int) -> Result:
        assert self.pager is not None and self.live is not None
        group = f"pc{index:02d}-{case.name.replace('_', '-')}"
        if case.incident and self.last_broker_death_ms:
            wait = AFTER_BROKER_DEATH_S - (now_ms() - self.last_broker_death_ms) / 1000
            if wait > 0:
                time.sleep(wait)     # the monitor's broker-death window must be over (module doc)
        res = Result(case, group, Outcome(), now_ms())
        r = self.runner(case.name)
        outage = None
        try:
            if case.outage:
                outage = _Outage(self)
            act = lambda: case.run(self, r, group)       # noqa: E731
            res.outcome = act() if outage is None else outage.around(act)
        except Exception as exc:
            res.error = f"{type(exc).__name__}: {exc}"
        finally:
            if outage is not None:
                outage.end()
            r.close()
        if res.outcome.broker_death:
            self.last_broker_death_ms = res.outcome.fault_ms or now_ms()
        for g in [group, *sorted(res.outcome.groups)]:
            self.live.settle(g, timeout=30)
        if case.incident and res.outcome.fault_ms is not None:
            try:
                wait_for(lambda: self.pages_since(res.started_ms), max(1.0, PAGE_TIMEOUT_S
                         - (now_ms() - res.outcome.fault_ms) / 1000), f"a page for {case.name}", interval=0.5)
                time.sleep(AFTER_PAGE_S)     # listening for more pages IS the check
            except BedTimeout:
                pass
        else:
            time.sleep(BENIGN_LISTEN_S)      # listening for pages IS the check
        res.ended_ms = now_ms()
        return res

    def pages_since(self, ms: int) -> list[Notification]:
        assert self.pager is not None
        return [n for n in self.pager.receiver.received("pager", ms) if n.status == "firing"]


class _Outage:
    """Alertmanager stopped just before the fault and started again OUTAGE_S later."""

    def __init__(self, run: CheckRun):
        assert run.pager is not None
        self.am = run.pager.alertmanager
        self.am.stop()
        self.stopped_ms = now_ms()
        self.back_ms: int | None = None

    def around(self, act: Callable[[], Outcome]) -> Outcome:
        outcome = act()
        left = OUTAGE_S - (now_ms() - (outcome.fault_ms or self.stopped_ms)) / 1000
        if left > 0:
            time.sleep(left)          # the outage's length IS the case
        self.end()
        return outcome

    def end(self) -> None:
        if self.back_ms is None:
            self.am.start()
            self.back_ms = now_ms()


# ---------------------------------------------------------------------- the catalogue
def _topic(r: Runner, group: str, partitions: int = 4) -> str:
    return r.topic(f"{group}-data", partitions, 1)


def _spec(group: str, topic: str, cid: str, **kw) -> MemberSpec:
    return MemberSpec(kw.pop("library", "kafka-python"), group, [topic], f"{group}-{cid}", **kw)


def _fault_ms(r: Runner, action: str, mark: int = 0) -> int:
    return next(e["ts_ms"] for e in r.timeline[mark:] if e["action"] == action)


def _leave_all(r: Runner, members: list) -> None:
    for m in members:
        if m.alive():
            r.leave(m)


def rolling_restart(run: CheckRun, r: Runner, group: str) -> Outcome:
    """Every member of three groups restarted one after the other, gracefully (a deploy)."""
    groups = [f"{group}-{i}" for i in range(3)]
    members = {}
    for g in groups:
        t = _topic(r, g)
        members[g] = _start_all(r, [_spec(g, t, c) for c in "abc"])
    for g in groups:
        for i, m in enumerate(list(members[g])):
            r.leave(m)
            members[g][i] = r.start(m.spec)
    for g in groups:
        _leave_all(r, members[g])
    return Outcome(groups=set(groups))


def scale_out(run: CheckRun, r: Runner, group: str) -> Outcome:
    """One member, then three more, one at a time."""
    t = _topic(r, group, 8)
    members = _start_all(r, [_spec(group, t, "a")])
    for c in "bcd":
        members.append(r.start(_spec(group, t, c)))
    _leave_all(r, members)
    return Outcome()


def slow_processing(run: CheckRun, r: Runner, group: str) -> Outcome:
    """A member's batch outlasts max.poll.interval.ms (3 s): it leaves, and rejoins when done."""
    mark = r.mark()
    ctx = Ctx(VERSION, group, _topic(r, group), has_java=run.java_lib is not None)
    poll_timeout(r, ctx)
    return Outcome(_fault_ms(r, "stopped_polling", mark), "KafkaConsumerGroupSlowProcessing", "slow_processing",
                   group, {group})


def stuck_rebalance(run: CheckRun, r: Runner, group: str) -> Outcome:
    """A member frozen (its session, 30 s, outlasts the 6 s rebalance timeout) when another joins:
    the rebalance waits the whole rebalance timeout for it, then the coordinator removes it."""
    t = _topic(r, group)
    a, b = _start_all(r, [_spec(group, t, c, session_timeout_ms=30000, max_poll_interval_ms=6000) for c in "ab"])
    since = r.shipper.mark() if r.shipper else None
    r.pause(a)
    mark = r.mark()
    c = r.start(_spec(group, t, "c", session_timeout_ms=30000, max_poll_interval_ms=6000), wait=False)
    r.wait_joined(c)
    fault = _fault_ms(r, "start", mark)
    r.wait_log(rf"Group {re.escape(group)} removed? dynamic members who haven't joined", 30, since)
    r.resume(a)
    r.wait_joined(a, since=a.mark())
    _leave_all(r, [a, b, c])
    return Outcome(fault, "KafkaConsumerGroupSlowProcessing", "slow_processing", group, {group})


def host_down(run: CheckRun, r: Runner, group: str) -> Outcome:
    """Three groups each with a member on a host of its own (127.0.0.3) and one on the shared
    host: the three on 127.0.0.3 killed at once (the host died)."""
    groups = [f"{group}-{i}" for i in range(3)]
    doomed, staying = [], []
    for g in groups:
        t = _topic(r, g)
        on_host, shared = _start_all(r, [_spec(g, t, "h", source_address=HOST), _spec(g, t, "s")])
        doomed.append(on_host)
        staying.append(shared)
    since = r.shipper.mark() if r.shipper else None
    mark = r.mark()
    for m in doomed:
        r.kill(m)
    fault = _fault_ms(r, "kill", mark)
    for g in groups:
        r.wait_log(FAILED.replace("{g}", re.escape(g)), 30, since)
    _leave_all(r, staying)
    return Outcome(fault, "KafkaConsumerHostDown", "host_wide", HOST, set(groups))


def crash_loop(run: CheckRun, r: Runner, group: str) -> Outcome:
    """One client killed three times, each time started again once the broker removed it; another
    member stays."""
    t = _topic(r, group)
    (stays,) = _start_all(r, [_spec(group, t, "stays")])
    spec = _spec(group, t, "looping")
    fault = None
    for _ in range(3):
        m = r.start(spec)
        since = r.shipper.mark() if r.shipper else None
        mark = r.mark()
        r.kill(m)
        fault = fault or _fault_ms(r, "kill", mark)
        r.wait_log(rf"Member {re.escape(spec.client_id)}-\S+ in group {re.escape(group)} has failed", 30, since)
    _leave_all(r, [stays])
    return Outcome(fault, "KafkaConsumerCrashLoop", "process_crash", group, {group})


def group_deleted(run: CheckRun, r: Runner, group: str) -> Outcome:
    t = _topic(r, group)
    (a,) = _start_all(r, [_spec(group, t, "a")])
    r.wait_committed(group)
    since = r.shipper.mark() if r.shipper else None
    r.leave(a)
    r.wait_log(EMPTY.replace("{g}", re.escape(group)), 30, since)
    r.delete_group(group)
    return Outcome()


def quiet(run: CheckRun, r: Runner, group: str) -> Outcome:
    """Groups that consume and commit, nothing else, for --quiet-seconds (short sessions: a quiet
    half hour's heartbeats and commits in minutes)."""
    groups = [f"{group}-{i}" for i in range(3)]
    members = []
    for g in groups:
        t = _topic(r, g)
        members += _start_all(r, [_spec(g, t, c, session_timeout_ms=6000) for c in "ab"])
    time.sleep(run.quiet_s)          # the quiet IS the case
    _leave_all(r, members)
    return Outcome(groups=set(groups))


def coordinator_kill(run: CheckRun, r: Runner, group: str) -> Outcome:
    """The broker coordinating a group killed (SIGKILL) under it; started again later."""
    t = _topic(r, group)
    a, b = _start_all(r, [_spec(group, t, "a"), _spec(group, t, "b")])
    mark = r.mark()
    bid = r.stop_coordinator(group, "SIGKILL")
    fault = _fault_ms(r, "stop_broker", mark)
    try:
        r.cluster.coordinator_of(group, timeout=90)
        time.sleep(10)       # the members find the new coordinator (the group's lines IS what is awaited elsewhere)
    finally:
        r.start_broker(bid)
    _leave_all(r, [a, b])
    return Outcome(fault, "KafkaBrokerDown", "broker_death", str(bid), {group}, broker_death=True)


def follower_kill(run: CheckRun, r: Runner, group: str) -> Outcome:
    """The follower of several groups' __consumer_offsets partition killed: their coordinator stalls
    and removes members that never stopped (testbed/bed/stall.py)."""
    mark = r.mark()
    since = r.shipper.mark() if r.shipper else None
    ctx = Ctx(VERSION, group, _topic(r, group), has_java=run.java_lib is not None)
    stall._stall_run(r, ctx, {"": ("confluent", "classic"), "py": ("kafka-python", "classic"),
                              "cg": ("confluent", "consumer")})
    kill = next(e for e in r.timeline[mark:] if e["action"] == "kill_broker")
    # the page must name every group the stall removed members of (the broker's lines say which)
    removed = set()
    for g in kill["groups"]:
        if r.shipper is not None and r.shipper.find(
                rf"(in group {re.escape(g)} has failed|\[GroupId {re.escape(g)}\] Member \S+ fenced)", since):
            removed.add(g)
    return Outcome(kill["ts_ms"], "KafkaBrokerDown", "broker_death", str(kill["broker_id"]), removed,
                   broker_death=True)


CASES = [
    Case("rolling_restart", False, rolling_restart),
    Case("scale_out", False, scale_out),
    Case("slow_processing", True, slow_processing),
    Case("stuck_rebalance", True, stuck_rebalance),
    Case("host_down", True, host_down),
    Case("crash_loop", True, crash_loop, outage=True),
    Case("group_deleted", False, group_deleted),
    Case("quiet", False, quiet),
    Case("coordinator_kill", True, coordinator_kill),
    Case("follower_kill", True, follower_kill),
]


# ---------------------------------------------------------------------- figures
def attribute(results: list[Result], pages: list[Notification]) -> None:
    """Each page to the latest case before it whose incident it names (subject: a broker id can
    die twice), else to the case running when it came."""
    for n in pages:
        labels = [a.get("labels", {}) for a in n.alerts]
        named = {lab.get("subject") for lab in labels} | {lab.get("group") for lab in labels}
        owner = next((res for res in reversed(results) if res.case.incident and res.outcome.subject in named
                      and res.outcome.fault_ms is not None and n.received_ms >= res.outcome.fault_ms), None)
        if owner is None:
            owner = next((res for res in reversed(results) if res.started_ms <= n.received_ms), results[0])
        owner.pages.append(n)


@dataclass
class Inhibition:
    """Tickets an incident explains (they carry its `incident` label): how many fired in Prometheus,
    how many Alertmanager sent anyway (inhibition: none while the incident pages)."""
    firing: list[dict] = field(default_factory=list)
    sent: list[dict] = field(default_factory=list)

    @classmethod
    def read(cls, pager: Pager, since_ms: int) -> Inhibition:
        firing = pager.prometheus.ever_firing('severity="ticket",incident!=""', since_ms / 1000)
        sent = [a.get("labels", {}) for n in pager.receiver.received("tickets", since_ms) if n.status == "firing"
                for a in n.alerts if a.get("labels", {}).get("incident")]
        return cls(firing, sent)


def figures(results: list[Result], deadman: int, outage_back_s: float | None,
            inhibition: Inhibition | None = None) -> dict:
    incidents = [r for r in results if r.case.incident]
    timed = [r.first_page_s for r in incidents if r.first_page_s is not None and not r.case.outage]
    return {
        "incidents": len(incidents),
        "paged": sum(1 for r in incidents if r.pages),
        "page_p50_seconds": percentile(timed, 0.5),
        "page_p95_seconds": percentile(timed, 0.95),
        "pages_per_incident_max": max((len(r.pages) for r in incidents), default=0),
        "root_cause_right": sum(1 for r in incidents if r.root_cause_right()),
        "groups_right": sum(1 for r in incidents if r.pages and r.groups_right()),
        "benign_pages": sum(len(r.pages) for r in results if not r.case.incident),
        "outage_page_seconds": outage_back_s,
        "deadman_pings": deadman,
        # the per-group tickets count final removal records over 10 minutes: in a run this short
        # only the first cases' fire, near its end
        "explained_tickets_firing": len(inhibition.firing) if inhibition else 0,
        "explained_tickets_sent": len(inhibition.sent) if inhibition else 0,
    }


def table(results: list[Result]) -> str:
    rows = ["| case | kind | fault→page s | pages | alert / root cause / subject | groups named | problems |",
            "|---|---|---|---|---|---|---|"]
    for r in results:
        labels = r.page_labels()
        first = labels[0] if labels else {}
        what = f"{first.get('alertname', '-')} / {first.get('root_cause', '-')} / {first.get('subject', '-')}"
        first_s = "-" if r.first_page_s is None else r.first_page_s
        rows.append(f"| {r.case.name}{' (Alertmanager down 30 s)' if r.case.outage else ''} | "
                    f"{'incident' if r.case.incident else 'benign'} | {first_s} | "
                    f"{len(r.pages)} | {what if labels else '-'} | {' '.join(sorted(r.named_groups())) or '-'} | "
                    f"{'; '.join(r.problems()) or 'none'} |")
    return "\n".join(rows)


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", action="append", choices=[c.name for c in CASES],
                        help="run only these cases (repeatable)")
    parser.add_argument("--quiet-seconds", type=float, default=180.0,
                        help="length of the quiet case (default 180)")
    parser.add_argument("--out", type=Path, default=None, help="where the bed writes (default: a new temp dir)")
    args = parser.parse_args(argv)
    import tempfile
    out = args.out or Path(tempfile.mkdtemp(prefix="pager-check-"))
    out.mkdir(parents=True, exist_ok=True)
    cases = [c for c in CASES if not args.only or c.name in args.only]
    run = CheckRun(out, args.quiet_seconds)
    t0 = time.monotonic()
    results: list[Result] = []
    outage_back_s = None
    inhibition = Inhibition()
    try:
        try:
            run.start()
        except (BedError, BedTimeout) as exc:     # a missing binary, a bed that did not come up
            print(f"pager-check: the bed did not start: {str(exc).splitlines()[0]} (logs under {out})",
                  file=sys.stderr)
            return 2
        started_ms = now_ms()
        for i, case in enumerate(cases):
            res = run.run_case(case, i)
            results.append(res)
            came = run.pages_since(res.started_ms)
            first = "-" if not came or res.outcome.fault_ms is None else \
                f"{(came[0].received_ms - res.outcome.fault_ms) / 1000:.1f}"
            print(f"  {case.name:<17} {'incident' if case.incident else 'benign':<8} pages {len(came)}, first "
                  f"{first} s after the fault  {res.error or ''}", flush=True)
        assert run.pager is not None
        pages = run.pages_since(started_ms)
        for res in results:
            res.pages = []
        attribute(results, pages)
        outage = next((r for r in results if r.case.outage), None)
        if outage is not None:
            outage_back_s = outage.first_page_s
        deadman = len(run.pager.receiver.received("deadman", started_ms))
        inhibition = Inhibition.read(run.pager, started_ms)
    finally:
        run.close()
        kill_all()
    figs = figures(results, deadman, outage_back_s, inhibition)
    print(table(results))
    (out / "pager-check.json").write_text(json.dumps({
        "figures": figs, "seconds": round(time.monotonic() - t0, 1),
        "cases": [{"case": r.case.name, "incident": r.case.incident, "group": r.group,
                   "fault_ms": r.outcome.fault_ms, "first_page_s": r.first_page_s, "pages": len(r.pages),
                   "labels": r.page_labels(), "annotations": r.page_annotations(), "problems": r.problems()}
                  for r in results]}, indent=2))
    problems = [f"{r.case.name}: {p}" for r in results for p in r.problems()]
    problems += [f"a ticket its incident explains was sent: {labels}" for labels in inhibition.sent]
    for p in problems:
        print(f"pager-check: {p}", file=sys.stderr)
    print(f"pager-check: {out} ({time.monotonic() - t0:.0f} s)")
    print(" ".join(f"{k}={'-' if v is None else v}" for k, v in figs.items()))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
