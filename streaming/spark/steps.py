"""The steps of the query between its sources and its output, as Spark operators: the JVM-side
coordinator filter and envelope step, the log parse (mapInArrow), the offsets decode
(mapInArrow), per-source figures, watermarks, and the per-group stateful step."""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial, reduce
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming.state import GroupStateTimeout

from state.diagnosis.rules import DEFAULT_SETTINGS, DiagnosisSettings
from state.events import END_OF_INPUT
from state.outputs import STATISTICS_KINDS, OutputKind
from streaming.logs.envelope import (
    ENVELOPE_JSON, ENVELOPE_PLAIN, EPOCH_MILLIS_RANGE, EPOCH_NUMBER, EPOCH_SECONDS_RANGE, GENERIC_JSON,
    GENERIC_LEVELS, GENERIC_LOGGERS, GENERIC_TIMES, HOST_FIELDS, JSON_LAYOUTS, LEVEL_WORDS, MESSAGE_FIELDS,
    spark_json_path
)
from streaming.logs.header import PREFIXED_JSON
from streaming.logs.layout import KEPT_LINE_MARKERS
from streaming.logs.step import DEFAULT_UNKNOWN_SAMPLE, LogSourceSpec, log_rows_to_events
from streaming.offsets.vectorised import offsets_arrow_to_events
from streaming.rows import (
    COMPLETE_THROUGH, LEGACY_PACKED_DATA, OBSERVED_NEWEST, OBSERVED_OLDEST, OBSERVED_SOURCE_PREFIX,
    OBSERVED_STATISTICS, PACKED_DATA, PACKED_EVENT, PLAIN_PACKED_FIELDS, STATE_INPUT_KEYS, state_bucket_column,
)
from streaming.spark.schema import EVENT_SCHEMA, OUTPUT_SCHEMA, STATE_SCHEMA, STATE_SCHEMA_BUCKETED
from streaming.spark.stateful import process_bucket, process_group
from streaming.spark.worker_gc import freeze_worker_heap

QUARANTINE = str(OutputKind.QUARANTINE)
# Live log topics: one record in this many (by offset) reaches the parse step whatever it holds, so
# every source's layout is reported and a source without coordinator lines is seen (sinks/log_sources.py).
LAYOUT_SAMPLE_EVERY = 1000


def coordinator_line_filter(line_col: str = "line"):
    """JVM-side filter: only lines that can be group-coordinator lines reach Python: they name a
    coordinator logger (full or short name, any layout) or carry a coordinator message prefix; and
    the few broker lines the monitor reads for broker deaths (streaming/logs/brokers.py)."""
    col = F.col(line_col)
    return reduce(lambda a, b: a | b, [col.contains(marker) for marker in KEPT_LINE_MARKERS])


def _json_name(raw, names: tuple[str, ...]):
    """A string field of a JSON layout (flat dotted key first, then the nested path) that starts like
    a name: streaming/logs/envelope.py `_name_field`."""
    values = []
    for name in names:
        values.append(_json_field(raw, f"['{name}']" if "." in name else name))
        if "." in name:
            values.append(_json_field(raw, name))
    value = F.coalesce(*values)
    return F.when(value.rlike(r"^[A-Za-z_$]"), value)


def _json_time(raw, names: tuple[str, ...]):
    """The time of a JSON layout: ISO text as written, or epoch milliseconds as digits."""
    values = []
    for name in names:
        if name == "instant":
            seconds = _json_field(raw, "instant.epochSecond")
            nanos = F.coalesce(_json_field(raw, "instant.nanoOfSecond"), F.lit("0"))
            ok = seconds.rlike(r"^[0-9]{1,15}$") & nanos.rlike(r"^[0-9]{1,15}$")     # envelope.INSTANT_PART_LIMIT
            millis = seconds.cast("long") * 1000 + F.floor(nanos.cast("long") / 1_000_000).cast("long")
            values.append(F.when(ok, millis.cast("string")))
        elif name == "timeMillis":
            value = _json_field(raw, name)
            values.append(F.when(value.rlike(r"^[0-9]+$"), value))
        else:
            value = _json_field(raw, name)
            values.append(F.when(value.rlike(r"^[0-9]{4}-"), value))
    return F.coalesce(*values)


def _json_values(raw, name: str) -> Column:
    """envelope.py `_field`: the flat key (`"log.level": ...`) first, then the dotted path."""
    if "." not in name:
        return _json_field(raw, name)
    return F.coalesce(_json_field(raw, f"['{name}']"), _json_field(raw, name))


