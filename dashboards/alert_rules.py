"""The alert rules: the one source of alerts/rebalance-monitor.rules.yml and of the Helm chart's
PrometheusRule (helm/rebalance-monitor/templates/prometheusrule.yaml). `python -m dashboards.generate`
writes both; tests/e2e/test_alerts.py checks that the committed files equal its output and that the
chart, rendered with its default values, carries exactly the rules of the plain file.

Thresholds, windows and `for` durations are parameters (`<<name>>` in the text below): the plain
file gets DEFAULTS (dashboards/alert_params.py), the chart gets
`{{ .Values.prometheusRule.params.<name> }}` so they can be changed per install. Go templates of Prometheus ({{ $labels.group }}) are escaped for Helm.

Every alert has a `probe`: the part of its expression that must return series whenever the
monitor exports data (the selector and arithmetic before the threshold comparison; for a
threshold that is itself an expression, the comparison with `bool`, which keeps every series). The
end-to-end test (tests/test_prometheus_e2e.py) runs each probe against a real Prometheus that
scrapes the demo, so an expression that silently matches nothing is caught even when the alert
itself must not fire on the demo data.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from dashboards.alert_params import DEFAULTS
from state.quarantine_reasons import QuarantineReason as R
from state.vocabulary import METRIC_PREFIX as P, REBALANCING_STATES, RemovalCause


def new_in_window(selector: str, window: str) -> str:
    """Counter growth over `window`, including the whole value of series that are newer than the
    window. increase() misses those: a counter series that first appears at 1 (a group's first
    heartbeat-expiry removal) has no increase between its samples.

    A series only counts as new if the same monitor (job, instance) was already exporting
    `window` ago (its rebalance_monitor_batches_total existed then). Otherwise every series looks
    new after Prometheus or the monitor starts, and their whole totals would look like a burst.
    Counter resets (a restart without an event sink) give a negative difference, clamped to 0."""
    return (f"(clamp_min({selector} - {selector} offset {window}, 0)"
            f" or ({selector} unless {selector} offset {window})"
            f" and on (job, instance) {P}_batches_total offset {window})")


@dataclass
class Alert:
    name: str
    severity: str
    probe: str                       # must return series on any monitor's data
    condition: str                   # appended to the probe, e.g. "> <<stormRebalances>>"
    for_: str
    summary: str
    description: str
    expr: str | None = None       # a whole expression when it is not `probe condition`
    extra_labels: dict = field(default_factory=dict)
    extra_annotations: dict = field(default_factory=dict)

    @property
    def anchor(self) -> str:
        return self.name.lower()

    def expression(self) -> str:
        return self.expr if self.expr is not None else f"{self.probe}\n{self.condition}"


# Quarantine reasons that mean "a format this monitor does not know" (a new Kafka version), not bad input.
UNKNOWN_LINE_REASONS = (R.UNKNOWN_COORDINATOR_LINE,)
UNKNOWN_LAYOUT_REASONS = (R.UNKNOWN_RECORD_TYPE, R.UNKNOWN_VALUE_VERSION)
UNKNOWN_FORMAT_REASONS = UNKNOWN_LINE_REASONS + UNKNOWN_LAYOUT_REASONS


def quarantined(by: str, reasons: str) -> str:
    """Growth of the quarantined-records counter over <<errorWindow>>, summed by `by`, for the
    reasons the matcher `reasons` selects: the input alerts split that one counter by reason."""
    return (f"sum by ({by}) (increase({P}_quarantined_records_total"
            f"{{{reasons}}}[<<errorWindow>>]))")


_HB = f'{P}_member_removals_total{{cause="{RemovalCause.HEARTBEAT_EXPIRY}"}}'
_RB = f'{P}_rebalances_total{{group!="__other__"}}'
_RT = f'{P}_rebalance_timeouts_total{{group!="__other__"}}'
_PS = f'{P}_partition_seconds_stopped_total{{group!="__other__"}}'

# REBALANCING_STATES (state/vocabulary.py): label values of rebalance_monitor_group_state.


def time_rebalancing(matchers: str) -> str:
    """One series per (group, rebalancing state) of rebalance_monitor_group_state{matchers}: the
    wall-clock seconds since the group's last state change for its current state, 0 for the
    other states. Wall clock, not rebalance_monitor_group_rebalance_in_progress_seconds: that
    gauge is event time and stops growing while the cluster is quiet, which a stuck group is."""
    return (f'{P}_group_state{{state=~"{"|".join(REBALANCING_STATES)}", {matchers}}}\n'
            "* on (cluster, group, protocol) group_left ()\n"
            "max by (cluster, group, protocol) "
            f"(time() - {P}_group_state_since_timestamp_seconds{{{matchers}}})")


def stuck_threshold(matchers: str) -> str:
    """Per (cluster, group, protocol): the seconds after which a rebalancing group counts as stuck.
    max(<<stuckTimeoutFactor>> x its rebalance timeout, <<stuckMinSeconds>>) where the timeout is
    known, else <<stuckSeconds>> (for every group that has a state-since series)."""
    return ("clamp_min(<<stuckTimeoutFactor>> * max by (cluster, group, protocol) "
            f"({P}_group_rebalance_timeout_seconds{{{matchers}}}), <<stuckMinSeconds>>)\n"
            "or\n"
            "<<stuckSeconds>> + 0 * max by (cluster, group, protocol) "
            f"({P}_group_state_since_timestamp_seconds{{{matchers}}})")


def stuck(matchers: str, comparison: str = ">") -> str:
    """time_rebalancing compared with stuck_threshold per group (`>`: the series over it, with the
    time in state as value; `> bool`: 1 or 0 for every series)."""
    def indent(text: str) -> str:
        return "\n".join("  " + line for line in text.splitlines())
    return (f"(\n{indent(time_rebalancing(matchers))}\n)\n"
            f"{comparison} on (cluster, group, protocol) group_left ()\n"
            f"(\n{indent(stuck_threshold(matchers))}\n)")


GROUP_ALERTS = [
    Alert(
        name="KafkaConsumerGroupRebalanceStorm",
        severity="ticket",
        probe=f"sum by (cluster, group) (\n  {new_in_window(_RB, '<<stormWindow>>')}\n)",
        condition="> <<stormRebalances>>",
        for_="<<stormFor>>",
        summary="Consumer group {{ $labels.group }} rebalances again and again",
        description=("Group {{ $labels.group }} on cluster {{ $labels.cluster }} finished "
                     "{{ $value | humanize }} rebalances in the last <<stormWindow>>, for at least "
                     "<<stormFor>>. Every rebalance pauses consumption of the group's partitions."),
    ),
    Alert(
        name="KafkaConsumerGroupRebalanceStuck",
        severity="page",
        # every (group, rebalancing state) series, 1 where the group is over its threshold: both
        # sides of the comparison must match on the exported labels
        probe=stuck('group!="__other__"', "> bool"),
        condition="",
        expr=stuck('group!="__other__"'),
        for_="<<stuckFor>>",
        summary="Consumer group {{ $labels.group }} is stuck in {{ $labels.state }}",
        description=("Group {{ $labels.group }} on cluster {{ $labels.cluster }} has been in "
                     "{{ $labels.state }} for {{ $value | humanizeDuration }}, longer than "
                     "<<stuckTimeoutFactor>> times its rebalance timeout (at least <<stuckMinSeconds>> s), "
                     "or <<stuckSeconds>> s while its rebalance timeout is unknown. The partitions "
                     "being reassigned are not consumed until the rebalance completes."),
    ),
    Alert(
        name="KafkaConsumerGroupRebalanceTimeout",
        severity="ticket",
        probe=f"sum by (cluster, group) (\n  {new_in_window(_RT, '<<rebalanceTimeoutWindow>>')}\n)",
        condition="> <<rebalanceTimeouts>>",
        for_="0m",
        summary="A rebalance of consumer group {{ $labels.group }} ran into its rebalance timeout",
        description=("In the last <<rebalanceTimeoutWindow>>, {{ $value | humanize }} rebalance(s) of "
                     "group {{ $labels.group }} on cluster {{ $labels.cluster }} waited the whole "
                     "rebalance timeout (max.poll.interval.ms) for a member that did not rejoin: that "
                     "member held the whole group until the coordinator removed it."),
    ),
    Alert(
        name="KafkaConsumerGroupRebalanceCost",
        severity="ticket",
        probe=f"sum by (cluster, group) (\n  {new_in_window(_PS, '<<costWindow>>')}\n) / 60",
        condition="> <<costPartitionMinutes>>",
        for_="0m",
        summary="Rebalances of consumer group {{ $labels.group }} stopped a lot of consumption",
        description=("In the last <<costWindow>>, the rebalances of group {{ $labels.group }} on cluster "
                     "{{ $labels.cluster }} stopped {{ $value | humanize }} partition-minutes of "
                     "consumption (more than <<costPartitionMinutes>>): expect lag on those partitions. "
                     "The rebalance records say which partitions, for how long, and which removal "
                     "cost the most."),
    ),
    Alert(
        name="KafkaConsumerHeartbeatExpiryBurst",
        severity="ticket",
        probe=f"sum by (cluster) (\n  {new_in_window(_HB, '<<heartbeatBurstWindow>>')}\n)",
        condition="",
        expr=(f"sum by (cluster) (\n  {new_in_window(_HB, '<<heartbeatBurstWindow>>')}\n)"
              " >= <<heartbeatBurstRemovals>>\n"
              "and on (cluster)\n"
              "count by (cluster) (\n"
              f"  sum by (cluster, group) ({new_in_window(_HB, '<<heartbeatBurstWindow>>')}) > 0\n"
              ") >= <<heartbeatBurstGroups>>"),
        for_="0m",
        summary="Many consumers on {{ $labels.cluster }} stopped heartbeating at once",
        description=("{{ $value | humanize }} members were removed for heartbeat expiry in the last "
                     "<<heartbeatBurstWindow>> on cluster {{ $labels.cluster }}, across at least "
                     "<<heartbeatBurstGroups>> groups. Many groups at once points at something they "
                     "share: nodes, network, GC pauses, or the brokers."),
    ),
]

MONITOR_ALERTS = [
    Alert(
        name="RebalanceMonitorDown",
        severity="page",
        probe="up{<<jobSelector>>}",
        condition="== 0",
        for_="<<monitorDownFor>>",
        summary="Prometheus cannot scrape the rebalance monitor {{ $labels.instance }}",
        description=("The /metrics endpoint of {{ $labels.instance }} (job {{ $labels.job }}) has "
                     "not answered for <<monitorDownFor>>. Rebalances are not being watched."),
    ),
    Alert(
        name="RebalanceMonitorAbsent",
        severity="page",
        probe="up{<<jobSelector>>}",
        condition="",
        expr="absent(up{<<jobSelector>>})",
        for_="<<monitorAbsentFor>>",
        summary="No rebalance monitor is being scraped",
        description=("Prometheus has had no target with <<jobSelector>> for <<monitorAbsentFor>>: "
                     "the monitor's pod is gone (a SparkApplication that failed or is resubmitting) "
                     "or the PodMonitor/ServiceMonitor does not select it."),
    ),
    Alert(
        name="RebalanceMonitorSourceDown",
        severity="page",
        probe=f"{P}_source_up",
        condition="== 0",
        for_="<<sourceDownFor>>",
        summary="The rebalance monitor cannot read Kafka ({{ $labels.source }})",
        description=("{{ $labels.instance }} has failed to read its {{ $labels.source }} topic for "
                     "<<sourceDownFor>> (broker unreachable, authentication, topic deleted). It "
                     "retries with backoff; until then no rebalance is seen."),
    ),
    Alert(
        name="RebalanceMonitorLagging",
        severity="ticket",
        probe=f"{P}_watermark_delay_seconds",
        condition="> <<laggingSeconds>>",
        for_="<<laggingFor>>",
        summary="The rebalance monitor is {{ $value | humanizeDuration }} behind",
        description=("The event-time watermark of {{ $labels.instance }} is "
                     "{{ $value | humanizeDuration }} behind the wall clock (threshold "
                     "<<laggingSeconds>> s). Rebalances are reported that late, and the stuck-group "
                     "alert measures from event time."),
    ),
    Alert(
        name="RebalanceMonitorQuarantinedInputs",
        severity="ticket",
        # unknown coordinator lines and record layouts have alerts (and runbooks) of their own
        probe=quarantined("job, instance, cluster, source, reason", f'reason!~"{"|".join(UNKNOWN_FORMAT_REASONS)}"'),
        condition="> <<quarantinedRecords>>",
        for_="0m",
        summary="The rebalance monitor cannot use some {{ $labels.source }} input ({{ $labels.reason }})",
        description=("{{ $value | humanize }} {{ $labels.source }} inputs of cluster {{ $labels.cluster }} "
                     "were quarantined as {{ $labels.reason }} in the last <<errorWindow>>. Events "
                     "in them are missing from the rebalance records."),
    ),
    Alert(
        name="RebalanceMonitorUnknownCoordinatorLines",
        severity="ticket",
        probe=quarantined("job, instance, cluster", f'reason="{UNKNOWN_LINE_REASONS[0]}"'),
        condition="> <<unknownCoordinatorLines>>",
        for_="0m",
        summary="Group-coordinator lines of {{ $labels.cluster }} that the monitor does not know",
        description=("{{ $value | humanize }} INFO/WARN/ERROR group-coordinator log lines of cluster "
                     "{{ $labels.cluster }} matched no known message in the last <<errorWindow>>: a Kafka "
                     "version or patch with new wording. Rebalances or removals those lines describe are "
                     f"missing or incomplete. {P}_unknown_coordinator_lines_total says which "
                     "logger; quarantine records keep samples of the lines."),
    ),
    Alert(
        name="RebalanceMonitorUnknownRecordLayouts",
        severity="ticket",
        probe=quarantined("job, instance, cluster, reason", f'reason=~"{"|".join(UNKNOWN_LAYOUT_REASONS)}"'),
        condition="> <<unknownRecordLayouts>>",
        for_="0m",
        summary="__consumer_offsets records of {{ $labels.cluster }} in a layout the monitor does not know",
        description=("{{ $value | humanize }} __consumer_offsets records of cluster {{ $labels.cluster }} "
                     "had a record type or value version this monitor cannot decode ({{ $labels.reason }}) "
                     "in the last <<errorWindow>>: a newer Kafka. Group state carried by them is missing. "
                     f"{P}_offsets_records_total says which key and value versions."),
    ),
    Alert(
        name="RebalanceMonitorLogClockSkew",
        severity="ticket",
        probe=f"abs({P}_log_clock_skew_seconds)",
        condition="> <<clockSkewSeconds>>",
        for_="<<clockSkewFor>>",
        summary="Log source {{ $labels.source }} is {{ $value | humanizeDuration }} off the offsets topic",
        description=("The log times of {{ $labels.source }} (cluster {{ $labels.cluster }}) are "
                     "{{ $value | humanizeDuration }} away from the __consumer_offsets records Kafka writes "
                     "for the same coordinator actions (median of the last 15 pairs; threshold "
                     "<<clockSkewSeconds>> s). Whole hours: broker_timezone is wrong. Anything else: that "
                     "broker's clock is off. Durations that mix log lines and records are off as much."),
    ),
    Alert(
        name="RebalanceMonitorSourceMismatch",
        severity="ticket",
        probe=("sum by (job, instance, cluster, missing_in) "
               f"(increase({P}_source_mismatches_total[<<errorWindow>>]))"),
        condition="> <<sourceMismatches>>",
        for_="0m",
        summary="Generations of {{ $labels.cluster }} missing in the {{ $labels.missing_in }}",
        description=("{{ $value | humanize }} classic generations of cluster {{ $labels.cluster }} in the "
                     "last <<errorWindow>> were seen in one input and not in the other (missing in the "
                     "{{ $labels.missing_in }}): a broker's logs are not shipped, or the monitor does not "
                     "read every __consumer_offsets partition. Records of the affected groups are built "
                     "from one source only."),
    ),
    Alert(
        name="RebalanceMonitorOffsetGap",
        severity="ticket",
        # the gauge only grows (its count is kept in the checkpointed offsets): growth in the window
        # is max - min, exact where delta() would extrapolate
        probe=(f"max_over_time({P}_source_offset_gap_records[<<errorWindow>>])\n"
               f"- min_over_time({P}_source_offset_gap_records[<<errorWindow>>])"),
        condition="> <<offsetGapRecords>>",
        for_="0m",
        summary="The rebalance monitor skipped {{ $value | humanize }} {{ $labels.source }} records",
        description=("In the last <<errorWindow>>, retention or compaction removed {{ $value | humanize }} "
                     "records of the {{ $labels.source }} topic before {{ $labels.instance }} read them (it "
                     "continued from the first record that exists). Events in them are missing from the "
                     "rebalance records."),
    ),
    Alert(
        name="RebalanceMonitorLateRows",
        severity="ticket",
        probe=f"sum by (job, instance) (increase({P}_late_rows_total[<<errorWindow>>]))",
        condition="> <<lateRows>>",
        for_="0m",
        summary="The rebalance monitor dropped late events",
        description=("{{ $labels.instance }} dropped {{ $value | humanize }} events in the last "
                     "<<errorWindow>> because they arrived after the watermark had passed them."),
    ),
    Alert(
        name="RebalanceMonitorInvalidTransitions",
        severity="ticket",
        probe=("sum by (job, instance, cluster) "
               f"(increase({P}_invalid_transitions_total[<<errorWindow>>]))"),
        condition="> <<invalidTransitions>>",
        for_="0m",
        summary="The rebalance monitor saw transitions Kafka forbids on {{ $labels.cluster }}",
        description=("{{ $value | humanize }} group state transitions on cluster {{ $labels.cluster }} "
                     "in the last <<errorWindow>> are impossible in Kafka's state table: input was "
                     "missed or misordered."),
    ),
    Alert(
        name="RebalanceMonitorQueryRestarting",
        severity="ticket",
        probe=f"increase({P}_query_restarts_total[<<restartWindow>>])",
        condition="> <<queryRestarts>>",
        for_="0m",
        summary="The rebalance monitor's streaming query keeps failing",
        description=("The streaming query of {{ $labels.instance }} failed and was restarted "
                     "{{ $value | humanize }} times in the last <<restartWindow>>."),
    ),
    Alert(
        name="RebalanceMonitorDiskFull",
        # a page: while the disk is full no rebalance is watched, only a person can make room, and
        # the deadline (the topics' retention) can be hours away
        severity="page",
        probe=f"{P}_disk_full",
        condition="== 1",
        for_="<<diskFullFor>>",
        summary="The rebalance monitor's {{ $labels.path }} disk is full",
        description=("{{ $labels.instance }} has failed for <<diskFullFor>> to write its {{ $labels.path }} "
                     "(sink: events_dir, checkpoint: checkpoint_location) for want of space. It waits with the "
                     "micro-batch uncommitted and retries every 15 s: nothing is lost and /metrics still "
                     "answers, but no rebalance is watched until there is room, and what it has not read "
                     "is only kept as long as the Kafka topics' retention."),
    ),
    Alert(
        name="RebalanceMonitorStalled",
        severity="page",
        probe=f"increase({P}_batches_total[<<stallWindow>>])",
        # while Kafka answers: a source that is down stops the batches too (SourceDown says so),
        # and a replay or demo serves no source_up at all
        condition=f"== 0 and on (job, instance) min by (job, instance) ({P}_source_up) == 1",
        for_="<<stallFor>>",
        summary="The rebalance monitor's streaming query has stopped",
        description=("{{ $labels.instance }} answers and reads Kafka but ran no micro-batch in the last "
                     "<<stallWindow>>: its query is stuck (on a cluster: no executors left, e.g. after a standalone master "
                     "restarted without recovery). Rebalances are not being watched."),
    ),
    Alert(
        name="RebalanceMonitorGroupsOverCap",
        severity="ticket",
        probe=f"{P}_groups_over_cap",
        condition="> 0",
        for_="<<overCapFor>>",
        summary="{{ $value | humanize }} consumer groups have no series of their own",
        description=("{{ $labels.instance }} tracks more groups than max_groups; the rest are "
                     "folded into group=\"__other__\" and have no state gauges or alerts."),
    ),
]

# --- incidents: what pages (state/incidents.py, sinks/incident_gauges.py) -------------------------
_INCIDENT = f"{P}_incident_started_timestamp_seconds"


def _incident_info(family: str, label: str, sep: str) -> str:
    """A Go template listing `label` of the incident's `family` series, sorted (when the alert fires)."""
    return (f'{{{{ range query (printf "{P}_incident_' + family + '{cluster=%q,incident=%q}" $labels.cluster '
            f'$labels.incident) | sortByLabel "{label}" }}}}{{{{ .Labels.{label} }}}}{sep}{{{{ end }}}}')


