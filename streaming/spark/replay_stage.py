"""A replay's first stage: its input files read, parsed and decoded by Spark's tasks in one batch
job, and the event rows staged as Parquet, cut into time slices (docs/design.md, "Replay in two
stages").

1. Read (sources/replay_files.py): the tasks read the files, the log parse and offsets decode run
   as in the live query (steps.py), and the event rows are written as they come, in any order.
2. Cut: the rows are range-partitioned by event time into slices of about `max_rows_per_batch`
   rows (all kinds together, so every kind is cut at the same times) and written per kind.

The second stage streams the slices in time order (sources/staged.py) through the stateful step.
The driver plans and lists files; it never holds input rows.
"""
from __future__ import annotations

import json
import math
import os
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import reduce
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from state.events import END_OF_INPUT, SOURCE_LOG, SOURCE_OFFSETS
from state.vocabulary import SOURCE_KIND_LOG, SOURCE_KIND_OFFSETS
from streaming.spark.sources.replay_files import (
    LOG_FILES_SOURCE, OFFSETS_FILES_SOURCE, plan_log_reads, plan_offsets_reads
)

KIND_COLUMN = "source_kind"
EVENT_SOURCE = {SOURCE_KIND_LOG: SOURCE_LOG, SOURCE_KIND_OFFSETS: SOURCE_OFFSETS}
_TASK_OF_FILE = re.compile(r"^part-(\d+)-")


@dataclass(frozen=True)
class StagedKind:
    """One input kind's staged events: the Parquet files of each slice (all kinds have the same
    number of slices; a slice without events of this kind has none), event rows per slice, and
    the input lines or records its files held."""
    kind: str
    slices: list[list[str]]
    rows: list[int]
    inputs: int
    # Per slice, its newest event time over every kind (None: no event): every event at or
    # before it is in this slice or an earlier one (the cut is one range partitioning of all
    # kinds), so the stateful step may apply them in the slice's own micro-batch instead of
    # holding them for the next batch's watermark (docs/design.md, "Replay in two stages").
    complete_through: list[int | None] = field(default_factory=list)


def read_events_by_kind(spark: SparkSession, log_files: list[dict], log_specs: dict, offsets_files: list[dict],
                        clusters: dict[str, str], unknown_sample: int) -> dict[str, DataFrame]:
    """The event rows of the input files (batch), per input kind."""
    parts = {}
    if log_files:
        reads = [vars(r) for r in plan_log_reads(log_files)]
        specs = {sid: vars(spec) for sid, spec in log_specs.items()}
        parts[SOURCE_KIND_LOG] = (spark.read.format(LOG_FILES_SOURCE).option("reads", json.dumps(reads))
                                  .option("specs", json.dumps(specs)).option("unknownSample", str(unknown_sample))
                                  .load())
    if offsets_files:
        reads = [vars(r) for r in plan_offsets_reads(offsets_files)]
        parts[SOURCE_KIND_OFFSETS] = (spark.read.format(OFFSETS_FILES_SOURCE).option("reads", json.dumps(reads))
                                      .option("clusters", json.dumps(clusters)).load())
    return parts


def read_events(spark: SparkSession, log_files: list[dict], log_specs: dict, offsets_files: list[dict],
                clusters: dict[str, str], unknown_sample: int) -> DataFrame:
    """The event rows of the input files (batch), each tagged with its kind (KIND_COLUMN)."""
    parts = read_events_by_kind(spark, log_files, log_specs, offsets_files, clusters, unknown_sample)
    return reduce(DataFrame.unionByName, [df.withColumn(KIND_COLUMN, F.lit(kind)) for kind, df in parts.items()])