def _epoch_millis(value) -> Column:
    """envelope.py `epoch_millis`: epoch seconds or milliseconds -> epoch milliseconds as digits
    (the same double arithmetic). get_json_object gives a number back as its JSON text."""
    number = F.when(value.rlike(f"^{EPOCH_NUMBER}$"), value.cast("double"))
    seconds = (number >= EPOCH_SECONDS_RANGE[0]) & (number < EPOCH_SECONDS_RANGE[1])
    millis = (number >= EPOCH_MILLIS_RANGE[0]) & (number < EPOCH_MILLIS_RANGE[1])
    return (F.when(seconds, F.floor(number * 1000 + 0.001)).when(millis, F.floor(number + 0.001))
            .cast("string"))


def generic_json_time(doc) -> Column:
    """envelope.py `generic_json_fields` in the JVM, its time: null when no time field reads, or when
    `doc` is no JSON document. The level and logger: generic_json_level, generic_json_logger."""
    times = []
    for name in GENERIC_TIMES:
        value = _json_field(doc, name)
        readings = [F.when(value.rlike(r"^[0-9]{4}-"), value), _epoch_millis(value)]
        if name == "instant":
            readings.append(_json_time(doc, ("instant",)))
        times.append(F.coalesce(*readings))
    return F.when(F.ltrim(doc).startswith("{"), F.coalesce(*times))


def generic_json_level(doc) -> Column:
    levels = []
    for name in GENERIC_LEVELS:
        word = F.upper(_json_values(doc, name))
        levels.append(F.when(word == "WARNING", F.lit("WARN")).when(word.isin(*LEVEL_WORDS), word))
    return F.coalesce(*levels)


def generic_json_logger(doc) -> Column:
    loggers = []
    for name in GENERIC_LOGGERS:
        value = _json_values(doc, name)
        loggers.append(F.when(value.rlike(r"^[A-Za-z_$]"), value))
    return F.coalesce(*loggers)


def json_layout_columns(doc) -> tuple:
    """streaming/logs/envelope.py `json_layout_fields` in the JVM: (layout, time, level, logger) of a
    JSON layout document, all null for other documents.

    Only a text that starts with `{` is read as JSON: the test comes first in every condition, so the
    JSON fields are not evaluated for plain lines (And evaluates its right side only when the left
    is true), which would otherwise cost tens of JSON parse attempts per row."""
    layout = ts = level = logger = F.lit(None).cast("string")
    looks_json = F.ltrim(doc).startswith("{")
    for name, levels, loggers, times in reversed(JSON_LAYOUTS):     # the first one listed wins
        lv, lg = _json_name(doc, levels), _json_name(doc, loggers)
        hit = looks_json & lv.isNotNull() & lg.isNotNull()
        layout = F.when(hit, F.lit(name)).otherwise(layout)
        ts = F.when(hit, _json_time(doc, times)).otherwise(ts)
        level = F.when(hit, F.upper(lv)).otherwise(level)
        logger = F.when(hit, lg).otherwise(logger)
    return layout, ts, level, logger


def _json_field(raw, path: str):
    return F.get_json_object(raw, spark_json_path(path))


def _broker_id(raw, field: str):
    """The broker id in an envelope field: its trailing digits ("broker-2" -> 2), null if none."""
    value = _json_field(raw, field)
    digits = F.regexp_extract(value, r"(\d+)\s*$", 1)
    return F.when(~value.startswith("-") & (digits != ""), digits.cast("int"))


def _message(doc):
    return F.coalesce(*[_json_field(doc, name) for name in MESSAGE_FIELDS])


def _first_line(text):
    return F.regexp_replace(F.substring_index(text, "\n", 1), "\r$", "")


_STAGE = "__unwrap_"     # prefix of the intermediate columns of unwrap_frame


