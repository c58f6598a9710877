"""Scenarios with the monitor watching: one `rebalance-monitor run` per cluster reads the shipped
log topic and __consumer_offsets while the scenarios run (each with its own group), then every
scenario is judged on the monitor's event sink and /metrics (verdict.py) against what the bed
did (expect.py).

Scheduling: scenarios run one after the other, each until its group is empty again (a static
member's session, a share member's fence) so that the next one, above all a coordinator
failover, does not act on it; the ones that mostly wait (offset expiry: about a minute) run
beside them. The waits derive from the monitor's settings: the judging starts once the
monitor's event time (its watermark) has passed every group's last broker line by the longest
removal hold (decision window + correlation hold, docs/diagnosis.md)."""
from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from testbed.bed.procs import BedError, BedTimeout, wait_for
from testbed.bed.running import ScenarioResult, run_scenario
from testbed.bed.scenarios import BROKER_STOPS, Ctx, Scenario, with_group
from testbed.judge.expect import Expected, expected
from testbed.judge.verdict import Verdict, judge, known_for
from testbed.judge.watch import MetricsWatch
from testbed.metrics import parse
from testbed.monitor import MonitorProcess, MonitorSettings, ensure_offsets_topic, now_ms

if TYPE_CHECKING:
    from testbed.bed.cluster import KafkaCluster
    from testbed.bed.shipper import LogShipper

BACKGROUND = ("offset_expiry",)          # long waits, nothing in them the others could disturb
LAST = BROKER_STOPS                      # they stop a broker: nothing else may be in flight


class Phases:
    """Shares the machine between Kafka versions run at once (two cores): all start their cluster
    and monitor together (no member runs yet, so a slow start starves nobody), then they run
    their scenarios one version at a time in the given order (members with 3 s sessions must
    not be starved), and wait for the removal holds (idle) side by side."""

    def __init__(self, versions: list, start_timeout: float = 900.0):
        self.order = list(versions)
        self.start_timeout = start_timeout
        self._cond = threading.Condition()
        self._started: set = set()
        self._left: set = set()

    def started(self, version: str) -> None:
        with self._cond:
            self._started.add(version)
            self._cond.notify_all()
            self._cond.wait_for(lambda: all(v in self._started or v in self._left for v in self.order),
                                self.start_timeout)

    def my_turn(self, version: str) -> None:
        """Until every version before this one has left its scenario phase."""
        with self._cond:
            before = self.order[:self.order.index(version)]
            self._cond.wait_for(lambda: all(v in self._left for v in before))

    def leave(self, version: str) -> None:
        """Done with the scenarios (or failed): the next version may run its own."""
        with self._cond:
            self._left.add(version)
            self._cond.notify_all()


@dataclass
class LiveScenario:
    scenario: Scenario
    ctx: Ctx
    result: ScenarioResult | None = None
    exp: Expected | None = None
    verdict: Verdict | None = None
    window: tuple = (0, 0)               # wall ms: start, settled
    background: bool = False