def stage_events(spark: SparkSession, events: dict[str, DataFrame], directory: str,
                 rows_per_slice: int) -> list[StagedKind]:
    """Write `events` (read_events_by_kind) under `directory`, cut into time slices; the staged kinds.

    Each kind is written to its own directory (the writes run as concurrent jobs, so both kinds'
    tasks share the cores): the files of a kind need no partitioned write, whose sort by kind
    every task would pay. When all the events fit in one slice, those files are the slice, read
    as written (the staged reader drops the read counts' end-of-input rows): no second pass."""
    unsorted_dir, slices_dir = os.path.join(directory, "events"), os.path.join(directory, "slices")

    def write(kind: str) -> None:
        events[kind].write.mode("overwrite").parquet(os.path.join(unsorted_dir, f"{KIND_COLUMN}={kind}"))

    with ThreadPoolExecutor(max_workers=max(1, len(events))) as pool:
        list(pool.map(write, sorted(events)))
    found = {kind: _totals(os.path.join(unsorted_dir, f"{KIND_COLUMN}={kind}")) for kind in events}
    totals = {kind: t for kind, t in found.items() if t is not None}
    n_slices = max(1, math.ceil(sum(t[0] for t in totals.values()) / max(1, rows_per_slice)))
    if n_slices == 1:
        newest = max((t[2] for t in totals.values() if t[2] is not None), default=None)
        return [StagedKind(kind, [_parquet_files(os.path.join(unsorted_dir, f"{KIND_COLUMN}={kind}"))],
                           [rows], inputs, [None if newest is None else int(newest)])
                for kind, (rows, inputs, _) in sorted(totals.items())]
    staged = spark.read.parquet(unsorted_dir)
    (staged.where(F.col("kind") != F.lit(END_OF_INPUT)).repartitionByRange(n_slices, "ts_ms")
     .write.mode("overwrite").partitionBy(KIND_COLUMN).parquet(slices_dir))
    kinds = [_slices_of(kind, os.path.join(slices_dir, f"{KIND_COLUMN}={kind}"), n_slices, totals[kind][1])
             for kind in sorted(totals)]
    through = [max((t for k in kinds if (t := k.complete_through[i]) is not None), default=None)
               for i in range(n_slices)]
    return [replace(k, complete_through=through) for k in kinds]


def _totals(directory: str) -> tuple[int, int, int | None] | None:
    """One kind's staged files: (event rows, input lines or records: the seq of the reads'
    end-of-input rows, newest event time), read by the driver from those three columns (a Spark
    job over them took 1.3 s of the day's replay); None: no row at all."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds
    files = _parquet_files(directory)
    if not files:
        return None
    table = ds.dataset(files, format="parquet").to_table(columns=["kind", "seq", "ts_ms"])
    if not table.num_rows:
        return None
    is_end = pc.equal(table.column("kind"), END_OF_INPUT)
    ends = int(pc.sum(is_end).as_py() or 0)
    inputs = pc.sum(pc.filter(table.column("seq"), is_end)).as_py() or 0
    newest = pc.max(pc.filter(table.column("ts_ms"), pc.invert(is_end))).as_py()
    return table.num_rows - ends, int(inputs), None if newest is None else int(newest)


def _parquet_files(directory: str) -> list[str]:
    """The Parquet files Spark wrote under `directory`, by name (none: no directory)."""
    names = sorted(os.listdir(directory)) if os.path.isdir(directory) else []
    return [os.path.join(directory, name) for name in names if name.endswith(".parquet")]


def _slices_of(kind: str, directory: str, n_slices: int, inputs: int) -> StagedKind:
    """The files of each slice: Spark names a task's output part-<task>-..., and task i of a range
    partitioning writes range i."""
    import pyarrow.parquet as pq
    slices: list[list[str]] = [[] for _ in range(n_slices)]
    rows = [0] * n_slices
    maxima: list[list[int]] = [[] for _ in range(n_slices)]     # each file's newest ts_ms
    for path in _parquet_files(directory):
        m = _TASK_OF_FILE.match(os.path.basename(path))
        if m is None:
            continue
        i = int(m.group(1))
        slices[i].append(path)
        meta = pq.read_metadata(path)
        rows[i] += meta.num_rows
        maxima[i] += _newest_ts(meta, path)
    return StagedKind(kind, slices, rows, inputs, [max(m) if m else None for m in maxima])


def _newest_ts(meta: Any, path: str) -> list[int]:
    """The largest ts_ms of each row group of a staged file, from its statistics (no data read)."""
    column = meta.schema.to_arrow_schema().get_field_index("ts_ms")
    out = []
    for g in range(meta.num_row_groups):
        stats = meta.row_group(g).column(column).statistics
        if stats is None or not stats.has_min_max:
            raise RuntimeError(f"replay: staged file {path} has no ts_ms statistics")
        out.append(stats.max)
    return out