INCIDENT_GROUPS = _incident_info("group_info", "group", " ")
INCIDENT_EVIDENCE = _incident_info("evidence_info", "evidence", "")


def incident_series(kinds: str, with_group: bool = False) -> str:
    """The incident series of the given kinds (a regex); per-group kinds get a `group` label (their
    subject), which the inhibition of the group's tickets matches on."""
    selector = f'{_INCIDENT}{{kind=~"{kinds}"}}'
    return f'label_replace({selector}, "group", "$1", "subject", "(.*)")' if with_group else selector


def _incident_alert(name: str, kinds: str, for_: str, summary: str, description: str,
                    with_group: bool = False) -> Alert:
    return Alert(
        name=name, severity="page",
        # any incident: the probe must find series on the demo, which has incidents of some kinds
        probe=_INCIDENT, condition="", expr=f"{incident_series(kinds, with_group)}\n> 0", for_=for_,
        summary=summary,
        description=f"{description} Evidence: {INCIDENT_EVIDENCE}. Incident {{{{ $labels.incident }}}}.",
        extra_annotations={"groups": INCIDENT_GROUPS, "root_cause": "{{ $labels.root_cause }}"},
    )


INCIDENT_ALERTS = [
    _incident_alert(
        "KafkaBrokerDown", "broker", "<<brokerDownFor>>",
        "Broker {{ $labels.subject }} of {{ $labels.cluster }} died",
        "Broker {{ $labels.subject }} of cluster {{ $labels.cluster }} died (no controlled shutdown of its own). "
        "Groups it coordinated move to another broker; groups whose __consumer_offsets partition it followed "
        "stall until it is dropped from the ISR, and their members are removed although they never stopped. "
        "Groups: " + INCIDENT_GROUPS + "."),
    _incident_alert(
        "KafkaConsumerHostDown", "host", "<<hostDownFor>>",
        "Consumers on host {{ $labels.subject }} ({{ $labels.cluster }}) stopped together",
        "Members of several groups on client host {{ $labels.subject }} (cluster {{ $labels.cluster }}) were "
        "removed for heartbeat expiry together: the host, its network or its runtime, not the processes one "
        "by one. Groups: " + INCIDENT_GROUPS + "."),
    _incident_alert(
        "KafkaConsumerGroupSlowProcessing", "slow_processing|rebalance_timeout", "<<slowProcessingFor>>",
        "Consumer group {{ $labels.subject }} processes too slowly for its max.poll.interval.ms",
        "{{ if eq $labels.kind \"rebalance_timeout\" }}A member of group {{ $labels.subject }} (cluster "
        "{{ $labels.cluster }}) did not rejoin within the rebalance timeout (max.poll.interval.ms): the whole group "
        "waited for it, then the coordinator removed it.{{ else }}A member of group {{ $labels.subject }} "
        "(cluster {{ $labels.cluster }}) did not poll within max.poll.interval.ms and left the group: its "
        "processing of a batch takes longer than that.{{ end }}", with_group=True),
    _incident_alert(
        "KafkaConsumerCrashLoop", "crash_loop", "<<crashLoopFor>>",
        "A consumer of group {{ $labels.subject }} crashes again and again",
        "One client of group {{ $labels.subject }} (cluster {{ $labels.cluster }}) was removed for heartbeat "
        "expiry again and again: it crashes, restarts and crashes (a crash loop), and every crash rebalances "
        "the group.", with_group=True),
    Alert(
        name="Watchdog",
        severity="none",
        probe="vector(1)",
        condition="",
        expr="vector(1)",
        for_="0m",
        summary="The alerting pipeline works (always firing)",
        description=("Always firing, by design: Alertmanager routes it to a dead man's switch, which pages "
                     "when it stops arriving (Prometheus, its rules or Alertmanager are down)."),
    ),
]

