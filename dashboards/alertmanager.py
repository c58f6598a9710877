"""The Alertmanager configuration: routing, grouping and inhibition for the alerts of
dashboards/alert_rules.py. One source for alerts/alertmanager.yml (plain Alertmanager) and the
chart's AlertmanagerConfig (helm/rebalance-monitor/templates/alertmanagerconfig.yaml, for
prometheus-operator); `python -m dashboards.generate` writes both, the pager check
(testbed/judge/pager_check.py) runs the plain one with its own receiver's address.

- Severities: `page` goes to the pager (10 s group wait: the incident alerts wait their own `for:`
  already), `ticket` to the ticket queue, the Watchdog to a dead man's switch every minute.
- Grouping: per cluster, alert and incident (and group): one incident is one notification, however
  many groups it touched; a new incident (a second death of the same broker) is a new page.
- Inhibition: an incident that pages silences the tickets it explains: a broker or host incident the
  per-group removal tickets carrying its `incident` label (and the cluster's heartbeat-expiry burst);
  a group's slow-processing or crash-loop page that group's tickets and its stuck-rebalance page; a
  monitor that is down its own stalled, source-down and lagging alerts; a full disk the same
  monitor's stalled, lagging and query-restart alerts.
"""
from __future__ import annotations

from typing import Any

# The receivers' webhook addresses in the shipped file: placeholders to replace (the chart:
# alertmanagerConfig.receivers.*.url).
PLACEHOLDER_URLS = {"pager": "http://pager.invalid/rebalance-monitor/page",
                    "tickets": "http://tickets.invalid/rebalance-monitor/ticket",
                    "deadman": "http://deadman.invalid/rebalance-monitor/ping"}
GROUP_BY = ["cluster", "alertname", "incident", "group"]
PAGE_GROUP_WAIT = "10s"
PAGE_GROUP_INTERVAL = "5m"
PAGE_REPEAT_INTERVAL = "4h"

_BROKER_OR_HOST = "KafkaBrokerDown|KafkaConsumerHostDown"
_GROUP_PAGES = "KafkaConsumerGroupSlowProcessing|KafkaConsumerCrashLoop"
_GROUP_TICKETS = ("KafkaConsumerGroupRebalanceStuck|KafkaConsumerGroupRebalanceTimeout|KafkaConsumerGroupMembersRemoved"
                  "|KafkaConsumerGroupRebalanceStorm|KafkaConsumerGroupRebalanceCost")

# (source matcher, target matcher, equal labels): Alertmanager's matcher syntax.
INHIBIT_RULES = [
    (f'alertname=~"{_BROKER_OR_HOST}"', 'severity="ticket"', ["cluster", "incident"]),
    (f'alertname=~"{_BROKER_OR_HOST}"', 'alertname="KafkaConsumerHeartbeatExpiryBurst"', ["cluster"]),
    (f'alertname=~"{_GROUP_PAGES}"', f'alertname=~"{_GROUP_TICKETS}"', ["cluster", "group"]),
    ('alertname=~"RebalanceMonitorDown|RebalanceMonitorAbsent"',
     'alertname=~"RebalanceMonitorStalled|RebalanceMonitorSourceDown|RebalanceMonitorLagging"', ["job", "instance"]),
    # a full disk holds the batches (the query stalls, falls behind, and restarts while Spark's
    # checkpoint writes fail): one page for the cause
    ('alertname="RebalanceMonitorDiskFull"',
     'alertname=~"RebalanceMonitorStalled|RebalanceMonitorLagging|RebalanceMonitorQueryRestarting"', ["job", "instance"]),
]


def config(urls: dict[str, str] | None = None) -> dict[str, Any]:
    """alertmanager.yml as a document; `urls`: the receivers' webhook addresses."""
    urls = {**PLACEHOLDER_URLS, **(urls or {})}
    return {
        "route": {
            "receiver": "tickets",
            "group_by": GROUP_BY,
            "group_wait": "1m", "group_interval": "10m", "repeat_interval": "24h",
            "routes": [
                {"receiver": "deadman", "matchers": ['alertname="Watchdog"'],
                 "group_wait": "0s", "group_interval": "1m", "repeat_interval": "1m"},
                {"receiver": "pager", "matchers": ['severity="page"'],
                 "group_wait": PAGE_GROUP_WAIT, "group_interval": PAGE_GROUP_INTERVAL,
                 "repeat_interval": PAGE_REPEAT_INTERVAL},
            ],
        },
        "receivers": [{"name": name, "webhook_configs": [{"url": urls[name], "send_resolved": name != "deadman"}]}
                      for name in ("pager", "tickets", "deadman")],
        "inhibit_rules": [{"source_matchers": [src], "target_matchers": [dst], "equal": equal}
                          for src, dst, equal in INHIBIT_RULES],
    }


def _operator_matcher(text: str) -> dict[str, str]:
    """`name=~"value"` as prometheus-operator's matcher object."""
    for op in ("=~", "!~", "!=", "="):
        if op in text:
            name, value = text.split(op, 1)
            return {"name": name, "value": value.strip('"'), "matchType": op}
    raise ValueError(f"not a matcher: {text}")


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(p.title() for p in rest)


def operator_spec(urls: dict[str, str]) -> dict[str, Any]:
    """The same configuration as an AlertmanagerConfig's spec (monitoring.coreos.com/v1alpha1)."""
    plain = config(urls)

    def route(r: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in r.items():
            if key == "matchers":
                out["matchers"] = [_operator_matcher(m) for m in value]
            elif key == "routes":
                out["routes"] = [route(x) for x in value]
            else:
                out[_camel(key)] = value
        return out
    return {
        "route": route(plain["route"]),
        "receivers": [{"name": r["name"], "webhookConfigs": [{"url": w["url"], "sendResolved": w["send_resolved"]}
                                                              for w in r["webhook_configs"]]}
                      for r in plain["receivers"]],
        "inhibitRules": [{"sourceMatch": [_operator_matcher(m) for m in r["source_matchers"]],
                          "targetMatch": [_operator_matcher(m) for m in r["target_matchers"]],
                          "equal": r["equal"]} for r in plain["inhibit_rules"]],
    }


def plain_from_operator(spec: dict[str, Any]) -> dict[str, Any]:
    """An AlertmanagerConfig spec back in alertmanager.yml form (the chart's test checks it with
    amtool and compares it with the plain file)."""
    def matcher(m: dict[str, str]) -> str:
        return f'{m["name"]}{m.get("matchType", "=")}"{m["value"]}"'

    def route(r: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, value in r.items():
            snake = "".join("_" + c.lower() if c.isupper() else c for c in key)
            if key == "matchers":
                out["matchers"] = [matcher(m) for m in value]
            elif key == "routes":
                out["routes"] = [route(x) for x in value]
            else:
                out[snake] = value
        return out
    return {
        "route": route(spec["route"]),
        "receivers": [{"name": r["name"], "webhook_configs": [{"url": w["url"], "send_resolved": w["sendResolved"]}
                                                               for w in r["webhookConfigs"]]}
                      for r in spec["receivers"]],
        "inhibit_rules": [{"source_matchers": [matcher(m) for m in r["sourceMatch"]],
                           "target_matchers": [matcher(m) for m in r["targetMatch"]],
                           "equal": r["equal"]} for r in spec["inhibitRules"]],
    }
