"""Fleet overview: every cluster and group the monitors export (docs/metrics.md)."""
from __future__ import annotations

from typing import cast

from dashboards.alert_rules import (
    DEFAULTS, REBALANCING_STATES, UNKNOWN_LAYOUT_REASONS, UNKNOWN_LINE_REASONS, fill, new_in_window, stuck,
    stuck_threshold, time_rebalancing
)
from dashboards.panels import (
    Dashboard, Query, Row, constant_variable, datasource_variable, heatmap, query_variable, stat, table, thresholds,
    timeseries, value_mappings
)
from state.diagnosis.rules import ROOT_CAUSES
from state.vocabulary import METRIC_PREFIX as P, GroupState

C = 'cluster=~"$cluster"'
CG = 'cluster=~"$cluster", group=~"$group"'
RB = f"{P}_rebalances_total{{{CG}}}"
MR = f"{P}_member_removals_total{{{CG}}}"
# Duration histograms are per (cluster, protocol, phase); per group there is the last duration of
# each phase (docs/metrics.md, "Series per group").
BUCKET = f"{P}_rebalance_duration_seconds_bucket"
LAST = f"{P}_group_last_rebalance_duration_seconds"
RT = f"{P}_rebalance_timeouts_total{{{CG}}}"
PS = f"{P}_partition_seconds_stopped_total{{{CG}}}"
COST_N = cast(int, DEFAULTS["costPartitionMinutes"])
REBALANCING = "|".join(REBALANCING_STATES)
STORM_WINDOW = str(DEFAULTS["stormWindow"])
STORM_N = cast(int, DEFAULTS["stormRebalances"])
TIMEOUT_WINDOW = str(DEFAULTS["rebalanceTimeoutWindow"])
# the per-group threshold of KafkaConsumerGroupRebalanceStuck, in words
STUCK_RULE = (f"max({DEFAULTS['stuckTimeoutFactor']} x the group's rebalance timeout, {DEFAULTS['stuckMinSeconds']} s), "
              f"or {DEFAULTS['stuckSeconds']} s while the timeout is unknown")

GROUP_LINK = [{"title": "Open the group drill-down", "targetBlank": False,
               "url": "/d/rebalance-group/kafka-rebalances-group?var-datasource=${datasource}"
                      "&var-cluster=${__data.fields.cluster}&var-group=${__data.fields.group}"
                      "&${__url_time_range}"}]


def inputs_row() -> Row:
    """How far the inputs can be trusted: the panels of the RebalanceMonitorLogClockSkew,
    UnknownCoordinatorLines, UnknownRecordLayouts, SourceMismatch and OffsetGap alerts. A breakdown
    whose counter has no series until the first event falls back (`or on (cluster)`) to the
    per-cluster quarantine counter, which exists at 0, so each panel shows a line from the start."""
    quarantined = f"{P}_quarantined_records_total"
    per_cluster_lines = (f'sum by (cluster) (increase({quarantined}{{reason="{UNKNOWN_LINE_REASONS[0]}", {C}}}'
                         "[$__rate_interval]))")
    per_cluster_layouts = (f'sum by (cluster) (increase({quarantined}{{reason=~"{"|".join(UNKNOWN_LAYOUT_REASONS)}", '
                           f"{C}}}[$__rate_interval]))")
    return Row("Inputs: clock skew, unknown formats, source mismatches, gaps", [
        timeseries("Log clock skew by source", "How far each log source's times are from the __consumer_offsets "
                   "records Kafka writes for the same coordinator actions (absolute value of "
                   f"{P}_log_clock_skew_seconds, median of the last 15 pairs). Milliseconds when "
                   "broker_timezone is right; whole hours when it is not. The line is the "
                   "RebalanceMonitorLogClockSkew threshold.", "s",
                   Query(f"abs({P}_log_clock_skew_seconds{{{C}}})", "{{cluster}} {{source}}"),
                   width=8, threshold=cast(float, DEFAULTS["clockSkewSeconds"])),
        timeseries("Unknown coordinator lines", "Group-coordinator log lines that match no known message, per "
                   "interval, by logger (a Kafka version with new wording; RebalanceMonitorUnknownCoordinatorLines). "
                   "Per cluster while no logger has any.", "short",
                   Query(f"sum by (cluster, logger) (increase({P}_unknown_coordinator_lines_total{{{C}}}"
                         f"[$__rate_interval])) or on (cluster) {per_cluster_lines}", "{{cluster}} {{logger}}"),
                   width=8, bars=True),
        timeseries("Unknown __consumer_offsets layouts", "Records of a type or value version the decoder does not "
                   "know, per interval, by key and value version (RebalanceMonitorUnknownRecordLayouts). Per "
                   "cluster while there are none.", "short",
                   Query(f"sum by (cluster, key_version, value_version) (increase({P}_offsets_records_total"
                         f'{{outcome=~"unknown_type|unknown_version", {C}}}[$__rate_interval])) or on (cluster) '
                         f"{per_cluster_layouts}", "{{cluster}} key {{key_version}} value {{value_version}}"),
                   width=8, bars=True),
        timeseries("Source mismatches", "Classic generations seen in the broker logs and not in __consumer_offsets "
                   "or the other way round, per interval (RebalanceMonitorSourceMismatch).", "short",
                   Query(f"sum by (cluster, missing_in) (increase({P}_source_mismatches_total{{{C}}}"
                         "[$__rate_interval]))", "{{cluster}} missing in {{missing_in}}"), width=8, bars=True),
        timeseries("Records lost to retention", "Records of the monitor's Kafka topics removed by retention or "
                   "compaction before it read them, since its checkpoint began (RebalanceMonitorOffsetGap; "
                   "rebalance-monitor run only).", "short",
                   Query(f"{P}_source_offset_gap_records", "{{instance}} {{source}}"), width=8),
        timeseries("Backlog in Kafka", "Records of the monitor's Kafka topics not yet read when its last "
                   "micro-batch was planned. A catch-up (a new checkpoint, a monitor that was down) reads it in "
                   "capped batches and logs its ETA; until it is at the head the monitor's view is behind "
                   f"({P}_source_catching_up; rebalance-monitor run only).", "short",
                   Query(f"{P}_source_backlog_records", "{{instance}} {{source}}"), width=8),
    ])