_RM = (f'{P}_member_removals_total{{group!="__other__",'
       'cause=~"heartbeat_expiry|poll_timeout|rebalance_timeout|sync_timeout"}')
_REMOVED = f"sum by (cluster, group) (\n  {new_in_window(_RM, '<<removalsWindow>>')}\n)"

GROUP_ALERTS.append(Alert(
    name="KafkaConsumerGroupMembersRemoved",
    severity="ticket",
    probe=_REMOVED,
    condition="",
    # with the incident that explains the removals as a label, for Alertmanager's inhibition
    expr=(f"({_REMOVED} > 0)\n* on (cluster, group) group_left (incident)\n"
          f"max by (cluster, group, incident) ({P}_incident_group_info)\n"
          f"or\n({_REMOVED} > 0)\nunless on (cluster, group) {P}_incident_group_info"),
    for_="0m",
    summary="Consumer group {{ $labels.group }} lost members involuntarily",
    description=("{{ $value | humanize }} member(s) of group {{ $labels.group }} on cluster {{ $labels.cluster }} "
                 "were removed involuntarily (heartbeat expiry, poll or rebalance timeout) in the last "
                 "<<removalsWindow>>. The removal records say why (root_cause, evidence). Silenced while an "
                 "incident that explains them pages{{ if $labels.incident }} ({{ $labels.incident }}){{ end }}."),
))

