"""The steps of the query between its sources and its output, as Spark operators: the JVM-side
coordinator filter and envelope step, the log parse (mapInPandas), the offsets decode
(mapInArrow), per-source figures, watermarks, and the per-group stateful step."""
from __future__ import annotations

from collections.abc import Sequence
from functools import partial, reduce
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.events import END_OF_INPUT
from state.outputs import OutputKind
from streaming.logs.envelope import ENVELOPE_JSON, ENVELOPE_PLAIN, HOST_FIELDS, MESSAGE_FIELDS, spark_json_path
from streaming.logs.layout import COORDINATOR_LOGGER_MARKERS
from streaming.logs.step import DEFAULT_UNKNOWN_SAMPLE, LogSourceSpec, log_rows_to_events
from streaming.offsets.vectorised import offsets_arrow_to_events
from streaming.spark.schema import EVENT_SCHEMA, OUTPUT_SCHEMA, STATE_SCHEMA
from streaming.spark.stateful import process_group

QUARANTINE = str(OutputKind.QUARANTINE)


def coordinator_line_filter(line_col: str = "line"):
    """JVM-side filter: only lines that can be group-coordinator lines reach Python."""
    col = F.col(line_col)
    return reduce(lambda a, b: a | b, [col.contains(marker) for marker in COORDINATOR_LOGGER_MARKERS])


def _json_field(raw, path: str):
    return F.get_json_object(raw, spark_json_path(path))


def _broker_id(raw, field: str):
    """The broker id in an envelope field: its trailing digits ("broker-2" -> 2), null if none."""
    value = _json_field(raw, field)
    digits = F.regexp_extract(value, r"(\d+)\s*$", 1)
    return F.when(~value.startswith("-") & (digits != ""), digits.cast("int"))


def unwrap_columns(raw_col: str, specs: dict[str, LogSourceSpec],
                   default_spec: LogSourceSpec | None = None) -> list:
    """The envelope step in the JVM (same rules as streaming/logs/envelope.py `unwrap`).

    Returns the columns `line` (the log4j line: the row itself, or the first line of the JSON
    envelope's message/log/msg field; null when a JSON row has none), `broker_hint` (int, from
    the source's `broker_id_field`) and `host_hint` (string).
    """
    raw = F.col(raw_col)
    source = F.col("source_id")
    json_ids = [sid for sid, spec in specs.items() if spec.envelope == ENVELOPE_JSON]
    plain_ids = [sid for sid, spec in specs.items() if spec.envelope == ENVELOPE_PLAIN]
    # Rows of sources not in `specs` (partitions of a live log topic) follow `default_spec`.
    fallback_json = F.ltrim(raw).startswith("{")
    if default_spec is not None and default_spec.envelope in (ENVELOPE_JSON, ENVELOPE_PLAIN):
        fallback_json = F.lit(default_spec.envelope == ENVELOPE_JSON)
    is_json = (F.when(source.isin(json_ids), F.lit(True)).when(source.isin(plain_ids), F.lit(False))
               .otherwise(fallback_json))
    message = F.coalesce(*[_json_field(raw, name) for name in MESSAGE_FIELDS])
    first = F.regexp_replace(F.substring_index(message, "\n", 1), "\r$", "")
    line = F.when(is_json, first).otherwise(raw)
    hosts = []
    for name in HOST_FIELDS:
        value = _json_field(raw, name)
        hosts.append(F.when(~value.rlike(r"^\s*[\[{]") & (value != ""), value))
    host = F.when(is_json, F.coalesce(*hosts))
    broker = F.lit(None).cast("int")
    if default_spec is not None and default_spec.broker_id_field:
        broker = F.when(is_json & ~source.isin(list(specs)), _broker_id(raw, default_spec.broker_id_field))
    for sid, spec in specs.items():
        if spec.broker_id_field:
            broker = F.when(is_json & (source == sid), _broker_id(raw, spec.broker_id_field)).otherwise(broker)
    return [line.alias("line"), broker.alias("broker_hint"), host.alias("host_hint")]


def log_events(raw: DataFrame, specs: dict[str, LogSourceSpec], unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE,
               default_spec: LogSourceSpec | None = None) -> DataFrame:
    """Raw log rows (RAW_LOG_SCHEMA) -> EVENT_SCHEMA rows.

    The marker test runs twice in the JVM: on the raw row (a JSON envelope contains the logger name
    of its line verbatim, so this drops every unrelated row before any JSON is read) and on the
    unwrapped line (exact). Rows whose JSON envelope cannot be read are kept (line null) and
    quarantined by the parse step.
    """
    prefiltered = raw.where(F.col("eof") | coordinator_line_filter("line"))
    unwrapped = prefiltered.select(
        "source_id", "seq", F.col("line").alias("raw"), "ts_hint_ms", "eof",
        *unwrap_columns("line", specs, default_spec))
    kept = unwrapped.where(F.col("eof") | F.col("line").isNull() | coordinator_line_filter("line"))
    return kept.mapInPandas(partial(log_rows_to_events, specs=specs, unknown_sample=unknown_sample,
                                    default_spec=default_spec),
                            EVENT_SCHEMA)


def offsets_events(raw: DataFrame, clusters: dict[str, str]) -> DataFrame:
    """Decode in Arrow batches: commits vectorised and pre-aggregated, the rest per record
    (streaming/offsets/vectorised/). Live topics pass a ClusterNames with the cluster as fallback."""
    return raw.mapInArrow(partial(offsets_arrow_to_events, clusters=clusters), EVENT_SCHEMA)


def observed(events: DataFrame, source_kind: str) -> DataFrame:
    """Per-source figures Spark reports in each batch's progress (observedMetrics)."""
    real = F.col("kind") != F.lit(END_OF_INPUT)
    return events.observe(
        f"source_{source_kind}",
        F.max(F.when(real & (F.col("kind") != F.lit(QUARANTINE)), F.col("ts_ms"))).alias("newest_event_ms"),
        F.min(F.when(real & (F.col("kind") != F.lit(QUARANTINE)), F.col("ts_ms"))).alias("oldest_event_ms"),
        F.sum(F.when(real & (F.col("kind") != F.lit(QUARANTINE)), 1).otherwise(0)).alias("events"),
        F.sum(F.when(F.col("kind") == F.lit(QUARANTINE), 1).otherwise(0)).alias("quarantined"),
    )


def with_watermark(events: DataFrame, lateness_seconds: float) -> DataFrame:
    return (events.withColumn("event_time", F.timestamp_millis("ts_ms"))
            .withWatermark("event_time", f"{int(lateness_seconds * 1000)} milliseconds"))


def group_state_machine(events: DataFrame, group_allow: Sequence[str] = (), group_deny: Sequence[str] = (),
                        diagnosis: DiagnosisSettings | None = None) -> DataFrame:
    # No filter before the stateful step: Spark's optimizer pushes a filter on `group` below the
    # watermark operator, and the rows it removes (end-of-input markers, denied groups) would
    # no longer move their source's event time. process_group skips them instead.
    function: Any = process_group
    if group_allow or group_deny or diagnosis is not None:
        function = partial(process_group, group_allow=tuple(group_allow or ()), group_deny=tuple(group_deny or ()),
                           diagnosis=diagnosis or DEFAULT_SETTINGS)
    return (events.groupBy("cluster", "group")
            .applyInPandasWithState(function, OUTPUT_SCHEMA, STATE_SCHEMA, "append",
                                    GroupStateTimeout.EventTimeTimeout))