def slowest(by: str, phase: str = "total", window: str = "$__range") -> str:
    """The longest last-rebalance duration of each group seen in the window: the gauge holds the
    latest rebalance's phase duration, so its max over time is the slowest rebalance the scrapes
    caught (one that is followed by another within a scrape interval is not seen)."""
    return f"max by ({by}) (max_over_time({LAST}{{{CG}, phase=\"{phase}\"}}[{window}]))"


def quantile(q: float, by: str, phase_filter: str = ', phase="total"', window: str = "$__rate_interval",
             func: str = "rate") -> str:
    return (f"histogram_quantile({q}, sum by ({by}, le) "
            f"({func}({BUCKET}{{{C}{phase_filter}}}[{window}])))")


def build() -> Dashboard:
    top20 = f"topk(20, {slowest('cluster, group')})"
    by_state = "cluster, group, protocol, state"
    overview = Row("Overview", [
        stat("Rebalances", "Rebalances that ended in the selected time range (all triggers and outcomes).",
             "short", Query(f"sum(increase({RB}[$__range]))")),
        stat("Member removals", "Members removed from groups in the selected time range, all causes.",
             "short", Query(f"sum(increase({MR}[$__range]))")),
        stat("Live groups", "Consumer groups the monitors track now (every state but Dead).",
             "short", Query(f'sum({P}_groups{{{C}, state!="{GroupState.DEAD}"}})')),
        stat("Rebalancing now", f"Groups in {REBALANCING.replace('|', ', ')} now.", "short",
             Query(f'sum({P}_group_state{{{CG}, state=~"{REBALANCING}"}})'),
             steps=((None, "green"), (1, "orange"))),
        stat("Stuck rebalances",
             f"Groups in {REBALANCING.replace('|', ', ')} for longer than their threshold of the "
             f"KafkaConsumerGroupRebalanceStuck alert: {STUCK_RULE} (wall clock since the group's last "
             "state change). The alert fires when it lasts "
             f"{DEFAULTS['stuckFor']}.", "short",
             Query(f"sum(\n{fill(stuck(CG, '> bool'))}\n)"),
             steps=((None, "green"), (1, "red"))),
        stat("Quarantined inputs", "Inputs the monitors could not use in the selected time range "
             "(should be 0: a new broker log wording or a damaged record).", "short",
             Query(f"sum(increase({P}_quarantined_records_total{{{C}}}[$__range]))"),
             steps=((None, "green"), (1, "orange"))),
    ])
    rebalances = Row("Rebalances", [
        timeseries("Rebalances per minute by trigger",
                   "Rebalances that ended, per minute, by what started them (member_join, member_leave, "
                   "heartbeat_expiry, poll_timeout, ...). Counted when the monitor processes them.",
                   "suffix:/min", Query(f"60 * sum by (cluster, trigger) (rate({RB}[$__rate_interval]))",
                                        "{{cluster}} {{trigger}}"), stacked=True),
        timeseries("Rebalances per minute by outcome",
                   "Rebalances that ended, per minute, by how they ended: stable, empty (every member "
                   "left), superseded (another rebalance started first), dead.",
                   "suffix:/min", Query(f"60 * sum by (cluster, outcome) (rate({RB}[$__rate_interval]))",
                                        "{{cluster}} {{outcome}}"), stacked=True),
        timeseries("Groups by state", f"Live groups per state and cluster ({P}_groups).",
                   "short", Query(f'sum by (cluster, state) ({P}_groups{{{C}, state!="{GroupState.DEAD}"}})',
                                  "{{cluster}} {{state}}"), stacked=True),
        timeseries("Groups rebalancing", f"Groups in {REBALANCING.replace('|', ', ')} per cluster.",
                   "short", Query(f'sum by (cluster) ({P}_group_state{{{CG}, state=~"{REBALANCING}"}})',
                                  "{{cluster}}")),
    ])
    durations = Row("Slowest rebalances", [
        timeseries("Total rebalance duration (p50, p95, p99)",
                   "Start to Stable (or to Empty), from the duration histogram, per cluster.", "s",
                   Query(quantile(0.5, "cluster"), "p50 {{cluster}}"),
                   Query(quantile(0.95, "cluster"), "p95 {{cluster}}"),
                   Query(quantile(0.99, "cluster"), "p99 {{cluster}}")),
        timeseries("p95 duration by phase",
                   "join: start to the end of the JOIN phase (waits for every member, up to the rebalance "
                   "timeout); sync: JOIN end to Stable; total: both.", "s",
                   Query(quantile(0.95, "cluster, phase", phase_filter=""), "{{cluster}} {{phase}}")),
        heatmap("Total duration distribution",
                "How many rebalances fell into each duration bucket per interval (phase total).",
                f'sum by (le) (increase({BUCKET}{{{C}, phase="total"}}[$__rate_interval]))'),
        table("Slowest groups in the time range",
              "The 20 groups whose slowest rebalance (start to Stable or Empty, the largest value the "
              "scrapes saw of the group's last-rebalance duration) was longest in the selected range, with "
              "their number of rebalances. Per-group percentiles need the group in the group_histograms "
              "setting (docs/metrics.md). Click a row for the group drill-down.", "s",
              Query(top20),
              Query(f"sum by (cluster, group) (increase({RB}[$__range]))\n"
                    f"and on (cluster, group) {top20}"),
              sort_by="slowest", rename={"Value #A": "slowest", "Value #B": "rebalances"},
              links=GROUP_LINK,
              steps=((None, "green"), (60, "orange"), (300, "red"))),
    ])
    removals = Row("Member removals", [
        timeseries("Removals per minute by cause",
                   "Members removed per minute: heartbeat_expiry, leave_group, poll_timeout, "
                   "rebalance_timeout, sync_timeout, pending_member_timeout, static_member_fenced, "
                   "group_deleted.", "suffix:/min",
                   Query(f"60 * sum by (cluster, cause) (rate({MR}[$__rate_interval]))", "{{cluster}} {{cause}}"),
                   stacked=True),
        timeseries("Removals per minute by root cause",
                   "The diagnosed reason behind removals (root_cause label: "
                   f"{', '.join(ROOT_CAUSES)}; docs/diagnosis.md).", "suffix:/min",
                   Query(f"60 * sum by (cluster, root_cause) (rate({MR}[$__rate_interval]))",
                         "{{cluster}} {{root_cause}}"), stacked=True),
        table("Removals in the time range by group and cause",
              "The 20 (group, cause, root cause) combinations with the most removals in the selected range.",
              "short", Query(f"topk(20, sum by (cluster, group, cause, root_cause) (increase({MR}[$__range])))"),
              sort_by="Value", rename={"Value": "removals"}, links=GROUP_LINK, width=24),
    ])
    cost = Row("Cost of rebalances", [
        timeseries("Partitions stopped by rebalances",
                   "Partition-minutes of consumption stopped per minute, that is the average number of "
                   "partitions not consumed because of rebalances, per cluster (docs/impact.md: each partition "
                   "a rebalance reassigned, from when it stopped to the new owner's assignment). Classic and "
                   "consumer (KIP-848) groups; share and streams groups are not measured yet.", "short",
                   Query(f"sum by (cluster) (rate({PS}[$__rate_interval]))", "{{cluster}}"), stacked=True),
        table("Costliest groups in the time range",
              "The 20 groups whose rebalances stopped the most partition-minutes of consumption in the "
              f"selected range. Red above {COST_N}, the KafkaConsumerGroupRebalanceCost alert's threshold "
              "(over 10 minutes). The rebalance records say which partitions and which removal cost most.",
              "short", Query(f"topk(20, sum by (cluster, group) (increase({PS}[$__range])) / 60)"),
              sort_by="partition-minutes", rename={"Value": "partition-minutes"}, links=GROUP_LINK,
              steps=((None, "green"), (COST_N / 2, "orange"), (COST_N, "red"))),
        heatmap("Stop time per partition",
                "How long each reassigned partition had stopped being consumed, per bucket and interval "
                f"({P}_partition_stop_seconds): eager rebalances stop every partition for the "
                "whole rebalance; a crashed member's partitions from its last heartbeat.",
                f'sum by (le) (increase({P}_partition_stop_seconds_bucket{{{C}}}[$__rate_interval]))'),
    ])
    storms = Row("Storms and stuck groups", [
        table("Rebalances per group in the last $storm_window (storms)",
              "The 10 groups with the most rebalances in the last $storm_window (the window of the "
              "KafkaConsumerGroupRebalanceStorm alert), counting groups whose first rebalance it is. Red above "
              f"{STORM_N}, the alert's threshold.",
              "short", Query(f"topk(10, sum by (cluster, group) ({new_in_window(RB, '$storm_window')}))"),
              sort_by="rebalances", rename={"Value": "rebalances"}, links=GROUP_LINK,
              steps=((None, "green"), (STORM_N / 2, "orange"), (STORM_N + 1, "red"))),
        table("Groups in a rebalance, longest first",
              f"Groups now in {REBALANCING.replace('|', ', ')}, how long (wall clock since the group's last "
              "state change, event time) and after how long KafkaConsumerGroupRebalanceStuck counts them "
              f"as stuck: {STUCK_RULE}. Rows of groups in other states (value 0) are filtered out.",
              "s", Query(f"topk(50, max by ({by_state}) (\n{fill(time_rebalancing(CG))}\n))"),
              Query(f'max by ({by_state}) ({P}_group_state{{{CG}, state=~"{REBALANCING}"}} == 1)\n'
                    "* on (cluster, group, protocol) group_left ()\n"
                    f"(\n{fill(stuck_threshold(CG))}\n)"),
              sort_by="in state", rename={"Value #A": "in state", "Value #B": "stuck after"}, links=GROUP_LINK,
              keep_above=0),
        table("Groups by rebalances started in the storm window",
              "The 10 groups that started the most rebalances within the storm window (storm_window_seconds, "
              "10 minutes of event time by default) before the newest event of their cluster "
              f"({P}_group_rebalances_in_window). Unlike the table beside it this is event "
              "time, so it also shows storms in a replay or in data the monitor is catching up on. Red "
              f"above {STORM_N}, the storm alert's threshold.",
              "short", Query(f"topk(10, max by (cluster, group) ({P}_group_rebalances_in_window{{{CG}}}))"),
              sort_by="rebalances", rename={"Value": "rebalances"}, links=GROUP_LINK, keep_above=0,
              steps=((None, "green"), (STORM_N / 2, "orange"), (STORM_N + 1, "red"))),
        table("Rebalance timeouts per cluster (last $timeout_window)",
              "Per cluster: rebalances whose JOIN phase ran into the group's rebalance timeout (a member "
              "did not rejoin within max.poll.interval.ms and held its whole group that long). \"in the "
              "window\": in the last $timeout_window, counted like the KafkaConsumerGroupRebalanceTimeout "
              "alert (a group's first timeout included). \"total\": since the monitors' counters start "
              "(kept across restarts with an event sink; groups removed after Dead drop out).", "short",
              Query(f"sum by (cluster) ({new_in_window(RT, '$timeout_window')})"),
              Query(f"sum by (cluster) ({RT})"),
              sort_by="in the window", rename={"Value #A": "in the window", "Value #B": "total"},
              steps=((None, "green"), (1, "orange"))),
    ])
    health = Row("Monitor health", [
        timeseries("Input rows per second", "Raw rows read per source: broker log lines and "
                   "__consumer_offsets records.", "suffix: rows/s",
                   Query(f"sum by (instance, source) (rate({P}_input_records_total[$__rate_interval]))",
                         "{{instance}} {{source}}"), width=8),
        timeseries("Micro-batch duration", "Wall time of the last micro-batch; above the trigger interval "
                   "the monitor cannot keep up.", "s",
                   Query(f"{P}_batch_duration_seconds", "{{instance}}"), width=8),
        timeseries("Watermark delay", "Wall clock minus the query's event-time watermark: how late "
                   "rebalances are reported. The line is the RebalanceMonitorLagging threshold.", "s",
                   Query(f"{P}_watermark_delay_seconds", "{{instance}}"), width=8,
                   threshold=cast(float, DEFAULTS["laggingSeconds"])),
        timeseries("Newest event age by source", "Wall clock minus the newest event time seen per source. "
                   "Grows on a quiet cluster too (no group activity), so it is not alerted on.", "s",
                   Query(f"{P}_source_newest_event_age_seconds", "{{instance}} {{source}}"), width=8),
        timeseries("Late rows", "Events dropped because they arrived after the watermark (raise "
                   "lateness_seconds if this is not 0).", "short",
                   Query(f"sum by (instance) (increase({P}_late_rows_total[$__rate_interval]))",
                         "{{instance}}"), width=8, bars=True),
        timeseries("Kafka source up", "1 when the last read of the source's Kafka topic worked, 0 when it "
                   "failed (rebalance-monitor run only).", "none",
                   Query(f"{P}_source_up", "{{instance}} {{source}}"), width=8),
        timeseries("Kafka source errors", "Failed attempts to reach Kafka per interval.", "short",
                   Query(f"sum by (instance, source) (increase({P}_source_errors_total[$__rate_interval]))",
                         "{{instance}} {{source}}"), width=8, bars=True),
        timeseries("Quarantined inputs by reason", "Inputs that could not be used, per interval "
                   "(each one is a line in the quarantine output).", "short",
                   Query(f"sum by (cluster, source, reason) (increase({P}_quarantined_records_total{{{C}}}[$__rate_interval]))",
                         "{{cluster}} {{source}} {{reason}}"), width=8, bars=True),
        timeseries("Invalid transitions", "Transitions Kafka's state table forbids, per interval: missed "
                   "or misordered input.", "short",
                   Query(f"sum by (cluster) (increase({P}_invalid_transitions_total{{{C}}}[$__rate_interval]))",
                         "{{cluster}}"), width=8, bars=True),
        timeseries("Query restarts", "Times the streaming query failed and was restarted from its "
                   "checkpoint, per interval.", "short",
                   Query(f"sum by (instance) (increase({P}_query_restarts_total[$__rate_interval]))",
                         "{{instance}}"), width=8, bars=True),
        timeseries("State size", "Rows in Spark's state store (one per group) and members held in "
                   "the monitor's state.", "short",
                   Query(f"{P}_state_rows", "{{instance}} state rows"),
                   Query(f"sum by (cluster) ({P}_state_members{{{C}}})", "{{cluster}} members"),
                   width=8),
        stat("Groups over max_groups", "Groups beyond max_groups: their counters are folded into "
             "group=\"__other__\" and they have no state gauges.", "short",
             Query(f"sum({P}_groups_over_cap)"), width=8,
             steps=((None, "green"), (1, "orange"))),
    ])
    return Dashboard(
        uid="rebalance-fleet", title="Kafka rebalances / fleet overview",
        description="Consumer-group rebalances, member removals, storms and stuck groups across every "
                    "monitored Kafka cluster, and the health of the rebalance monitors.",
        variables=[datasource_variable(),
                   query_variable("cluster", "Cluster", f"label_values({P}_group_state, cluster)"),
                   query_variable("group", "Group",
                                  f'label_values({P}_group_state{{cluster=~"$cluster"}}, group)'),
                   constant_variable("storm_window", "Storm window", STORM_WINDOW,
                                     "Window of the storm table: stormWindow of the alert rules"),
                   constant_variable("timeout_window", "Rebalance timeout window", TIMEOUT_WINDOW,
                                     "Window of the rebalance timeouts stat: rebalanceTimeoutWindow of the "
                                     "alert rules")],
        rows=[overview, rebalances, durations, cost, removals, storms, health, inputs_row()],
        links=[{"title": "Group drill-down", "type": "link", "icon": "dashboard", "targetBlank": False,
                "url": "/d/rebalance-group/kafka-rebalances-group", "includeVars": True, "keepTime": True,
                "asDropdown": False, "tags": [], "tooltip": ""}],
    )


__all__ = ["build", "thresholds", "value_mappings"]
