"""Inputs of N consumer groups built from one real captured group (bench/scale).

The Kafka 2.7 capture's sc03 (tests/fixtures/kafka-2.7): a 3-member join, one member SIGKILLed
(heartbeat expiry), the two others leaving, the group going Empty and then Dead; its 12
group-coordinator log lines and its 43 `__consumer_offsets` records (GroupMetadata, offset commits
of the auto-committing consumers, tombstones). Copy i renames the group `sc03-heartbeat-expiry`
to `g<i:06d>-heartbeat-expiry` (a fixed-length prefix) in the log lines and inside each record key,
puts its records on the `__consumer_offsets` partition the name hashes to, and shifts all of its
times by i * spread / N plus up to 1 s of seeded jitter: N groups each going through the scenario
once within `spread_seconds` (default 600 s: one rebalance per group per 10 minutes).

Deterministic for (N, seed). `expected_per_group()` is what the monitor must find for every copy:
the sc03 rebalances and removals of the golden replay (tests/fixtures/golden/kafka-2.7).
"""
from __future__ import annotations

import base64
import heapq
import json
import random
import struct
import zlib
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAPTURE = ROOT / "tests" / "fixtures" / "kafka-2.7"
GOLDEN = ROOT / "tests" / "fixtures" / "golden" / "kafka-2.7"
GROUP = "sc03-heartbeat-expiry"
PARTITIONS = 50
LOG4J = "%Y-%m-%d %H:%M:%S,%f"


def group_name(i: int) -> str:
    return f"g{i:06d}-heartbeat-expiry"


def _log_lines() -> list[tuple[datetime, str]]:
    """sc03's group-coordinator lines of both brokers, with their header times."""
    out = []
    for path in sorted(CAPTURE.glob("broker*-server.log")):
        for line in path.read_text().splitlines():
            if GROUP in line and "(kafka.coordinator.group." in line:
                out.append((datetime.strptime(line[1:24], LOG4J), line[26:]))
    return sorted(out, key=lambda t: t[0])


def _records() -> list[tuple[int, bytes, bytes | None]]:
    """sc03's offsets records: (timestamp, key, value or None)."""
    out = []
    for line in (CAPTURE / "offsets-topic.jsonl").read_text().splitlines():
        o = json.loads(line)
        key = base64.b64decode(o["key_b64"])
        length = struct.unpack_from(">h", key, 2)[0]
        if key[4:4 + length] == GROUP.encode():
            value = None if o["value_b64"] is None else base64.b64decode(o["value_b64"])
            out.append((o["timestamp"], key, value))
    return sorted(out, key=lambda r: r[0])


def _partition(group: bytes) -> int:
    """The `__consumer_offsets` partition a generated group's records go to."""
    return zlib.crc32(group) % PARTITIONS


def _rename_key(key: bytes, group: bytes) -> bytes:
    length = struct.unpack_from(">h", key, 2)[0]
    return key[:2] + struct.pack(">h", len(group)) + group + key[4 + length:]


