"""Traffic of bench/soak: a month of a fleet on a compressed clock, made one simulated day at a time.

Every group follows the Kafka 2.7 capture's sc08-offset-expiry group (tests/fixtures/kafka-2.7):
one classic consumer joins (log: preparing to rebalance, stabilized, assignment received;
`__consumer_offsets`: GroupMetadata Stable, generation 1, one member), commits, leaves (log: has
left, preparing to rebalance on LeaveGroup, now empty; GroupMetadata Empty, generation 2) and,
once the broker's offsets retention has passed, its offsets expire (offset tombstones, the group's
GroupMetadata tombstone and the "transitioned to Dead" line). Its lines and records are renamed per
group (the key's group, the lines' group and `__consumer_offsets-<p>`, the member id's UUID) and
put on the partition the name hashes to (scale_inputs._partition).

- Ephemeral groups (`console-consumer-<i:07d>`, each name used once): `ephemeral` of them over
  the `days`, the same number each day (the remainder on the first days), each starting at a seeded
  time of its day: join, one offset commit (one partition), leave 12 s later as sc08 does, then
  the expiry `retention_days` after the leave. 12 rows a group (7 log lines, 5 records).
- Steady groups (`steady-app-<i:04d>`): join at the start of day 0 and stay; every day from day 1
  a rolling restart (from 02:00, the groups one after the other over an hour) makes each leave
  and rejoin 10 s later with a new member id: 2 rebalances a day (Empty, then Stable at the next
  generation) and one leave_group removal. Between restarts each commits `commit_partitions`
  offsets every `commit_minutes` (the offset growing by 100).

`SoakTraffic.day(d)` is day d's rows in time order, made when asked: (ms, "log", line text without
its header) or (ms, "offsets", partition, key, value or None). `tail()`: an hour of steady commits
after the last day, so the watermark passes the last day's events. The simulated month starts at
`start_ms` (midnight UTC); the bench puts it in the past so no record is from the future.
"""
from __future__ import annotations

import bisect
import re
import struct
from dataclasses import dataclass, field

from bench.scale_inputs import CAPTURE, LOG4J, _partition, _rename_key

TEMPLATE = "sc08-offset-expiry"
DAY_MS = 86_400_000
_UUID = "70b11e09-ec73-430b-84f9-4e385cd43d51"
_MEMBER = f"sc08-exp-c1-{_UUID}"
_TEMPLATE_PARTITION = "__consumer_offsets-4)"


def ephemeral_name(i: int) -> str:
    return f"console-consumer-{i:07d}"


def steady_name(i: int) -> str:
    return f"steady-app-{i:04d}"


def _uuid(n: int) -> str:
    """A UUID-shaped string of the template's length, unique per n."""
    h = f"{n:032x}"[-32:]
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


@dataclass
class _Template:
    """sc08's lines (text after the header, with {group}, {member}, {part}, {g0}/{g1}/{g2}
    placeholders) and records."""
    join_lines: list[str] = field(default_factory=list)     # preparing (new member), stabilized, assignment
    leave_lines: list[str] = field(default_factory=list)    # has left, preparing (LeaveGroup), now empty
    dead_line: str = ""
    stable_value: bytes = b""       # GroupMetadata, generation 1, one member
    empty_value: bytes = b""        # GroupMetadata, generation 2, no member
    group_key: bytes = b""
    commit_key: bytes = b""         # offset commit key of the template's first committed partition
    commit_value: bytes = b""
    join_ms: list[int] = field(default_factory=list)       # each join line's time from the join's start
    stable_ms: int = 0
    commit_ms: int = 0
    leave_ms: list[int] = field(default_factory=list)
    empty_ms: int = 0


def _placeholders(text: str) -> str:
    text = text.replace("{", "{{").replace("}", "}}")
    text = text.replace(TEMPLATE, "{group}").replace(_MEMBER, "{member}")
    text = text.replace(_TEMPLATE_PARTITION, "__consumer_offsets-{part})")
    return re.sub(r"generation (\d)\b", lambda m: "generation {g" + m.group(1) + "}", text)