def _layout_field_stages(df: DataFrame, doc: Column, first: Column, is_json: Column) -> DataFrame:
    """unwrap_frame's stages of the JSON layout fields: the document's own (`layout`, ...); a JSON
    layout document inside its message (`n_layout`, ...), else a generic JSON one (`ng_ts`, ...), and
    `nested` when there is one; the document itself as generic JSON (`g_layout`, ...) when it is no
    JSON layout, holds none and has a message (envelope.py). Each generic time in a stage of its own,
    so that its expression is not repeated in every column that depends on it."""
    def c(name: str):
        return F.col(_STAGE + name)
    own = dict(zip(("layout", "ts", "level", "logger"), json_layout_columns(doc)))
    df = df.withColumns({_STAGE + k: F.when(is_json, v) for k, v in own.items()})
    inner = dict(zip(("n_layout", "n_ts", "n_level", "n_logger"), json_layout_columns(first)))
    df = df.withColumns({**{_STAGE + k: F.when(is_json & c("layout").isNull(), v) for k, v in inner.items()},
                         _STAGE + "n_message": F.when(is_json & first.startswith("{"), _message(first))})
    df = df.withColumn(_STAGE + "ng_ts", F.when(c("n_message").isNotNull() & c("layout").isNull()
                                                & c("n_layout").isNull(), generic_json_time(first)))
    df = df.withColumns({
        _STAGE + "nested": c("n_message").isNotNull() & (c("n_layout").isNotNull() | c("ng_ts").isNotNull()),
        _STAGE + "ng_level": F.when(c("ng_ts").isNotNull(), generic_json_level(first)),
        _STAGE + "ng_logger": F.when(c("ng_ts").isNotNull(), generic_json_logger(first))})
    df = df.withColumn(_STAGE + "g_ts", F.when(is_json & c("layout").isNull() & ~c("nested")
                                               & c("message").isNotNull(), generic_json_time(doc)))
    return df.withColumns({
        _STAGE + "g_layout": F.when(c("g_ts").isNotNull(), F.lit(GENERIC_JSON)),
        _STAGE + "g_level": F.when(c("g_ts").isNotNull(), generic_json_level(doc)),
        _STAGE + "g_logger": F.when(c("g_ts").isNotNull(), generic_json_logger(doc))})


def unwrap_frame(df: DataFrame, raw_col: str, specs: dict[str, LogSourceSpec],
                 default_spec: LogSourceSpec | None = None) -> DataFrame:
    """The envelope step in the JVM (same rules as streaming/logs/envelope.py `unwrap`): `df` plus
    the columns `line` (the log4j line: the row itself, or the first line of the JSON envelope's
    message/log/msg field; null when a JSON row has none), `broker_hint` (int, from the source's
    `broker_id_field`), `host_hint` (string), and the JSON layout fields `layout_field`, `ts_field`,
    `level_field`, `logger_field` (json_layout_columns; of the document itself, or of a JSON layout
    document inside its message, then named `envelope+<layout>`).

    Built in stages (one projection each, intermediate columns dropped at the end): written as one
    expression, every use of the document, the message and the layout fields repeats their whole
    expression tree, and the plan grows so large that planning it cost more CPU than reading the
    rows (bench/logs, docs/benchmarks.md).
    """
    def c(name: str):
        return F.col(_STAGE + name)
    raw = F.col(raw_col)
    source = F.col("source_id")
    json_ids = [sid for sid, spec in specs.items() if spec.envelope == ENVELOPE_JSON]
    plain_ids = [sid for sid, spec in specs.items() if spec.envelope == ENVELOPE_PLAIN]
    # Rows of sources not in `specs` (partitions of a live log topic) follow `default_spec`.
    fallback_json = F.ltrim(raw).startswith("{")
    fallback_auto = F.lit(True)
    if default_spec is not None and default_spec.envelope in (ENVELOPE_JSON, ENVELOPE_PLAIN):
        fallback_json = F.lit(default_spec.envelope == ENVELOPE_JSON)
        fallback_auto = F.lit(False)
    auto = F.when(source.isin(json_ids + plain_ids), F.lit(False)).otherwise(fallback_auto)
    top_json = (F.when(source.isin(json_ids), F.lit(True)).when(source.isin(plain_ids), F.lit(False))
                .otherwise(fallback_json))
    # A JSON document behind container/transport prefixes (auto mode only; unreadable: a plain row).
    prefixed = F.when(auto & ~top_json, F.regexp_extract(raw, PREFIXED_JSON, 1)).otherwise(F.lit(""))
    df = df.withColumns({_STAGE + "top_json": top_json, _STAGE + "prefixed": prefixed})
    df = df.withColumn(_STAGE + "doc", F.when(c("prefixed") != "", c("prefixed")).otherwise(raw))
    doc = c("doc")
    df = df.withColumn(_STAGE + "message", F.when(c("top_json") | (c("prefixed") != ""), _message(doc)))
    df = df.withColumns({
        _STAGE + "is_json": c("top_json") | ((c("prefixed") != "") & c("message").isNotNull()),
        _STAGE + "first": _first_line(c("message"))})
    is_json, first = c("is_json"), c("first")
    df = _layout_field_stages(df, doc, first, is_json)
    nested = c("nested")
    line = F.when(nested, _first_line(c("n_message"))).when(is_json, first).otherwise(raw)
    hosts = []
    for name in HOST_FIELDS:
        value = _json_field(doc, name)
        hosts.append(F.when(~value.rlike(r"^\s*[\[{]") & (value != ""), value))
    host = F.when(is_json, F.coalesce(*hosts))
    broker = F.lit(None).cast("int")
    if default_spec is not None and default_spec.broker_id_field:
        broker = F.when(is_json & ~source.isin(list(specs)), _broker_id(doc, default_spec.broker_id_field))
    for sid, spec in specs.items():
        if spec.broker_id_field:
            broker = F.when(is_json & (source == sid), _broker_id(doc, spec.broker_id_field)).otherwise(broker)

    def pick(name: str, inner_col):
        """A JSON layout's field, else the one of a document inside the message, else the generic's."""
        return (F.when(is_json & c("layout").isNotNull(), c(name)).when(nested, inner_col)
                .when(is_json, c("g_" + name)))

    def inside(name: str):
        return F.when(c("n_layout").isNotNull(), c("n_" + name)).otherwise(c("ng_" + name))
    inner_layout = F.concat(F.lit("envelope+"), F.coalesce(c("n_layout"), F.lit(GENERIC_JSON)))
    df = df.withColumns({
        "line": line, "broker_hint": broker, "host_hint": host,
        "layout_field": pick("layout", inner_layout), "ts_field": pick("ts", inside("ts")),
        "level_field": pick("level", inside("level")), "logger_field": pick("logger", inside("logger"))})
    return df.drop(*[name for name in df.columns if name.startswith(_STAGE)])


