"""Group drill-down: one or a few consumer groups over time."""
from __future__ import annotations

from typing import cast

from dashboards.alert_rules import DEFAULTS
from dashboards.panels import (
    Dashboard, Query, Row, datasource_variable, heatmap, prometheus_annotation, query_variable, stat,
    state_timeline, table, timeseries, value_mappings
)
from state.diagnosis.rules import ROOT_CAUSES
from state.model import ALL_STATES
from state.vocabulary import METRIC_PREFIX as P, GroupState

CG = 'cluster=~"$cluster", group=~"$group"'
RB = f"{P}_rebalances_total{{{CG}}}"
MR = f"{P}_member_removals_total{{{CG}}}"
PS = f"{P}_partition_seconds_stopped_total{{{CG}}}"
# Per-group histograms exist only for the groups of the group_histograms setting; every group has
# the last duration of each phase (docs/metrics.md, "Series per group").
DUR = f"{P}_group_rebalance_duration_seconds"
LAST = f"{P}_group_last_rebalance_duration_seconds"

STATE_COLORS: dict[str, str] = {
    GroupState.UNKNOWN: "text", GroupState.EMPTY: "blue", GroupState.PREPARING_REBALANCE: "orange",
    GroupState.COMPLETING_REBALANCE: "yellow", GroupState.STABLE: "green", GroupState.DEAD: "red",
    GroupState.ASSIGNING: "purple", GroupState.RECONCILING: "super-light-purple", GroupState.NOT_READY: "dark-red"}
# Numeric code per state (1..9, Kafka's order in state/model.py), so one series per group can carry
# its state: the gauge has one series per group, value 1, with the current state as its label.
STATE_CODES = {name: i + 1 for i, name in enumerate(ALL_STATES)}
STATE_MAPPINGS = value_mappings({code: (name, STATE_COLORS.get(name, "text"))
                                 for name, code in STATE_CODES.items()})


def state_code_expr() -> str:
    terms = "\nor ".join(f'{P}_group_state{{{CG}, state="{name}"}} * {code}'
                         for name, code in STATE_CODES.items())
    return f"max by (cluster, group) (\n{terms}\n)"