def generate(groups: int, out_dir: Path, seed: int = 15, spread_seconds: float = 600.0) -> dict[str, int]:
    """Write `broker1-server.log` and `offsets-topic.jsonl` for `groups` copies into out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lines, records = _log_lines(), _records()
    rng = random.Random(seed)
    shifts = [int(i * spread_seconds * 1000 / groups) + rng.randrange(1000) for i in range(groups)]
    log_path, dump_path = out_dir / "broker1-server.log", out_dir / "offsets-topic.jsonl"

    def log_entries(i: int):
        name = group_name(i)
        for ts, rest in lines:
            yield ts + timedelta(milliseconds=shifts[i]), rest.replace(GROUP, name)

    with open(log_path, "w") as handle:
        merged = heapq.merge(*(log_entries(i) for i in range(groups)), key=lambda e: e[0])
        n_lines = 0
        for ts, rest in merged:
            handle.write(f"[{ts.strftime(LOG4J)[:-3]}] {rest}\n")
            n_lines += 1

    def record_entries(i: int):
        name = group_name(i).encode()
        partition = _partition(name)
        for ts, key, value in records:
            yield ts + shifts[i], partition, _rename_key(key, name), value

    n_records = _write_dump(dump_path, heapq.merge(*(record_entries(i) for i in range(groups)), key=lambda e: e[0]))
    return {"groups": groups, "log_lines": n_lines, "offsets_records": n_records}


def _write_dump(path: Path, records) -> int:
    """An offsets-topic.jsonl of (ts, partition, key, value) records in time order, each on its
    partition's next offset; returns the number written."""
    next_offset = [0] * PARTITIONS
    n_records = 0
    with open(path, "w") as handle:
        for ts, partition, key, value in records:
            handle.write(json.dumps({"partition": partition, "offset": next_offset[partition], "timestamp": ts,
                                     "key_b64": base64.b64encode(key).decode(),
                                     "value_b64": None if value is None else base64.b64encode(value).decode()})
                         + "\n")
            next_offset[partition] += 1
            n_records += 1
    return n_records


def generate_day(groups: int, out_dir: Path, seed: int = 15, repeats: int = 3, day_seconds: float = 86_400.0,
                 commit_every_s: float = 1_800.0, commit_partitions: int = 10) -> dict[str, int]:
    """A day of a `groups`-group fleet (bench/cost's replay input): every group goes through the sc03
    scenario `repeats` times (once every day_seconds / repeats, its first at a seeded phase as in
    `generate`), and between them commits `commit_partitions` partitions every `commit_every_s`
    (an auto-commit: one record per partition, one record time, the offset growing by 100 and the
    value's commit time the record's). Writes the files `generate` writes."""
    out_dir.mkdir(parents=True, exist_ok=True)
    lines, records = _log_lines(), _records()
    rng = random.Random(seed)
    cycle_ms = int(day_seconds * 1000 / repeats)
    shifts = [int(i * cycle_ms / groups) + rng.randrange(1000) for i in range(groups)]
    log_start = lines[0][0]
    # The scenario's span in record time, with its log lines' offset from its first record.
    first_record = records[0][0]
    log_offset_ms = int((log_start - datetime.utcfromtimestamp(first_record / 1000)).total_seconds() * 1000)
    span_ms = max(records[-1][0] - first_record, int((lines[-1][0] - log_start).total_seconds() * 1000)) + 5_000
    commit_key, commit_value = next((k, v) for _, k, v in records if struct.unpack_from(">h", k, 0)[0] in (0, 1) and v)
    period = int(commit_every_s * 1000)
    log_path, dump_path = out_dir / "broker1-server.log", out_dir / "offsets-topic.jsonl"

    def starts(i: int) -> list[int]:
        return [shifts[i] + r * cycle_ms for r in range(repeats)]

    def log_entries(i: int):
        name = group_name(i)
        for start in starts(i):
            for ts, rest in lines:
                at = ts - log_start + timedelta(milliseconds=start + log_offset_ms)
                yield at, rest.replace(GROUP, name)

    epoch = datetime(2026, 11, 20)
    with open(log_path, "w") as handle:
        n_lines = 0
        for at, rest in heapq.merge(*(log_entries(i) for i in range(groups)), key=lambda e: e[0]):
            handle.write(f"[{(epoch + at).strftime(LOG4J)[:-3]}] {rest}\n")
            n_lines += 1
    epoch_ms = int((epoch - datetime(1970, 1, 1)).total_seconds() * 1000)

    def record_entries(i: int):
        name = group_name(i).encode()
        partition = _partition(name)
        busy = [(epoch_ms + s - 1_000, epoch_ms + s + span_ms) for s in starts(i)]
        scenario = [(epoch_ms + s + ts - first_record, _rename_key(k, name), v) for s in starts(i)
                    for ts, k, v in records]
        keys = [_rename_key(commit_key, name)[:-4] + struct.pack(">i", p) for p in range(commit_partitions)]
        steady = []
        offset = 0
        for ms in range(epoch_ms + rng.randrange(period), epoch_ms + int(day_seconds * 1000), period):
            if any(a <= ms <= b for a, b in busy):
                continue
            offset += 100
            commit = commit_value[:2] + struct.pack(">q", offset) + commit_value[10:16] + struct.pack(">q", ms)
            steady += [(ms, key, commit) for key in keys]
        for ts, key, value in heapq.merge(scenario, steady, key=lambda e: e[0]):
            yield ts, partition, key, value

    n_records = _write_dump(dump_path, heapq.merge(*(record_entries(i) for i in range(groups)), key=lambda e: e[0]))
    return {"groups": groups, "log_lines": n_lines, "offsets_records": n_records, "repeats": repeats}