def log_events(raw: DataFrame, specs: dict[str, LogSourceSpec], unknown_sample: int = DEFAULT_UNKNOWN_SAMPLE,
               default_spec: LogSourceSpec | None = None) -> DataFrame:
    """Raw log rows (RAW_LOG_SCHEMA) -> EVENT_SCHEMA rows.

    Live topics: the marker test runs twice in the JVM: on the raw row (a JSON envelope contains the
    logger name of its line verbatim, so this drops every unrelated row before any JSON is read) and
    on the unwrapped line or a JSON layout's logger field (exact). One record in LAYOUT_SAMPLE_EVERY
    passes either way (the layout report). Rows whose JSON envelope cannot be read are kept (line
    null) and quarantined by the parse step. Replay files (the sources in `specs`) skip the test:
    their reader emits only marker lines already, plus each file's first lines as a layout sample.
    """
    keep = F.col("eof") | (F.col("seq") % LAYOUT_SAMPLE_EVERY == 0)
    if specs:
        keep = keep | F.col("source_id").isin(list(specs))
    prefiltered = raw.where(keep | coordinator_line_filter("line"))
    unwrapped = unwrap_frame(prefiltered.select("source_id", "seq", F.col("line").alias("raw"), "ts_hint_ms", "eof"),
                             "raw", specs, default_spec)
    kept = unwrapped.where(keep | F.col("line").isNull() | coordinator_line_filter("line")
                           | coordinator_line_filter("logger_field"))
    return kept.mapInArrow(partial(_parse_logs, specs=specs, unknown_sample=unknown_sample,
                                    default_spec=default_spec),
                            EVENT_SCHEMA)


def offsets_events(raw: DataFrame, clusters: dict[str, str]) -> DataFrame:
    """Decode in Arrow batches: commits vectorised and pre-aggregated, the rest per record
    (streaming/offsets/vectorised/). Live topics pass a ClusterNames with the cluster as fallback."""
    return raw.mapInArrow(partial(_decode_offsets, clusters=clusters), EVENT_SCHEMA)


# What the Python workers run: the pure steps, after freeze_worker_heap (worker_gc.py).
def _parse_logs(batches: Iterator[Any], **options: Any) -> Iterator[Any]:
    freeze_worker_heap()
    yield from log_rows_to_events(batches, **options)


def _decode_offsets(batches: Iterator[Any], **options: Any) -> Iterator[Any]:
    freeze_worker_heap()
    yield from offsets_arrow_to_events(batches, **options)


