"""Throughput of the `__consumer_offsets` decode path: decode + per-(group, topic, partition)
aggregation (streaming/offsets/vectorised/, the query's mapInArrow step) against the ceiling of
merely reading the same rows and touching their bytes (summing key and value lengths) in the same
engine.

Input: every record of the two real captures (tests/fixtures/kafka-*/offsets-topic.jsonl) scaled
to many groups: copy i renames each group G to "G~i" inside the key (every key starts with
int16 type + group string), moves it to partition hash % 50 with fresh offsets, and jitters its
timestamps by up to 1 s; all copies share the capture's timeline, interleaved by time as a real
cluster with that many groups would write them. Written once to bench/.data/ as Parquet.

Runs (each timed after a warm-up run, best of --repeat; the two Spark runs alternate):
  spark:     spark.read.parquet -> mapInArrow(decode) -> noop sink, vs the same with a touch-bytes
             mapInArrow (the ceiling) -- the engine the streaming query uses;
  in-process: the same two functions over the Parquet file's Arrow batches, no Spark;
  reference: the per-record Python decoder (parse.decode_offsets_rows) on a 200,000-row slice.
Before timing, the vectorised output is checked against the reference on a slice.

The Spark runs also report the CPU seconds of the process tree (driver, JVM, Python workers): on a
machine shared with other work, wall time swings with their load, CPU time much less.

Last line: records_per_second=N ceiling_records_per_second=M ratio=R (the Spark run, wall clock).
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import random
import struct
import sys
import time
import zlib
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from testbed.proc import tree_cpu_seconds

ROOT = Path(__file__).resolve().parents[1]

DUMPS = [ROOT / "tests" / "fixtures" / "kafka-2.7" / "offsets-topic.jsonl",
         ROOT / "tests" / "fixtures" / "kafka-4.0" / "offsets-topic.jsonl"]
DATA = ROOT / "bench" / ".data"
SOURCE_ID = "bench:offsets-scaled"
CLUSTERS = {SOURCE_ID: "bench"}
PARTITIONS = 50


def raw_arrow_schema() -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    from streaming.spark.schema import RAW_OFFSETS_SCHEMA
    return to_arrow_schema(RAW_OFFSETS_SCHEMA)


def load_captures() -> list[tuple]:
    out = []
    for path in DUMPS:
        for line in open(path):
            o = json.loads(line)
            key = base64.b64decode(o["key_b64"])
            value = None if o["value_b64"] is None else base64.b64decode(o["value_b64"])
            out.append((o["timestamp"], key, value))
    return out


def rename_group(key: bytes, suffix: bytes) -> bytes:
    glen = struct.unpack_from(">h", key, 2)[0]
    group = key[4:4 + glen] + suffix
    return key[:2] + struct.pack(">h", len(group)) + group + key[4 + glen:]


def build_input(groups: int, path: Path) -> tuple[int, int]:
    records = load_captures()
    base_groups = {r[1][4:4 + struct.unpack_from(">h", r[1], 2)[0]] for r in records}
    copies = max(1, -(-groups // len(base_groups)))
    rng = random.Random(4)
    rows = []
    for i in range(copies):
        suffix = b"~%d" % i
        jitter = rng.randrange(1000)
        for ts, key, value in records:
            new_key = rename_group(key, suffix)
            glen = struct.unpack_from(">h", new_key, 2)[0]
            partition = zlib.crc32(new_key[4:4 + glen]) % PARTITIONS
            rows.append((ts + jitter, partition, new_key, value))
    rows.sort(key=lambda r: r[0])
    next_offset = [0] * PARTITIONS
    cols: dict[str, list[Any]] = {name: [] for name in raw_arrow_schema().names}
    for seq, (ts, partition, key, value) in enumerate(rows, start=1):
        cols["source_id"].append(SOURCE_ID)
        cols["seq"].append(seq)
        cols["partition"].append(partition)
        cols["offset"].append(next_offset[partition])
        next_offset[partition] += 1
        cols["timestamp_ms"].append(ts)
        cols["key"].append(key)
        cols["value"].append(value)
        cols["error"].append(None)
        cols["eof"].append(False)
        cols["error_reason"].append(None)
    schema = raw_arrow_schema()
    table = pa.table({n: pa.array(cols[n], schema.field(n).type) for n in schema.names}, schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    # Small row groups: Spark splits the file into two equal halves (one per core) at row-group
    # boundaries; with big row groups one task would get most of the rows.
    pq.write_table(table, path, row_group_size=20_000, compression="none")
    return len(rows), copies * len(base_groups)


# --- the two mapInArrow functions --------------------------------------------------------------
def touch(batches):
    """The ceiling: read every row and touch its key and value bytes, decode nothing."""
    import pyarrow.compute as pc
    for b in batches:
        k = pc.sum(pc.binary_length(b.column("key"))).as_py() or 0
        v = pc.sum(pc.binary_length(b.column("value"))).as_py() or 0
        yield pa.RecordBatch.from_arrays([pa.array([b.num_rows]), pa.array([k + v])], names=["n", "bytes"])


def decode(batches):
    from streaming.offsets.vectorised import offsets_arrow_to_events
    yield from offsets_arrow_to_events(batches, CLUSTERS)


# --- runs ------------------------------------------------------------------------------------------
def best_of(fn, repeat: int) -> float:
    fn()   # warm-up (Python workers, imports, page cache)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def check_against_reference(path: Path, rows: int = 100_000) -> None:
    from streaming.offsets.per_record import decode_offsets_rows
    from streaming.offsets.vectorised import decode_arrow_batch
    from testbed.offsets_equivalence import normalise
    table = pq.read_table(path).slice(0, rows)
    for batch in table.to_batches(max_chunksize=10_000):
        ref = decode_offsets_rows(zip(*[batch.column(n).to_pylist() for n in batch.schema.names]), CLUSTERS)
        fast = [tuple(r.values()) for b in decode_arrow_batch(batch, CLUSTERS) for r in b.to_pylist()]
        if normalise(ref) != normalise(fast):
            raise SystemExit("bench: the vectorised decoder's output differs from the reference")


def _args() -> argparse.Namespace:
    ap = argparse.ArgumentParser()
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--batch-rows", type=int, default=50_000,
                    help="rows per Arrow batch (spark.sql.execution.arrow.maxRecordsPerBatch; the query's default)")
    ap.add_argument("--splits", type=int, default=2,
                    help="input splits of the Parquet file (both Spark runs); one per core reads cheapest")
    ap.add_argument("--skip-spark", action="store_true")
    return ap.parse_args()


def _in_process(path: Path, n: int, args: argparse.Namespace) -> tuple[float, float]:
    """Decode vs touch-bytes in this process (no Spark); returns their best times."""
    table = pq.read_table(path).combine_chunks()
    in_process = table.to_batches(max_chunksize=args.batch_rows)
    t_touch = best_of(lambda: sum(b.num_rows for b in touch(iter(in_process))), args.repeat)
    t_dec = best_of(lambda: sum(b.num_rows for b in decode(iter(in_process))), args.repeat)
    print(f"in-process: decode {n / t_dec:,.0f} rec/s, touch-bytes ceiling {n / t_touch:,.0f} rec/s, "
          f"ratio {t_touch / t_dec:.2f}", flush=True)
    from streaming.offsets.per_record import decode_offsets_rows
    sl = table.slice(0, 200_000)
    cols = [sl.column(c).to_pylist() for c in sl.schema.names]
    t = time.perf_counter()
    decode_offsets_rows(zip(*cols), CLUSTERS)
    print(f"reference per-record Python decoder: {sl.num_rows / (time.perf_counter() - t):,.0f} rec/s", flush=True)
    return t_touch, t_dec


def _spark(path: Path, n: int, args: argparse.Namespace) -> int:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from streaming.spark.schema import EVENT_SCHEMA
    from streaming.spark.session import get_spark
    spark = get_spark("local[2]", 2)
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.batch_rows))
    # One split per core by default: the row groups are small (20,000 rows), so two halves are
    # even, and more splits cost both runs CPU in the JVM's Parquet/Arrow side (6 or 12 splits:
    # 0.5-0.8 CPU-s more per run on this input) without changing the decode's share.
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(max(1 << 20, -(-path.stat().st_size // args.splits))))
    spark.conf.set("spark.sql.files.openCostInBytes", str(1 << 16))
    df = spark.read.parquet(str(path))
    n_splits = df.rdd.getNumPartitions()

    def run(fn, schema):
        df.mapInArrow(fn, schema).write.format("noop").mode("overwrite").save()

    # Interleaved (touch, decode, touch, decode, ...) so a change in machine load affects both.
    load0 = os.getloadavg()[0]
    run(touch, "n long, bytes long")
    run(decode, EVENT_SCHEMA)
    s_touch = s_dec = c_touch = c_dec = float("inf")
    me = os.getpid()
    for _ in range(args.repeat):
        c, t = tree_cpu_seconds(me), time.perf_counter()
        run(touch, "n long, bytes long")
        s_touch = min(s_touch, time.perf_counter() - t)
        c_touch = min(c_touch, tree_cpu_seconds(me) - c)
        c, t = tree_cpu_seconds(me), time.perf_counter()
        run(decode, EVENT_SCHEMA)
        s_dec = min(s_dec, time.perf_counter() - t)
        c_dec = min(c_dec, tree_cpu_seconds(me) - c)
    spark.stop()
    cores = os.cpu_count() or 1
    # CPU time is what other processes on a shared machine cannot take away: records per CPU
    # second times the cores is the rate the same work would reach with the machine to itself.
    print(f"spark CPU (driver + JVM + Python workers): decode {c_dec:.2f} s, touch-bytes {c_touch:.2f} s; "
          f"on {cores} free cores that is records_per_second={n / c_dec * cores:.0f} "
          f"ceiling={n / c_touch * cores:.0f} ratio={c_touch / c_dec:.2f}", flush=True)
    rate, ceiling = n / s_dec, n / s_touch
    print(f"spark local[2], {n_splits} input splits: decode + aggregate {s_dec:.2f} s, "
          f"touch-bytes {s_touch:.2f} s "
          f"(load average before/after: {load0:.1f}/{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)", flush=True)
    print(f"records_per_second={rate:.0f} ceiling_records_per_second={ceiling:.0f} ratio={rate / ceiling:.2f}")
    return 0


def main() -> int:
    args = _args()
    path = DATA / f"offsets-scaled-{args.groups}-rg20k.parquet"
    if not path.exists():
        t = time.perf_counter()
        n, groups = build_input(args.groups, path)
        print(f"built {path.name}: {n} records, {groups} groups in {time.perf_counter() - t:.1f} s", flush=True)
    n = pq.read_metadata(path).num_rows
    print(f"input: {n} records, {path.stat().st_size / 1e6:.0f} MB Parquet", flush=True)
    check_against_reference(path)
    print("check: vectorised output equals the per-record reference on the first 100,000 rows", flush=True)
    t_touch, t_dec = _in_process(path, n, args)
    if args.skip_spark:
        print(f"records_per_second={n / t_dec:.0f} ceiling_records_per_second={n / t_touch:.0f} "
              f"ratio={t_touch / t_dec:.2f}")
        return 0
    return _spark(path, n, args)

if __name__ == "__main__":
    sys.exit(main())