def steady_commits(groups: int, window_s: float, every_s: float, seed: int = 15,
                   partitions: int = 1) -> list[tuple[int, dict]]:
    """The steady state of auto-committing consumers: every one of the `groups` groups commits
    `partitions` offsets (one per partition of its topic, as an auto-commit does) every `every_s`
    seconds over `window_s` (its first at a seeded phase): sc03's first offset commit record,
    renamed, its partition set, and put on the group's partition as `generate` does. Returns (ms
    from the window's start, record as in offsets-topic.jsonl without offset and timestamp, with
    its key and value bytes decoded under "key" and "value"); a group's records share their dicts.
    All of steady_commit_stream in a list: about 150 bytes a record (10,000 groups of 10
    partitions every 5 s: 1.8 M records and 0.3 GB for 90 s, 14 M and 2 GB for 12 minutes)."""
    return list(steady_commit_stream(groups, window_s, every_s, seed, partitions))


def _steady_plan(groups: int, every_s: float, seed: int, partitions: int) -> tuple[int, list[tuple[int, list[dict]]]]:
    """The commit period in ms and each group's (phase in ms, its commit's records), in the order
    of `groups` (the phases drawn from random.Random(seed) in that order)."""
    key, value = _first_commit()
    rng = random.Random(seed)
    period = int(every_s * 1000)
    plan = []
    for i in range(groups):
        name = group_name(i).encode()
        renamed = _rename_key(key, name)
        records = [{"partition": _partition(name), "key": renamed[:-4] + struct.pack(">i", p), "value": value,
                    "key_b64": None, "value_b64": None} for p in range(partitions)]
        plan.append((rng.randrange(period), records))
    return period, plan


def _first_commit() -> tuple[bytes, bytes]:
    """sc03's first offset commit record: its key and value."""
    key, value = next((k, v) for _, k, v in _records() if struct.unpack_from(">h", k, 0)[0] in (0, 1) and v)
    assert value is not None        # the filter keeps records with a value
    return key, value


def steady_topic() -> tuple[str, int]:
    """The topic steady_commits's groups commit to and the offset each commit names (sc03's first
    commit's): the steady bench creates it with records beyond that offset, so `run`'s lag sampler
    finds end offsets and every group has a lag."""
    key, value = _first_commit()
    group_len = struct.unpack_from(">h", key, 2)[0]
    topic_len = struct.unpack_from(">h", key, 4 + group_len)[0]
    return key[6 + group_len:6 + group_len + topic_len].decode(), struct.unpack_from(">q", value, 2)[0]


def steady_commit_stream(groups: int, window_s: float, every_s: float, seed: int = 15, partitions: int = 1):
    """steady_commits's records, in its order (time, then group, then partition), made as they are
    read: the memory of one commit per group (its `partitions` dicts), not of the window."""
    period, plan = _steady_plan(groups, every_s, seed, partitions)
    order = sorted(range(groups), key=lambda i: plan[i][0])      # stable: by phase, then group
    end = int(window_s * 1000)
    for cycle in range(0, end, period):
        for i in order:
            ms = cycle + plan[i][0]
            if ms >= end:
                break       # the later phases of this cycle are past the end too
            for record in plan[i][1]:
                yield ms, record