# --- consumer lag (`run` only: sinks/lag_gauges.py) -----------------------------------------------
_LAG_S = f'max by (cluster, group, topic) ({P}_group_topic_lag_seconds{{group!="__other__"}})'
GROUP_ALERTS += [
    Alert(
        name="KafkaConsumerMemberAtRisk",
        severity="ticket",
        probe=f"max by (cluster, group) ({P}_group_members_at_risk)",
        condition="> 0",
        for_="<<atRiskFor>>",
        summary="A member of consumer group {{ $labels.group }} is heading for a poll timeout",
        description=("{{ $value | humanize }} member(s) of group {{ $labels.group }} on cluster {{ $labels.cluster }} "
                     "have records waiting and have committed none of them for over half their "
                     "max.poll.interval.ms: at its end the member is removed and the group rebalances. The "
                     "monitor's log names each member, its client id and how long it has been silent."),
    ),
    Alert(
        name="KafkaConsumerGroupLagAfterRebalance",
        severity="ticket",
        probe=_LAG_S,
        condition="",
        expr=(f"{_LAG_S} > <<lagAfterRebalanceSeconds>>\nand on (cluster, group)\n"
              f"sum by (cluster, group) (\n  {new_in_window(_RB, '<<lagRebalanceWindow>>')}\n) > 0"),
        for_="<<lagAfterRebalanceFor>>",
        summary="Consumer group {{ $labels.group }} has not caught up after its rebalance",
        description=("Group {{ $labels.group }} on cluster {{ $labels.cluster }} rebalanced in the last "
                     "<<lagRebalanceWindow>> and its lag on topic {{ $labels.topic }} has stayed above "
                     "<<lagAfterRebalanceSeconds>> s for <<lagAfterRebalanceFor>> ({{ $value | humanize }} s now): "
                     "it is not catching up. The rebalance records say what stopped and why."),
    ),
]