@dataclass
class LiveRun:
    cluster: KafkaCluster
    shipper: LogShipper
    out: Path
    settings: MonitorSettings = field(default_factory=MonitorSettings)
    java_lib: Path | None = None
    streams_lib: Path | None = None
    monitor: MonitorProcess | None = None
    watch: MetricsWatch | None = None
    unattributed: list = field(default_factory=list)   # quarantine records naming no scenario's group (judge)
    others: dict = field(default_factory=dict)         # kind -> records of groups the bed did not run (judge)

    def require_monitor(self) -> MonitorProcess:
        if self.monitor is None:
            raise BedError(f"Kafka {self.cluster.version}: the monitor is not started (LiveRun.start)")
        return self.monitor

    def require_watch(self) -> MetricsWatch:
        if self.watch is None:
            raise BedError(f"Kafka {self.cluster.version}: the /metrics watch is not started (LiveRun.start)")
        return self.watch

    def start(self, timeout: float = 300.0) -> LiveRun:
        ensure_offsets_topic(self.cluster)
        self.monitor = MonitorProcess(self.cluster.bootstrap, [self.shipper.topic], self.out / "monitor", self.settings,
                                      cluster=f"kafka-{self.cluster.version}")
        self.monitor.start(timeout)
        self.watch = MetricsWatch(self.monitor)
        self.watch.start()
        return self

    def close(self) -> None:
        if self.watch is not None:
            self.watch.stop()
        if self.monitor is not None:
            self.monitor.stop()

    # ------------------------------------------------------------------ scenarios
    def run(self, scenarios: list[Scenario], prefix: str, library: str = "kafka-python",
            log=print, on_start=None) -> list[LiveScenario]:
        """Runs them all; `on_start(item)` is called as each foreground scenario starts (faults)."""
        items = [LiveScenario(s, with_group(Ctx(self.cluster.version, "", "", library=library,
                                                    has_java=self.java_lib is not None), s, prefix),
                              background=s.name in BACKGROUND) for s in scenarios]
        order = sorted([i for i in items if not i.background], key=lambda i: i.scenario.name in LAST)
        threads = [threading.Thread(target=self._one, args=(i, log), daemon=True) for i in items if i.background]
        for t in threads:
            t.start()
        for item in order:
            if on_start is not None:
                on_start(item)
            self._one(item, log)
        for t in threads:
            t.join(600)
        return items + [extra for item in items for extra in self._other_groups(item)]

    @staticmethod
    def _groups_of(item: LiveScenario) -> list[str]:
        """The other groups of a scenario of several groups (those its kill_broker entry names)."""
        if not item.scenario.multi_group or item.result is None:
            return []
        kill: dict = next((e for e in item.result.timeline if e["action"] == "kill_broker"), {})
        return [g for g in kill.get("groups") or () if g != item.ctx.group]

    def _other_groups(self, item: LiveScenario) -> list[LiveScenario]:
        """A scenario of several groups (Scenario.multi_group: those its kill_broker entry names):
        one item per other group, judged on its own, named after its group's suffix."""
        out = []
        for group in self._groups_of(item):
            suffix = group[len(item.ctx.group) + 1:].rstrip("0123456789")
            out.append(LiveScenario(replace(item.scenario, name=f"{item.scenario.name}[{suffix}]"),
                                    replace(item.ctx, group=group, topic=f"{group}-data"), result=item.result,
                                    window=item.window))
        return out

    def _one(self, item: LiveScenario, log) -> None:
        t0 = now_ms()
        item.result = run_scenario(self.cluster, self.shipper, item.scenario, item.ctx, self.out,
                                   self.java_lib, self.streams_lib)
        if item.result.status != "SKIP":
            # every group of the scenario, before the next one starts (a Kafka Streams member's
            # close ends in its fence a session later: the next broker kill must not come first)
            for group in [item.ctx.group, *self._groups_of(item)]:
                self.settle(group)
        item.window = (t0, now_ms())
        log(f"  {self.cluster.version} {item.scenario.name:<14} bed {item.result.status} "
            f"{item.result.seconds:6.1f} s" + (f"  {item.result.error}" if item.result.error else ""))

    def settle(self, group: str, timeout: float = 60.0) -> None:
        """Until the broker says the group is empty or gone (bounded; share and streams groups,
        which the admin API of the bed's client cannot describe, until their lines stop)."""
        from testbed.bed.admin import make_admin
        adm = make_admin(self.cluster.bootstrap)
        rx = re.compile(r"(?<![\w.-])" + re.escape(group) + r"(?![\w-])")

        def quiet() -> bool:
            try:
                desc = adm.describe_consumer_groups([group], request_timeout=5)[group].result(6)
                state = str(getattr(desc, "state", "")).upper()
                if any(s in state for s in ("EMPTY", "DEAD")):
                    return True
                if "UNKNOWN" not in state:
                    return False
            except Exception:
                pass
            last = max((ln.read_ms for ln in self.shipper.lines() if rx.search(ln.text)), default=0)
            return now_ms() - last > 8000
        try:
            wait_for(quiet, timeout, f"group {group} to be empty", interval=0.5)
        except BedTimeout:
            pass

    # ------------------------------------------------------------------ judging
    def expectations(self, items: list[LiveScenario]) -> None:
        shipped = self.shipper.lines()
        window_ms = int(self.settings.diagnosis_settings().pause_rejoin_window_ms)
        for item in items:
            if item.result is not None and item.result.status != "SKIP":
                item.exp = expected(self.cluster.version, item.ctx.group, item.result.timeline, shipped, window_ms)

    def quiet_at_ms(self, items: list[LiveScenario]) -> int:
        """Event time after which no record of these groups can still come: each group's last
        broker line plus the longest removal hold its members can have."""
        out = 0
        for item in items:
            if item.exp is None or item.exp.last_line_ms is None:
                continue
            assert item.result is not None, "expectations() sets exp only for a scenario that ran"
            rts = [e.get("max_poll_interval_ms") for e in item.result.timeline if e["action"] == "start"]
            hold = max(self.settings.removal_hold_s(c, max([r for r in rts if r] or [0]))
                       for c in ("heartbeat_expiry", "leave_group", "poll_timeout"))
            out = max(out, item.exp.last_line_ms + int(hold * 1000))
        return out

    def wait_quiet(self, items: list[LiveScenario], slack_s: float = 240.0) -> float:
        """Until the monitor's watermark passed quiet_at and two more batches ran; returns the
        seconds waited. Bounded by the time that should take plus `slack_s`."""
        target = self.quiet_at_ms(items)
        t0 = time.monotonic()
        budget = max(0.0, (target - now_ms()) / 1000) + self.settings.record_delay_s() + slack_s
        monitor, watch = self.require_monitor(), self.require_watch()
        wait_for(lambda: watch.watermark_ms() >= target, budget,
                 f"the monitor's watermark to pass {target} (last line + removal hold)", interval=0.5,
                 alive=monitor.alive)
        b0 = watch.batches()
        wait_for(lambda: watch.batches() >= b0 + 2, 120, "two more micro-batches", interval=0.25,
                 alive=monitor.alive)
        return time.monotonic() - t0

    def judge(self, items: list[LiveScenario]) -> list[Verdict]:
        monitor = self.require_monitor()
        samples = parse(monitor.scrape())
        sink = {k: monitor.records(k) for k in ("rebalances", "member_removals", "anomalies", "quarantine")}
        quarantine = self.attribute_quarantine(items, sink["quarantine"])
        out = []
        for item in items:
            if item.exp is None:
                v = Verdict(self.cluster.version, item.scenario.name, item.ctx.group,
                            status="SKIP" if item.result and item.result.status == "SKIP" else "FAIL")
                v.note = (item.result.error or "") if item.result else "not run"
                out.append(v)
                continue
            assert item.result is not None, "expectations() sets exp only for a scenario that ran"
            g = item.ctx.group
            mine = {k: [r for r in recs if r.get("group") == g] for k, recs in sink.items() if k != "quarantine"}
            item.verdict = judge(self.cluster.version, item.scenario.name, item.exp, mine, samples, self.watch,
                                 quarantine.get(g, []))
            if item.result.status == "FAIL":     # the bed itself failed: the scenario did not happen as planned
                item.verdict.fail("bed", item.result.error or "scenario failed")
                item.verdict.settle([])
            out.append(item.verdict)
        self.unattributed = quarantine.get(None, [])
        self.others = {k: [r for r in recs if r.get("group") not in {i.ctx.group for i in items}]
                       for k, recs in sink.items() if k != "quarantine"}
        return out

    def cluster_verdict(self) -> Verdict:
        """The row for what belongs to no scenario: quarantined lines that name no scenario's
        group, and records of groups the bed did not run (its own helper groups must leave no
        trace)."""
        v = Verdict(self.cluster.version, "(cluster)", "*", rebalances_expected=None, removals_expected=None,
                    triggers_right=None, causes_right=None)
        for q in self.unattributed:
            v.fail("quarantine", f"{q.get('reason')}: {(q.get('raw') or q.get('detail') or '')[:160]}")
        for kind, recs in self.others.items():
            for r in recs:
                v.fail("extra", f"{kind} of group {r.get('group')}: {r}")
        return v.settle(known_for(self.cluster.version, "(cluster)"))

    @staticmethod
    def attribute_quarantine(items: list[LiveScenario], records: list) -> dict:
        """group -> the quarantine records whose line names it; None -> the rest (lines about
        partitions and brokers, not groups: the "(cluster)" row)."""
        out: dict = {}
        for q in records:
            raw = q.get("raw") or ""
            owner = next((i.ctx.group for i in items
                          if re.search(r"(?<![\w.-])" + re.escape(i.ctx.group) + r"(?![\w-])", raw)), None)
            out.setdefault(owner, []).append(q)
        return out