def steady_commit_count(groups: int, every_s: float, seed: int = 15, partitions: int = 1, start_s: float = 0.0,
                        end_s: float = 0.0) -> int:
    """The records of steady_commit_stream(groups, end_s, every_s, seed, partitions) at `start_s`
    or later, counted without making them."""
    period, plan = _steady_plan(groups, every_s, seed, 1)
    end = int(end_s * 1000)
    start = min(int(start_s * 1000), end)
    return partitions * sum(len(range(phase, end, period)) - len(range(phase, start, period))
                            for phase, _ in plan)


# The catch-up backlog (bench/cost --only catch_up, bench/catch_up.py).
CATCH_UP_COMMIT_PARTITIONS = 10     # partitions per auto-commit
# A group's scenario ends at least this long before the backlog's end: the last records' watermark
# (run's lateness, 10 s) has passed it, so every rebalance is final once all records are applied.
CATCH_UP_TAIL_MS = 60_000
_CATCH_UP_PAD_MS = 5_000            # no auto-commit this close to the group's own scenario


def catch_up_shape_error(groups: int, records: int, span_s: float) -> str | None:
    """Why `catch_up_backlog` cannot make this backlog (None: it can)."""
    scenario = len(_records())
    if groups < 1:
        return f"--catch-up-groups must be at least 1, not {groups}"
    if records < groups * scenario:
        return (f"--catch-up-records {records:,} is below the {groups:,} groups' scenarios alone "
                f"({scenario} records each: {groups * scenario:,})")
    need = (_scenario_ms() + CATCH_UP_TAIL_MS + 2 * _CATCH_UP_PAD_MS + 1_000) / 1000
    if span_s < need:
        return f"a catch-up backlog spans at least {need:.0f} s, not {span_s:g}"
    return None


def _scenario_ms() -> int:
    records = _records()
    return records[-1][0] - records[0][0]