ALERTS = INCIDENT_ALERTS + GROUP_ALERTS + MONITOR_ALERTS
GROUPS = [("rebalance-monitor.incidents", INCIDENT_ALERTS), ("rebalance-monitor.consumer-groups", GROUP_ALERTS),
          ("rebalance-monitor.monitor", MONITOR_ALERTS)]

_PARAM = re.compile(r"<<([A-Za-z]+)>>")
_GO_TEMPLATE = re.compile(r"\{\{.*?\}\}")


def _defaults(text: str, params: dict) -> str:
    def sub(m: re.Match) -> str:
        if m.group(1) not in params:
            raise KeyError(f"unknown alert parameter {m.group(1)}")
        return str(params[m.group(1)])
    return _PARAM.sub(sub, text)


def _helm(text: str) -> str:
    """Escape Prometheus' Go templates for Helm, then turn parameters into values lookups."""
    text = _GO_TEMPLATE.sub(lambda m: "{{`" + m.group(0) + "`}}", text)
    # a parameter right inside PromQL braces (up{<<jobSelector>>}) would make "{{{"
    text = re.sub(r"\{<<([A-Za-z]+)>>\}",
                  lambda m: '{{ printf "{%s}" .Values.prometheusRule.params.' + m.group(1) + " }}", text)
    def sub(m: re.Match) -> str:
        if m.group(1) not in DEFAULTS:
            raise KeyError(f"unknown alert parameter {m.group(1)}")
        return f"{{{{ .Values.prometheusRule.params.{m.group(1)} }}}}"
    return _PARAM.sub(sub, text)