def observed(events: DataFrame, source_kind: str) -> DataFrame:
    """Per-source figures Spark reports in each batch's progress (observedMetrics), with the data
    of the source's statistics rows (streaming/rows.py STATISTICS_KINDS): the stateful step skips
    those, and the driver reads them from the report (app/batch_report.py)."""
    real = F.col("kind") != F.lit(END_OF_INPUT)
    return events.observe(
        f"{OBSERVED_SOURCE_PREFIX}{source_kind}",
        F.max(F.when(real & (F.col("kind") != F.lit(QUARANTINE)), F.col("ts_ms"))).alias(OBSERVED_NEWEST),
        F.min(F.when(real & (F.col("kind") != F.lit(QUARANTINE)), F.col("ts_ms"))).alias(OBSERVED_OLDEST),
        F.sum(F.when(real & (F.col("kind") != F.lit(QUARANTINE)), 1).otherwise(0)).alias("events"),
        F.sum(F.when(F.col("kind") == F.lit(QUARANTINE), 1).otherwise(0)).alias("quarantined"),
        F.collect_list(F.when(F.col("kind").isin(*map(str, STATISTICS_KINDS)), F.col("data_json")))
        .alias(OBSERVED_STATISTICS),
    )


def with_watermark(events: DataFrame, lateness_seconds: float) -> DataFrame:
    return (events.withColumn("event_time", F.timestamp_millis("ts_ms"))
            .withWatermark("event_time", f"{int(lateness_seconds * 1000)} milliseconds"))


def packed_event_column() -> Column:
    """The PACKED_EVENT text of an event row (streaming/rows.py): to_json of its plain fields (null
    ones left out), with the data_json text spliced in front as the object under PACKED_DATA
    instead of a string field, so the step parses each row once. data_json is JSON the steps
    wrote (rows.py DATA_JSON, the vectorised commits' templates)."""
    plain = F.to_json(F.struct(*PLAIN_PACKED_FIELDS))
    data = F.col(LEGACY_PACKED_DATA)
    return F.when(data.isNull(), plain).otherwise(
        F.concat(F.lit(f'{{"{PACKED_DATA}":'), data, F.lit(","), F.substring(plain, 2, 2 ** 31 - 1)))


def group_state_machine(events: DataFrame, group_allow: Sequence[str] = (), group_deny: Sequence[str] = (),
                        diagnosis: DiagnosisSettings | None = None, live_view: bool = True,
                        state_buckets: int = 0, committed_offsets: bool = False) -> DataFrame:
    """The per-group state machine. `state_buckets` > 0: the groups share that many keys per
    cluster (process_bucket); 0: one key per group (process_group, checkpoints written before).
    `committed_offsets` (run, a replay with end offsets): each group's newest committed offsets of a
    batch come out too."""
    # No filter before the stateful step: Spark's optimizer pushes a filter on `group` below the
    # watermark operator, and the rows it removes (end-of-input markers, denied groups) would
    # no longer move their source's event time. The function skips them instead.
    function: Any = process_bucket if state_buckets else process_group
    if group_allow or group_deny or diagnosis is not None or not live_view or committed_offsets:
        function = partial(function, group_allow=tuple(group_allow or ()), group_deny=tuple(group_deny or ()),
                           diagnosis=diagnosis or DEFAULT_SETTINGS, live_view=live_view,
                           committed_offsets=committed_offsets)
    # One packed column besides the key (streaming/rows.py STATE_INPUT_COLUMNS), and event_time:
    # Spark refuses an event-time timeout unless a watermarked column reaches the step.
    packed_event = packed_event_column().alias(PACKED_EVENT)
    if state_buckets:
        bucket = state_bucket_column(state_buckets)
        keys: tuple[str, ...] = ("cluster", bucket)
        # A replay's rows also say through which event time their batch is complete (rows.py)
        complete = [COMPLETE_THROUGH] if COMPLETE_THROUGH in events.columns else []
        packed = events.select("cluster", F.pmod(F.xxhash64("group"), F.lit(state_buckets)).cast("int").alias(bucket),
                               "group", packed_event, "event_time", *complete)
        state_schema = STATE_SCHEMA_BUCKETED
    else:
        keys, state_schema = STATE_INPUT_KEYS, STATE_SCHEMA
        packed = events.select(*STATE_INPUT_KEYS, packed_event, "event_time")
    return (packed.groupBy(*keys)
            .applyInPandasWithState(function, OUTPUT_SCHEMA, state_schema, "append",
                                    GroupStateTimeout.EventTimeTimeout))