def _catch_up_timelines(groups: int, records: int, span_ms: int, seed: int) -> list[tuple[int, list[int], int]]:
    """Per group: its scenario's start, its auto-commits' times (ms from the backlog's start, in
    order, none within _CATCH_UP_PAD_MS of the scenario) and the partitions of its last commit."""
    scenario_ms = _scenario_ms()
    extra, left = divmod(records - groups * len(_records()), groups)
    rng = random.Random(seed)
    usable = span_ms - scenario_ms - CATCH_UP_TAIL_MS - 1_000
    out = []
    for i in range(groups):
        start = int(i * usable / groups) + rng.randrange(1_000)
        busy_a, busy_b = max(0, start - _CATCH_UP_PAD_MS), start + scenario_ms + _CATCH_UP_PAD_MS
        quota = extra + (1 if i < left else 0)
        n = -(-quota // CATCH_UP_COMMIT_PARTITIONS)
        step = (span_ms - (busy_b - busy_a)) / max(n, 1)
        phase = rng.random() * step
        times = [pos if pos < busy_a else pos + busy_b - busy_a for pos in (int(phase + k * step) for k in range(n))]
        out.append((start, times, quota - (n - 1) * CATCH_UP_COMMIT_PARTITIONS if n else 0))
    return out


def catch_up_backlog(groups: int, records: int, end_ms: int, seed: int = 15, span_s: float = 3_600.0):
    """A monitor's backlog of `__consumer_offsets`: `records` records of `groups` groups over
    `span_s` seconds ending at `end_ms` (the newest record's time). Every group goes once through
    sc03 (its 43 records, renamed, on the partition its name hashes to, as `generate` does), its
    scenarios spread over the span with seeded jitter, and auto-commits CATCH_UP_COMMIT_PARTITIONS
    partitions evenly over the rest of the span (generate_day's commits: the offset growing by 100,
    the value's commit time the record's) until the total is reached: the groups' quotas differ by
    at most one record, a group's last commit may cover fewer partitions. Yields (partition, its
    records as (timestamp, key, value or None) in time order), one partition at a time."""
    problem = catch_up_shape_error(groups, records, span_s)
    if problem:
        raise ValueError(problem)
    scenario = _records()
    first = scenario[0][0]
    commit_key, commit_value = next((k, v) for _, k, v in scenario if struct.unpack_from(">h", k, 0)[0] in (0, 1) and v)
    timelines = _catch_up_timelines(groups, records, int(span_s * 1000), seed)
    scenario_ms = scenario[-1][0] - first
    shift = end_ms - max(max(times[-1:] + [start + scenario_ms]) for start, times, _ in timelines)
    by_partition: dict[int, list[int]] = {}
    for i in range(groups):
        by_partition.setdefault(_partition(group_name(i).encode()), []).append(i)
    for partition in sorted(by_partition):
        out: list[tuple[int, bytes, bytes | None]] = []
        for i in by_partition[partition]:
            name = group_name(i).encode()
            start, times, last = timelines[i]
            out += [(shift + start + ts - first, _rename_key(k, name), v) for ts, k, v in scenario]
            renamed = _rename_key(commit_key, name)[:-4]
            keys = [renamed + struct.pack(">i", p) for p in range(CATCH_UP_COMMIT_PARTITIONS)]
            for n, at in enumerate(times, 1):
                ms = shift + at
                value = commit_value[:2] + struct.pack(">q", 100 * n) + commit_value[10:16] + struct.pack(">q", ms)
                out += [(ms, key, value) for key in (keys if n < len(times) else keys[:last])]
        out.sort(key=lambda r: r[0])
        yield partition, out


def expected_per_group() -> dict[str, list]:
    """The sc03 records of the golden replay, as compared per copy (times differ, names differ)."""
    def of(name: str, fields: tuple[str, ...]) -> list:
        rows = [json.loads(line) for line in (GOLDEN / name).read_text().splitlines()]
        return sorted(tuple(r[f] for f in fields) for r in rows if r["group"] == GROUP)
    return {"rebalances": of("rebalances.jsonl", ("generation", "trigger", "outcome")),
            "removals": of("member_removals.jsonl", ("generation", "cause"))}


def check_outputs(out: Path, groups: int, repeats: int = 1) -> list[str]:
    """Problems of a replay's output directory: every copy must have exactly the sc03 rebalances
    and removals (`repeats` times each: generate_day), and nothing else may be there. Empty list:
    all found."""
    expected = {kind: sorted(rows * repeats) for kind, rows in expected_per_group().items()}
    found: dict[str, dict[str, list]] = {group_name(i): {"rebalances": [], "removals": []} for i in range(groups)}
    problems = []
    for kind, name, fields in (("rebalances", "rebalances.jsonl", ("generation", "trigger", "outcome")),
                               ("removals", "member_removals.jsonl", ("generation", "cause"))):
        for line in (out / name).read_text().splitlines():
            r = json.loads(line)
            if r["group"] not in found:
                problems.append(f"unexpected group {r['group']} in {name}")
                continue
            found[r["group"]][kind].append(tuple(r[f] for f in fields))
    for group, kinds in found.items():
        for kind, rows in kinds.items():
            if sorted(rows) != expected[kind]:
                problems.append(f"{group}: {kind} {sorted(rows)} != {expected[kind]}")
    anomalies = (out / "anomalies.jsonl").read_text().splitlines() if (out / "anomalies.jsonl").exists() else []
    if anomalies:
        problems.append(f"{len(anomalies)} anomalies (the capture has none for sc03)")
    return problems