def load_template() -> _Template:
    import base64
    import json
    from datetime import datetime, timezone
    t = _Template()
    lines = []
    for path in sorted(CAPTURE.glob("broker*-server.log")):
        for line in path.read_text().splitlines():
            if f"group {TEMPLATE} " in line or f"Group {TEMPLATE} " in line:
                ts = datetime.strptime(line[1:24], LOG4J).replace(tzinfo=timezone.utc)
                lines.append((int(ts.timestamp() * 1000), line[26:]))
    lines.sort()
    records = []
    for line in (CAPTURE / "offsets-topic.jsonl").read_text().splitlines():
        o = json.loads(line)
        key = base64.b64decode(o["key_b64"])
        if key[4:4 + struct.unpack_from(">h", key, 2)[0]] == TEMPLATE.encode():
            value = None if o["value_b64"] is None else base64.b64decode(o["value_b64"])
            records.append((o["timestamp"], key, value))
    records.sort(key=lambda r: r[0])
    start = lines[0][0]
    assert len(lines) == 7 and "transitioned to Dead" in lines[6][1], lines
    t.join_lines = [_placeholders(text) for _, text in lines[:3]]
    t.join_ms = [ts - start for ts, _ in lines[:3]]
    t.leave_lines = [_placeholders(text) for _, text in lines[3:6]]
    t.leave_ms = [ts - start for ts, _ in lines[3:6]]
    t.dead_line = _placeholders(lines[6][1])
    metadata = [(ts, k, v) for ts, k, v in records if struct.unpack_from(">h", k, 0)[0] == 2 and v is not None]
    (t.stable_ms, t.group_key, t.stable_value), (t.empty_ms, _, t.empty_value) = metadata
    t.stable_ms -= start
    t.empty_ms -= start
    commit = next((ts, k, v) for ts, k, v in records if struct.unpack_from(">h", k, 0)[0] in (0, 1) and v)
    t.commit_ms, t.commit_key, t.commit_value = commit[0] - start, commit[1], commit[2]
    return t


def _metadata(value: bytes, generation: int, ts_ms: int, member_uuid: str | None = None) -> bytes:
    """A GroupMetadata value (v3) with its generation and current_state_timestamp set and the
    member id's UUID replaced (same length)."""
    pos = 2
    pos += 2 + struct.unpack_from(">h", value, pos)[0]         # protocol_type
    out = bytearray(value)
    struct.pack_into(">i", out, pos, generation)
    pos += 4
    for _ in range(2):                                          # protocol, leader (nullable)
        n = struct.unpack_from(">h", value, pos)[0]
        pos += 2 + max(n, 0)
    struct.pack_into(">q", out, pos, ts_ms)
    if member_uuid is not None:
        out = bytearray(bytes(out).replace(_UUID.encode(), member_uuid.encode()))
    return bytes(out)


def _commit(t: _Template, offset: int, ts_ms: int) -> bytes:
    v = t.commit_value
    return v[:2] + struct.pack(">q", offset) + v[10:16] + struct.pack(">q", ts_ms)


