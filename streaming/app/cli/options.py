"""The command-line flags, each defined once, grouped into parent parsers the commands share.

A flag that sets a setting names its key (`dest`, dotted for nested tables: `kafka.log_topics`);
`flags_of` turns the flags given into the nested dict the settings loader merges over the
environment and the TOML file (streaming/app/settings/loading.py).
"""
from __future__ import annotations

import argparse
from typing import Any

from streaming.app.settings import DemoSettings, LagSettings, QuerySettings, ReplaySettings, RunSettings
from streaming.logs.envelope import ENVELOPES

# Every dest that is a settings key (the loader gets exactly these).
SETTING_KEYS: set[str] = set()


def _setting(group: Any, *flags: str, key: str, **kwargs: Any) -> None:
    SETTING_KEYS.add(key)
    group.add_argument(*flags, dest=key, **kwargs)


def parent(build: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    build(parser)
    return parser


def _config(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", metavar="FILE",
                   help="TOML settings file (docs/configuration.md); flags > environment > file > defaults")


def _log_reading(p: argparse.ArgumentParser) -> None:
    _setting(p, "--broker-timezone", key="broker_timezone", metavar="TZ",
             help="IANA zone of the brokers' log timestamps, which carry no offset (default UTC)")
    _setting(p, "--log-envelope", key="log_envelope", choices=ENVELOPES,
             help="plain log4j lines, JSON documents of a log shipper (Filebeat, Fluent Bit, Vector), or "
                  "auto: JSON when a line starts with '{' (default auto)")
    _setting(p, "--broker-id-field", key="broker_id_field", metavar="PATH",
             help="JSON envelope field with the broker id, e.g. fields.broker_id or kubernetes.pod_name "
                  "(trailing digits are used)")


def _broker_id(p: argparse.ArgumentParser) -> None:
    p.add_argument("--broker-id", type=int, nargs="+", metavar="N",
                   help="broker id when neither the line nor its envelope names it: one for all files, or "
                        "one per log file")


class _KeyValues(argparse.Action):
    """KEY=VALUE, repeatable, into a dict (like spark-submit's --conf)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, value: Any,
                 option_string: str | None = None) -> None:
        key, sep, val = str(value).partition("=")
        if not sep or not key:
            parser.error(f"{option_string}: expected KEY=VALUE, got {value!r}")
        table = dict(getattr(namespace, self.dest, None) or {})
        table[key] = val
        setattr(namespace, self.dest, table)


def _default(settings: Any, key: str) -> str:
    """A setting's default as help text shows it (from the settings class: one source)."""
    value = settings.model_fields[key].default
    return str(value) if isinstance(value, int) else f"{value:g}"   # 2000000, not 2e+06


def _query(p: argparse.ArgumentParser) -> None:
    _setting(p, "--cluster", key="cluster", metavar="NAME",
             help="cluster label for metrics and records (default: default)")
    _setting(p, "--lateness-seconds", key="lateness_seconds", type=float, metavar="S",
             help="watermark delay per source: how long an event waits for earlier events of its source "
                  f"(default {_default(QuerySettings, 'lateness_seconds')}; "
                  f"run: {_default(RunSettings, 'lateness_seconds')})")
    _setting(p, "--spark-conf", key="spark_conf", action=_KeyValues, metavar="KEY=VALUE",
             help="a Spark setting for the session the monitor creates (spark_conf; repeatable), e.g. "
                  "spark.jars.packages=org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0")


def _rows_per_batch(p: argparse.ArgumentParser) -> None:
    _setting(p, "--max-rows-per-batch", key="max_rows_per_batch", type=int, metavar="N",
             help="event rows per micro-batch, a time slice of the input (default: replay "
                  f"{_default(ReplaySettings, 'max_rows_per_batch')}, "
                  f"demo {_default(DemoSettings, 'max_rows_per_batch')})")


def _end_offsets(p: argparse.ArgumentParser) -> None:
    _setting(p, "--end-offsets", key="end_offsets", metavar="FILE",
             help="the partitions' end offsets over time, for lag and records_delayed: JSON lines "
                  "{time_ms, topic, partition, offset} or a Prometheus query_range answer of "
                  "kafka_topic_partition_current_offset or kminion's high water mark (docs/output.md)")


def _serving(p: argparse.ArgumentParser) -> None:
    _setting(p, "--port", key="metrics_port", type=int, metavar="N",
             help="port of /metrics (default 9108; 0 picks a free one)")
    _setting(p, "--host", key="metrics_host", metavar="ADDR", help="bind address of /metrics (default 127.0.0.1)")


def _live(p: argparse.ArgumentParser) -> None:
    _setting(p, "--bootstrap-servers", key="kafka.bootstrap_servers", metavar="HOST:PORT",
             help="the Kafka cluster to read (kafka.bootstrap_servers)")
    _setting(p, "--log-topic", key="kafka.log_topics", action="append", metavar="TOPIC",
             help="topic carrying broker log lines (kafka.log_topics; repeatable)")
    _setting(p, "--offsets-topic", key="kafka.offsets_topic", metavar="TOPIC",
             help="the offsets topic (kafka.offsets_topic, default __consumer_offsets)")
    _setting(p, "--kafka-source", key="kafka.source", choices=["auto", "python", "spark"],
             help="Spark's kafka connector, the kafka-python Data Source, or auto (kafka.source)")
    _setting(p, "--checkpoint", key="checkpoint_location", metavar="DIR",
             help="checkpoint directory; a restart resumes from it (checkpoint_location)")
    _setting(p, "--events-dir", key="events_dir", metavar="DIR",
             help="durable event sink, one file per micro-batch and kind (events_dir)")
    _setting(p, "--trigger-interval-seconds", key="trigger_interval_seconds", type=float, metavar="S",
             help=f"micro-batch interval (default {_default(RunSettings, 'trigger_interval_seconds')})")
    _setting(p, "--lag-sample-seconds", key="lag.sample_seconds", type=float, metavar="S",
             help=f"how often the end offsets are sampled for consumer lag (lag.sample_seconds, default "
                  f"{LagSettings.model_fields['sample_seconds'].default:g})")
    _setting(p, "--lag-at-risk-fraction", key="lag.at_risk_fraction", type=float, metavar="F",
             help=f"a member with records waiting and no commit for this fraction of its rebalance timeout is "
                  f"at risk of a poll timeout (lag.at_risk_fraction, default "
                  f"{LagSettings.model_fields['at_risk_fraction'].default:g})")
    _setting(p, "--lag-partition-groups", key="lag.partition_groups", metavar="REGEX",
             help="groups whose lag is also shown per partition (lag.partition_groups, a regular expression "
                  "matching the whole group name; default: none)")


CONFIG = parent(_config)
LOG_READING = parent(_log_reading)
BROKER_ID = parent(_broker_id)
QUERY = parent(_query)
ROWS_PER_BATCH = parent(_rows_per_batch)
END_OFFSETS = parent(_end_offsets)
SERVING = parent(_serving)
LIVE = parent(_live)


def flags_of(args: argparse.Namespace) -> dict[str, Any]:
    """The settings the flags give, as a nested dict (flags not given are left out)."""
    out: dict[str, Any] = {}
    for key, value in vars(args).items():
        if key not in SETTING_KEYS or value is None:
            continue
        *tables, name = key.split(".")
        target = out
        for table in tables:
            target = target.setdefault(table, {})
        target[name] = value
    return out


def broker_ids(ids: list[int] | None, paths: list[str]) -> list[int | None]:
    """--broker-id: one id for every log file, or one per log file in order."""
    from streaming.app.settings import ConfigError
    if not ids:
        return [None] * len(paths)
    if len(ids) == 1:
        return [ids[0]] * len(paths)
    if len(ids) != len(paths):
        raise ConfigError(f"--broker-id: give one id for all log files or one per log file "
                          f"({len(ids)} ids for {len(paths)} files)")
    return [*ids]