def build() -> Dashboard:
    state = Row("State", [
        state_timeline("State over time",
                       "The group's state: Empty (no members), PreparingRebalance (JOIN phase), "
                       "CompletingRebalance (waiting for the leader's assignment), Stable; Assigning and "
                       "Reconciling for KIP-848 consumer groups; Dead after deletion or offset expiry.",
                       Query(state_code_expr(), "{{cluster}} {{group}}"), STATE_MAPPINGS),
        stat("Current state", "The group's state now.", "none",
             Query(state_code_expr(), "{{group}}"), width=6, mappings=STATE_MAPPINGS),
        stat("Time in current state", "Seconds since the group's last state change (event time of the "
             "log line or record that caused it).", "s",
             Query(f"max by (cluster, group) (time() - {P}_group_state_since_timestamp_seconds{{{CG}}})",
                   "{{group}}"), width=6),
        stat("Generation", "Current generation (classic) or group epoch (consumer protocol).", "none",
             Query(f"max by (cluster, group) ({P}_group_generation{{{CG}}})", "{{group}}"), width=6),
        stat("Members", "Members the group has now.", "short",
             Query(f"max by (cluster, group) ({P}_group_members{{{CG}}})", "{{group}}"), width=6),
        timeseries("Generation over time", "Each completed rebalance of a classic group bumps the "
                   "generation; consumer-protocol groups bump the group epoch.", "none",
                   Query(f"max by (cluster, group, protocol) ({P}_group_generation{{{CG}}})",
                         "{{group}} {{protocol}}"), min_zero=False),
        timeseries("Members over time", "Members of the group as the monitor's model holds them.", "short",
                   Query(f"max by (cluster, group, protocol) ({P}_group_members{{{CG}}})",
                         "{{group}} {{protocol}}")),
    ])
    rebalances = Row("Rebalances", [
        timeseries("Rebalances by trigger", "Rebalances that ended per interval, by what started them.",
                   "short", Query(f"sum by (group, trigger) (increase({RB}[$__rate_interval]))",
                                  "{{group}} {{trigger}}"), bars=True, stacked=True),
        timeseries("Rebalances by outcome", "Rebalances that ended per interval, by how they ended.",
                   "short", Query(f"sum by (group, outcome) (increase({RB}[$__rate_interval]))",
                                  "{{group}} {{outcome}}"), bars=True, stacked=True),
        table("Rebalances in the time range", "Rebalances per trigger and outcome in the selected range.",
              "short", Query(f"sum by (cluster, group, protocol, trigger, outcome) (increase({RB}[$__range]))"),
              rename={"Value": "rebalances"}, sort_by="rebalances", width=24),
    ])
    cost = Row("Cost of rebalances", [
        timeseries("Partition-minutes stopped", "Partition-minutes of consumption the group's rebalances "
                   "stopped per interval (docs/impact.md): each partition a rebalance reassigned, from when it "
                   "stopped to the new owner's assignment. Which partitions and which removal: the rebalance "
                   "records (`rebalance-monitor report`).", "short",
                   Query(f"sum by (group) (increase({PS}[$__rate_interval])) / 60", "{{group}}"), bars=True),
        stat("Partition-minutes stopped in the time range", "The sum over the selected range.", "short",
             Query(f"sum(increase({PS}[$__range])) / 60"), width=12),
    ])
    timeouts = Row("Rebalance timeouts and storms", [
        timeseries("Rebalance in progress vs rebalance timeout",
                   "How long the group's current rebalance has been going on (PreparingRebalance, "
                   "CompletingRebalance; Assigning, Reconciling for KIP-848 consumer groups), next to the "
                   "group's rebalance timeout (the largest max.poll.interval.ms of its members; no line while "
                   "unknown). A JOIN phase that reaches the timeout waited for a member that the coordinator "
                   "then removes. The in-progress line is event time: it stops growing while the cluster is "
                   "quiet. KafkaConsumerGroupRebalanceStuck measures wall-clock time instead and fires above "
                   f"max({DEFAULTS['stuckTimeoutFactor']} x the timeout, {DEFAULTS['stuckMinSeconds']} s).", "s",
                   Query(f"max by (cluster, group) ({P}_group_rebalance_in_progress_seconds{{{CG}}})",
                         "{{group}} in progress"),
                   Query(f"max by (cluster, group) ({P}_group_rebalance_timeout_seconds{{{CG}}})",
                         "{{group}} rebalance timeout")),
        timeseries("Rebalances started in the storm window",
                   "Rebalances the group started within the storm window (storm_window_seconds, 10 minutes "
                   "of event time by default) before the newest event of its cluster. The line is the "
                   f"threshold of KafkaConsumerGroupRebalanceStorm ({DEFAULTS['stormRebalances']}), which "
                   f"counts finished rebalances per {DEFAULTS['stormWindow']} of wall-clock time.", "short",
                   Query(f"max by (cluster, group) ({P}_group_rebalances_in_window{{{CG}}})",
                         "{{group}}"), width=6, threshold=cast(float, DEFAULTS["stormRebalances"])),
        timeseries("Rebalance timeouts hit",
                   "Rebalances of the group whose JOIN phase ran into its rebalance timeout (a member did "
                   "not rejoin within max.poll.interval.ms and held the whole group that long), counted "
                   "since the monitor's counters start (kept across restarts with an event sink). Each step "
                   "up is one; KafkaConsumerGroupRebalanceTimeout fires on it.", "short",
                   Query(f"max by (cluster, group) ({P}_rebalance_timeouts_total{{{CG}}})",
                         "{{group}}"), width=6),
    ])
    phases = Row("Phase durations", [
        timeseries("Last rebalance duration by phase", "Duration of each phase in the group's latest "
                   "rebalance that had it: join (start to JOIN end), sync (JOIN end to Stable), total. A step "
                   "is a new rebalance.", "s",
                   Query(f"max by (group, phase) ({LAST}{{{CG}}})", "{{group}} {{phase}}")),
        timeseries("p95 phase duration (groups in group_histograms)",
                   "95th percentile per phase from the group's own duration histogram. Only groups that "
                   "match the group_histograms setting have one (docs/configuration.md); every other group "
                   "has the cluster-level histograms of the fleet dashboard only.", "s",
                   Query(f"histogram_quantile(0.95, sum by (group, phase, le) "
                         f"(rate({DUR}_bucket{{{CG}}}[$__rate_interval])))", "{{group}} {{phase}}")),
        table("Phases in the time range", "Per phase in the selected range: the slowest rebalance the scrapes "
              "saw (largest last-rebalance duration), and, for groups in group_histograms, the mean and how "
              "many rebalances.", "s",
              Query(f"max by (cluster, group, phase) (max_over_time({LAST}{{{CG}}}[$__range]))"),
              Query(f"sum by (cluster, group, phase) (increase({DUR}_sum{{{CG}}}[$__range]))\n/\n"
                    f"sum by (cluster, group, phase) (increase({DUR}_count{{{CG}}}[$__range]))"),
              Query(f"sum by (cluster, group, phase) (increase({DUR}_count{{{CG}}}[$__range]))"),
              rename={"Value #A": "slowest", "Value #B": "mean", "Value #C": "rebalances"}, sort_by="slowest",
              steps=((None, "green"), (60, "orange"), (300, "red"))),
        heatmap("JOIN phase distribution (groups in group_histograms)", "Rebalances per JOIN-phase duration "
                "bucket and interval, from the group's own histogram (group_histograms setting); the JOIN "
                "phase is the one that grows to the rebalance timeout when a member does not rejoin.",
                f'sum by (le) (increase({DUR}_bucket{{{CG}, phase="join"}}[$__rate_interval]))'),
    ])
    lag = Row("Consumer lag (run only)", [
        timeseries("Lag per topic", "Records the group has not consumed, per topic: end offsets (sampled every "
                   "lag.sample_seconds) minus the committed offsets the monitor decoded. It keeps moving while "
                   "the group rebalances (the rebalances are the annotations); no line while unknown "
                   f"({P}_group_lag_unknown says why). Not in a replay.", "short",
                   Query(f"max by (group, topic) ({P}_group_topic_lag{{{CG}}})", "{{group}} {{topic}}")),
        timeseries("Lag in seconds per topic", "How long ago the committed offset was the end offset, on the "
                   "group's most behind partition of the topic (interpolated between samples); 0 caught up.",
                   "s", Query(f"max by (group, topic) ({P}_group_topic_lag_seconds{{{CG}}})",
                              "{{group}} {{topic}}")),
        timeseries("Members at risk of a poll timeout", "Members of the Stable group with records waiting and "
                   "no commit of them for over lag.at_risk_fraction of their max.poll.interval.ms "
                   "(docs/metrics.md): each is named in the monitor's log; a poll timeout comes next.", "short",
                   Query(f"max by (group) ({P}_group_members_at_risk{{{CG}}})", "{{group}}"),
                   width=24),
    ])
    removals = Row("Member removals", [
        timeseries("Removals by cause", "Members removed per interval, by cause.", "short",
                   Query(f"sum by (group, cause) (increase({MR}[$__rate_interval]))", "{{group}} {{cause}}"),
                   bars=True, stacked=True),
        table("Removals in the time range", "Members removed in the selected range by cause and root cause "
              f"(root_cause: {', '.join(ROOT_CAUSES)}; docs/diagnosis.md). Member ids, hosts and client ids "
              "are in member_removals output, not in metrics.", "short",
              Query(f"sum by (cluster, group, cause, root_cause) (increase({MR}[$__range]))"),
              rename={"Value": "removals"}, sort_by="removals"),
    ])
    return Dashboard(
        uid="rebalance-group", title="Kafka rebalances / group",
        description="One consumer group (or a few): state timeline, generation, members, rebalances with "
                    "their triggers, rebalance timeouts and phase durations, and member removals with their "
                    "causes.",
        variables=[datasource_variable(),
                   query_variable("cluster", "Cluster", f"label_values({P}_group_state, cluster)"),
                   query_variable("group", "Group",
                                  f'label_values({P}_group_state{{cluster=~"$cluster"}}, group)')],
        rows=[state, rebalances, cost, lag, timeouts, phases, removals],
        annotations=[prometheus_annotation(
            "Rebalances", f"sum by (group) (increase({RB}[1m])) > 0", "rebalance of {{group}}", "orange")],
        links=[{"title": "Fleet overview", "type": "link", "icon": "dashboard", "targetBlank": False,
                "url": "/d/rebalance-fleet/kafka-rebalances-fleet-overview", "includeVars": True,
                "keepTime": True, "asDropdown": False, "tags": [], "tooltip": ""}],
    )