class SoakTraffic:
    """The month's traffic (module docstring). Deterministic for its arguments."""

    RESTART_AT_MS = 2 * 3_600_000       # the daily rolling restart starts at 02:00
    RESTART_SPAN_MS = 3_600_000         # ... and takes an hour over the fleet
    REJOIN_MS = 10_000

    def __init__(self, days: int, ephemeral: int, steady: int, retention_days: float, start_ms: int,
                 seed: int = 50, commit_minutes: float = 10.0, commit_partitions: int = 1) -> None:
        self.days, self.ephemeral, self.steady = days, ephemeral, steady
        self.retention_ms = int(retention_days * DAY_MS)
        self.start_ms, self.seed = start_ms, seed
        self.commit_ms = int(commit_minutes * 60_000)
        self.commit_partitions = commit_partitions
        self.t = load_template()
        self.life_ms = max(self.t.leave_ms + [self.t.empty_ms]) + 1
        base, extra = divmod(ephemeral, days)
        self.per_day = [base + (1 if d < extra else 0) for d in range(days)]
        self.first_index = [sum(self.per_day[:d]) for d in range(days)]
        self._keys: dict[str, tuple[int, bytes, bytes, list[bytes]]] = {}

    # ------------------------------------------------------------------ per group
    def _keys_of(self, name: str) -> tuple[int, bytes, bytes, list[bytes]]:
        """(partition, GroupMetadata key, offset commit key, [commit keys per partition])."""
        got = self._keys.get(name) if name.startswith("steady-") else None
        if got is not None:
            return got
        raw = name.encode()
        commit = _rename_key(self.t.commit_key, raw)
        got = (_partition(raw), _rename_key(self.t.group_key, raw), commit,
               [commit[:-4] + struct.pack(">i", p) for p in range(self.commit_partitions)])
        if name.startswith("steady-"):
            self._keys[name] = got
        return got

    def _join(self, name: str, at: int, member: str, g_old: int, uuid: str, out: list) -> None:
        t = self.t
        part, gkey, _, ckeys = self._keys_of(name)
        fmt = {"group": name, "member": member, "part": part, "g0": g_old, "g1": g_old + 1, "g2": g_old + 2}
        for ms, line in zip(t.join_ms, t.join_lines):
            out.append((at + ms, "log", line.format(**fmt)))
        out.append((at + t.stable_ms, "offsets", part, gkey, _metadata(t.stable_value, g_old + 1,
                                                                       at + t.join_ms[1], uuid)))

    def _leave(self, name: str, at: int, member: str, generation: int, out: list) -> None:
        """Leave lines and the Empty GroupMetadata; `generation`: the one the member leaves."""
        t = self.t
        part, gkey, _, _ = self._keys_of(name)
        fmt = {"group": name, "member": member, "part": part, "g0": generation - 1, "g1": generation,
               "g2": generation + 1}
        for ms, line in zip(t.leave_ms, t.leave_lines):
            out.append((at + ms - t.leave_ms[0], "log", line.format(**fmt)))
        out.append((at + t.empty_ms - t.leave_ms[0], "offsets", part, gkey,
                    _metadata(t.empty_value, generation + 1, at + t.empty_ms - t.leave_ms[0])))

    def _ephemeral_start(self, i: int) -> int:
        """Group i's join, ms from the month's start (seeded within its day, the last minute left
        free so that its whole life is within the day)."""
        day = bisect.bisect_right(self.first_index, i) - 1
        mixed = ((i + 1) * 0x9E3779B97F4A7C15 + self.seed * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
        return day * DAY_MS + (mixed >> 20) % (DAY_MS - 60_000)

    def ephemeral_rows(self, i: int) -> tuple[list, list]:
        """(join-to-leave rows, expiry rows) of ephemeral group i, times from the month's start."""
        t, name, uuid = self.t, ephemeral_name(i), _uuid(i)
        member = f"sc08-exp-c1-{uuid}"
        at = self._ephemeral_start(i)
        part, gkey, ckey, _ = self._keys_of(name)
        life: list = []
        self._join(name, at, member, 0, uuid, life)
        life.append((at + t.commit_ms, "offsets", part, ckey, _commit(t, 100, at + t.commit_ms)))
        self._leave(name, at + t.leave_ms[0], member, 1, life)
        return life, self._expiry_rows(i, at + t.empty_ms + self.retention_ms)

    def _expiry_rows(self, i: int, gone: int) -> list:
        """The offsets expiry of ephemeral group i at `gone`: the offset tombstone, the group's
        GroupMetadata tombstone, the broker's "transitioned to Dead" line."""
        name = ephemeral_name(i)
        part, gkey, ckey, _ = self._keys_of(name)
        fmt = {"group": name, "member": "", "part": part, "g0": 1, "g1": 1, "g2": 2}
        return [(gone, "offsets", part, ckey, None), (gone, "offsets", part, gkey, None),
                (gone, "log", self.t.dead_line.format(**fmt))]

    def ephemeral_gone_ms(self, i: int) -> int:
        """When group i's expiry (its Dead) is, ms from the month's start."""
        return self._ephemeral_start(i) + self.t.empty_ms + self.retention_ms

    # ------------------------------------------------------------------ days
    def _steady_restart_ms(self, i: int) -> int:
        return self.RESTART_AT_MS + i * self.RESTART_SPAN_MS // max(self.steady, 1)

    def steady_rebalances_by(self, days_done: int) -> int:
        """Rebalances of each steady group once `days_done` days are applied."""
        return 1 + 2 * max(days_done - 1, 0) if days_done else 0

    def _steady_day(self, d: int, out: list, commits_until: int | None = None) -> None:
        t = self.t
        day0 = d * DAY_MS
        for i in range(self.steady):
            name = steady_name(i)
            part, _, _, ckeys = self._keys_of(name)
            phase = (i * 7_919) % self.commit_ms if self.commit_ms else 0
            if commits_until is None:
                if d == 0:
                    join = i * 100
                    self._join(name, join, f"sc08-exp-c1-{_uuid(10**9 + i)}", 0, _uuid(10**9 + i), out)
                    busy = (join, join + t.stable_ms + 1_000)
                else:
                    restart = day0 + self._steady_restart_ms(i)
                    old = f"sc08-exp-c1-{_uuid(10**9 + (d - 1) * 10_000 + i)}"
                    new_uuid = _uuid(10**9 + d * 10_000 + i)
                    generation = 2 * d - 1          # day 0 joined generation 1; each restart adds 2
                    self._leave(name, restart, old, generation, out)
                    self._join(name, restart + self.REJOIN_MS, f"sc08-exp-c1-{new_uuid}", generation + 1,
                               new_uuid, out)
                    busy = (restart - 1_000, restart + self.REJOIN_MS + t.stable_ms + 1_000)
                end = day0 + DAY_MS
            else:
                busy, end = (0, 0), min(day0 + commits_until, day0 + DAY_MS)
            if not self.commit_ms:
                continue
            for ms in range(day0 + phase, end, self.commit_ms):
                if busy[0] <= ms <= busy[1]:
                    continue
                offset = 100 * (ms // self.commit_ms + 1)
                value = _commit(t, offset, ms)
                out.extend((ms, "offsets", part, key, value) for key in ckeys)

    def day(self, d: int) -> list:
        """Day d's rows in time order, times in ms since the epoch (module docstring)."""
        lo, hi = d * DAY_MS, (d + 1) * DAY_MS
        rows: list = []
        if d < self.days:
            for i in range(self.first_index[d], self.first_index[d] + self.per_day[d]):
                life, _ = self.ephemeral_rows(i)
                rows += life
            self._steady_day(d, rows)
        else:
            self._steady_day(d, rows, commits_until=3_600_000)
        # Expiries falling on this day (retention in whole or part days, from any earlier day); the
        # tail has none.
        for e in range(self.days if d < self.days else 0):
            first_gone = e * DAY_MS + self.t.empty_ms + self.retention_ms
            if first_gone >= hi or first_gone + DAY_MS <= lo:
                continue
            for i in range(self.first_index[e], self.first_index[e] + self.per_day[e]):
                gone = self.ephemeral_gone_ms(i)
                if lo <= gone < hi:
                    rows += self._expiry_rows(i, gone)
        rows.sort(key=lambda r: r[0])        # stable: a group's rows keep their order within a ms
        base = self.start_ms
        return [(ms + base, *rest) for ms, *rest in rows]

    def tail(self) -> list:
        """An hour of steady commits after the last day (day `days`)."""
        return self.day(self.days)

    def expired_by(self, through_ms: int) -> int:
        """Ephemeral groups whose expiry is at or before `through_ms` (ms since the epoch)."""
        return sum(1 for i in range(self.ephemeral) if self.start_ms + self.ephemeral_gone_ms(i) <= through_ms)