def rule_groups(render=None, params: dict | None = None) -> list[dict]:
    """The `groups:` of a Prometheus rules file; `render` maps each text (default: fill in
    `params`, default DEFAULTS)."""
    values = {**DEFAULTS, **(params or {})}
    render = render or (lambda text: _defaults(text, values))
    groups = []
    for group_name, alerts in GROUPS:
        rules = []
        for a in alerts:
            rules.append({
                "alert": a.name,
                "expr": render(a.expression()),
                "for": render(a.for_),
                "labels": {"severity": a.severity, **a.extra_labels},
                "annotations": {
                    "summary": render(a.summary),
                    "description": render(a.description),
                    "runbook_url": render(f"<<runbookBaseUrl>>#{a.anchor}"),
                    **{k: render(v) for k, v in a.extra_annotations.items()},
                },
            })
        groups.append({"name": group_name, "rules": rules})
    return groups


def fill(text: str, params: dict | None = None) -> str:
    """`text` with its parameters filled in (default DEFAULTS), e.g. for a dashboard query that
    uses an alert's threshold expression (stuck_threshold)."""
    return _defaults(text, {**DEFAULTS, **(params or {})})


def probes(params: dict | None = None) -> dict[str, str]:
    """alert name -> probe expression with the given parameters (default DEFAULTS)."""
    return {a.name: fill(a.probe, params) for a in ALERTS}


def helm_rule_groups() -> list[dict]:
    return rule_groups(_helm)
