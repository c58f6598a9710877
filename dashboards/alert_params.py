"""The alert rules' parameters and their defaults (dashboards/alert_rules.py): thresholds,
windows and `for` durations, written as `<<name>>` in the rules. The plain rules file gets these
values; the Helm chart reads `.Values.prometheusRule.params.<name>` (helm/rebalance-monitor/values.yaml
holds the same defaults)."""
from __future__ import annotations

# Parameters (camelCase: they are also the keys under prometheusRule.params in values.yaml).
DEFAULTS: dict[str, object] = {
    # which scrape job is the monitor: the chart's PodMonitor/ServiceMonitor set job= the
    # app.kubernetes.io/name label, i.e. "rebalance-monitor"
    "jobSelector": 'job="rebalance-monitor"',
    # where the runbooks are: the repository's docs/runbooks.md on GitHub (RUNBOOKS_URL); a fork or an
    # internal mirror sets its own (Helm: prometheusRule.params.runbookBaseUrl)
    "runbookBaseUrl": "https://github.com/kafka-rebalance-monitor/kafka-rebalance-monitor/blob/main/docs/runbooks.md",
    "stormWindow": "10m",
    "stormRebalances": 10,
    "stormFor": "10m",
    # A group is stuck when it has been in a rebalancing state for longer than
    # max(stuckTimeoutFactor x its rebalance timeout (the largest max.poll.interval.ms of its
    # members), stuckMinSeconds), or stuckSeconds while its rebalance timeout is unknown. Kafka
    # ends a JOIN phase at the rebalance timeout; 2 x leaves room for the SYNC phase and the
    # monitor's own delay. The floor keeps tiny timeouts (seconds) from alerting on the monitor's
    # reporting delay. 600 s is twice Kafka's default rebalance timeout (300 s).
    "stuckTimeoutFactor": 2,
    "stuckMinSeconds": 120,
    "stuckSeconds": 600,
    "stuckFor": "5m",
    # rebalances whose JOIN phase ran into the group's rebalance timeout, counted over this window
    "rebalanceTimeoutWindow": "15m",
    "rebalanceTimeouts": 0,
    # A group whose rebalances stopped more than this many partition-minutes of consumption in the
    # window (docs/impact.md): 60 is 6 partitions stopped for the whole 10 minutes, an eager group of
    # 48 partitions held 75 s, or a 5-minute rebalance timeout on 12. One crash (8 partitions x a 45 s
    # session timeout: 6 partition-minutes) or a rolling restart of a mid-size group (12 rebalances
    # x 3 s x 48 partitions: 29) stays under it.
    "costWindow": "10m",
    "costPartitionMinutes": 60,
    "heartbeatBurstWindow": "5m",
    "heartbeatBurstRemovals": 10,
    "heartbeatBurstGroups": 3,
    "monitorDownFor": "5m",
    "monitorAbsentFor": "15m",
    "sourceDownFor": "5m",
    "laggingSeconds": 600,
    "laggingFor": "15m",
    "errorWindow": "15m",
    "quarantinedRecords": 0,
    "lateRows": 0,
    "invalidTransitions": 0,
    # log times this far (either way) from the __consumer_offsets records of the same actions; the
    # replay warns on stderr at the same 60 s
    "clockSkewSeconds": 60,
    "clockSkewFor": "10m",
    "unknownCoordinatorLines": 0,
    "unknownRecordLayouts": 0,
    "sourceMismatches": 0,
    "offsetGapRecords": 0,
    "restartWindow": "30m",
    "queryRestarts": 2,
    # a full disk under the event sink or the checkpoint: the monitor waits uncommitted, retrying
    # every 15 s; a disk freed within this long (by its own retention, a log rotation) pages nobody
    "diskFullFor": "5m",
    # no micro-batch for this long: with the defaults a quiet cluster still runs one every
    # kafka.idle_tick_seconds (5 s)
    "stallWindow": "10m",
    "stallFor": "5m",
    "overCapFor": "1h",
    # Incidents (state/incidents.py): a broker's page waits for the groups its death stalls (read
    # when the alert fires; one page per incident), a host's for its members' removals.
    "brokerDownFor": "20s",
    "hostDownFor": "10s",
    "slowProcessingFor": "0s",
    "crashLoopFor": "0s",
    # per-group removal tickets: involuntary removals (decided records) over this window
    "removalsWindow": "10m",
    # Consumer lag (`run`): a member at risk of a poll timeout for this long (it is flagged at half
    # its max.poll.interval.ms: 150 s before the removal at Kafka's default 300 s)
    "atRiskFor": "30s",
    # a group that rebalanced within the window and whose time lag stays above the threshold
    "lagAfterRebalanceSeconds": 300,
    "lagRebalanceWindow": "30m",
    "lagAfterRebalanceFor": "10m",
}
