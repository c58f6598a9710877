"""Consumer lag per group and topic from two halves (pure Python; docs/metrics.md, "Consumer lag").

- The committed offsets: every offset commit the monitor decodes from `__consumer_offsets` (the
  stateful step sends each group's newest per partition of a batch to the driver:
  OutputKind.COMMITTED_OFFSETS); the newest per partition by commit time wins.
- The end offsets: the partitions' latest offsets, sampled every `lag.sample_seconds` by the
  driver's sampler (streaming/app/lag_sampler.py). Each partition keeps a short history of its
  samples: the distinct end offsets, each with the first and last time it was seen.

Lag in records is end - committed (at least 0), summed over a topic's partitions. Lag in
seconds is how long ago the committed offset was the partition's end offset (Burrow's view of a
consumer: how far behind the head it is in time), interpolated between the samples around it:
the end was `o1` until `last1` and `o2` from `first2`, so the record after the committed offset
arrived in between. 0 when caught up; the most behind partition's figure per topic. A committed
offset older than the history is placed by the history's mean rate (an estimate; with no
records written over the history, the oldest sample's time: a lower bound).

A topic's lag is unknown (no figure, the reason said instead) when one of its partitions has no
sample yet, or its newest sample is older than STALE_SAMPLES sampling intervals (the broker did
not answer since, the topic was deleted): never a stale figure shown as current.

The monitor is itself a consumer of `__consumer_offsets`, and the book keeps its lag there too
(`run`: the collector notes its read positions after each batch, and the sampler samples those
partitions): `commits_read_through` says until when every commit of a group has been read, which
is what a silence can be measured to (state/at_risk.py). Its own reading stops when the leader of
the group's offsets partition dies, which is also when the group's coordinator dies: a silence
then is the monitor's, not the members'.
"""
from __future__ import annotations

import threading
from bisect import bisect_left, bisect_right
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# Distinct end offsets kept per partition (an idle partition keeps one, however long it idles).
HISTORY_SAMPLES = 16
# A partition's newest end offset older than this many sampling intervals makes its lag unknown.
STALE_SAMPLES = 3

# Why a topic's lag is unknown (rebalance_monitor_group_lag_unknown, ..._lag_sample_errors_total).
REASON_NOT_SAMPLED = "not_sampled_yet"          # the partition is newer than the last sample
REASON_TOPIC_MISSING = "topic_missing"          # the cluster has no such topic (deleted)
REASON_PARTITION_MISSING = "partition_missing"  # the topic has fewer partitions
REASON_BROKER = "broker_unavailable"            # no answer in time (broker down, no leader)
REASON_NOT_AUTHORIZED = "not_authorized"        # ListOffsets or Metadata refused (ACLs)
REASON_ERROR = "list_offsets_error"             # any other error of the request
REASON_STALE = "stale"                          # last sample too old (none succeeded lately)
SAMPLE_ERROR_REASONS = (REASON_TOPIC_MISSING, REASON_PARTITION_MISSING, REASON_BROKER, REASON_NOT_AUTHORIZED,
                        REASON_ERROR)
UNKNOWN_REASONS = (REASON_NOT_SAMPLED, *SAMPLE_ERROR_REASONS, REASON_STALE)
# Why LagBook.ends_at has no end offset at a moment (besides a sampling error).
END_LATER = "not_sampled_since"                 # no sample at or after that moment yet
END_BEFORE_HISTORY = "before_history"           # older than the partition's kept samples

Partition = tuple[str, int]                       # (topic, partition)


@dataclass
class EndSample:
    """One distinct end offset of a partition, and the first and last wall-clock time (Unix
    seconds) a sample saw it."""
    offset: int
    first_s: float
    last_s: float


def _offset_of(sample: EndSample) -> int:
    return sample.offset


def _last_s_of(sample: EndSample) -> float:
    return sample.last_s


class EndHistory:
    """The last `keep` distinct end offsets of one partition, oldest first (None: all of them, a
    replay's file of samples, which bounds them)."""
    __slots__ = ("error", "error_s", "samples")

    def __init__(self, keep: int | None = HISTORY_SAMPLES) -> None:
        # a list when unbounded: bisect looks into it in O(log n), a deque's middle costs O(n)
        self.samples: deque[EndSample] | list[EndSample] = deque(maxlen=keep) if keep is not None else []
        self.error: str | None = None        # the reason of the last failed sample, if it failed
        self.error_s: float | None = None

    def add(self, offset: int, at_s: float) -> None:
        self.error = self.error_s = None
        last = self.samples[-1] if self.samples else None
        if last is not None and last.offset == offset:
            last.last_s = max(last.last_s, at_s)
        elif last is not None and offset < last.offset:
            # the partition went back (deleted and created again, truncated): a new history
            self.samples.clear()
            self.samples.append(EndSample(offset, at_s, at_s))
        else:
            self.samples.append(EndSample(offset, at_s, at_s))

    def failed(self, reason: str, at_s: float) -> None:
        self.error, self.error_s = reason, at_s

    @property
    def newest(self) -> EndSample | None:
        return self.samples[-1] if self.samples else None

    def written_at(self, committed: int) -> float | None:
        """When the end offset was `committed` for the last time (Unix seconds), interpolated;
        None when caught up (committed at or past the newest end)."""
        samples = self.samples
        if not samples or committed >= samples[-1].offset:
            return None
        i = bisect_right(samples, committed, key=_offset_of)     # the first sample past it
        if i == 0:
            return self._before_history(committed)
        previous, sample = samples[i - 1], samples[i]
        share = (committed - previous.offset) / (sample.offset - previous.offset)
        return previous.last_s + share * (sample.first_s - previous.last_s)

    def offset_at(self, at_s: float) -> int | None:
        """The end offset at `at_s` (Unix seconds), interpolated between the samples around it;
        None when no sample is that old or none is that new yet."""
        samples = self.samples
        if not samples or at_s < samples[0].first_s or at_s > samples[-1].last_s:
            return None
        i = bisect_left(samples, at_s, key=_last_s_of)           # the first sample seen at or after it
        sample = samples[i]
        if at_s >= sample.first_s or i == 0:
            return sample.offset
        previous = samples[i - 1]
        share = (at_s - previous.last_s) / (sample.first_s - previous.last_s)
        return round(previous.offset + share * (sample.offset - previous.offset))

    def _before_history(self, committed: int) -> float:
        oldest, newest = self.samples[0], self.samples[-1]
        seconds = newest.first_s - oldest.first_s
        if seconds <= 0 or newest.offset <= oldest.offset:
            return oldest.first_s
        rate = (newest.offset - oldest.offset) / seconds
        return oldest.first_s - (oldest.offset - committed) / rate


@lru_cache(maxsize=1 << 16)
def offsets_partition(group: str, partitions: int) -> int:
    """The `__consumer_offsets` partition that holds a group's records (and whose leader is its
    coordinator): Kafka's `Utils.abs(groupId.hashCode()) % partitions`, Java's String hash over
    UTF-16 code units."""
    data = group.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def read_through_at(history: EndHistory | None, position: int) -> float | None:
    """Until when a reader at `position` of a partition has surely read all of it (Unix seconds):
    the last time a sample saw an end offset at or below `position`. None when no kept sample did
    (a position older than the history, as the re-run batch of a restart leaves it): an estimate,
    such as written_at's for a time lag, could put it too late, and a silence measured to a
    moment not yet read is a false flag."""
    if history is None:
        return None
    for sample in reversed(history.samples):
        if sample.offset <= position:
            return sample.last_s
    return None


@dataclass(frozen=True)
class TopicLag:
    """One group's lag on one topic: records and seconds, or why it is unknown."""
    cluster: str
    group: str
    topic: str
    records: int | None
    seconds: float | None
    unknown: str | None = None


class LagBook:
    """The committed offsets of each group and the end-offset history of each partition they
    committed to. Thread-safe: the batch thread notes commits, the sampler notes end offsets,
    the scrape reads both."""

    def __init__(self, sample_seconds: float, read_cluster: str | None = None) -> None:
        self.sample_seconds = sample_seconds
        # `run`: the cluster whose offsets topic the monitor reads and notes its positions in
        # (note_read); None: no positions, commits are taken as read through any moment asked.
        self.read_cluster = read_cluster
        self._lock = threading.Lock()
        # The monitor's own read positions in the offsets topic (topic -> partition -> next offset),
        # and the newest time its source said it had read every partition to its end (a caught-up marker).
        self._read: dict[str, dict[int, int]] | None = None
        self._read_tick_s: float | None = None
        # Per cluster, each topic's name by its id (the sampler's metadata): a KIP-848 member's
        # assignment names its topics by id, its commits by name.
        self._topic_names: dict[str, dict[str, str]] = {}
        # (cluster, group) -> (topic, partition) -> (committed offset, commit time ms)
        self._committed: dict[tuple[str, str], dict[Partition, tuple[int, int]]] = {}
        # ... and the commit each newest one replaced: the offset before a rebalance's stop, when
        # a commit on revoke came after it (committed_before)
        self._prior: dict[tuple[str, str], dict[Partition, tuple[int, int]]] = {}
        self._ends: dict[tuple[str, Partition], EndHistory] = {}
        # What each sampling round asks, kept between rounds (the set changes seldom: a round
        # of 100,000 partitions should not sort them again): how many groups commit to each
        # (cluster, partition), the sorted partitions of each cluster (made again when that set
        # changes) and the partitions of each cluster's last round.
        self._groups_of: dict[tuple[str, Partition], int] = {}
        self._sorted: dict[str, list[Partition]] = {}
        self._asked: dict[str, list[Partition]] = {}

    def _add_partition(self, cluster: str, tp: Partition) -> None:
        """A group commits to `tp` for the first time (the lock held)."""
        key = (cluster, tp)
        n = self._groups_of.get(key, 0)
        self._groups_of[key] = n + 1
        if n == 0:
            self._sorted.pop(cluster, None)

    def _drop_partition(self, cluster: str, tp: Partition) -> None:
        """A group no longer commits to `tp` (the lock held)."""
        key = (cluster, tp)
        n = self._groups_of.get(key, 0) - 1
        if n > 0:
            self._groups_of[key] = n
        else:
            self._groups_of.pop(key, None)
            self._sorted.pop(cluster, None)

    def note_commits(self, record: dict[str, Any]) -> None:
        """A COMMITTED_OFFSETS record: {"cluster", "group", "offsets": [[topic, partition,
        offset, commit_ts_ms], ...]}, offset null for a deleted offset (its tombstone)."""
        key = (record["cluster"], record["group"])
        with self._lock:
            book = self._committed.setdefault(key, {})
            prior = self._prior.setdefault(key, {})
            for topic, partition, offset, commit_ms in record.get("offsets") or ():
                tp = (str(topic), int(partition))
                if offset is None:
                    prior.pop(tp, None)
                    if book.pop(tp, None) is not None:
                        self._drop_partition(key[0], tp)
                    continue
                old = book.get(tp)
                new = (int(offset), int(commit_ms or 0))
                if old is None:
                    book[tp] = new
                    self._add_partition(key[0], tp)
                elif (new[1], new[0]) > (old[1], old[0]):
                    book[tp] = new
                    prior[tp] = old
            if not book:
                del self._committed[key]
            if not prior:
                del self._prior[key]

    def has_group(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return key in self._committed

    def seed(self, key: tuple[str, str], offsets: dict[Partition, int]) -> None:
        """Committed offsets fetched from the cluster (OffsetFetch) for a group known before a
        restart, whose commits the query will not read again: kept where no decoded commit is,
        with commit time 0, so that any decoded commit wins."""
        with self._lock:
            book = self._committed.setdefault(key, {})
            for tp, offset in offsets.items():
                name = (str(tp[0]), int(tp[1]))
                if name not in book:
                    book[name] = (int(offset), 0)
                    self._add_partition(key[0], name)
            if not book:
                del self._committed[key]

    def forget_group(self, key: tuple[str, str]) -> None:
        """A group the monitor forgot (Dead past its retention): its lag goes with it."""
        with self._lock:
            self._prior.pop(key, None)
            for tp in self._committed.pop(key, None) or ():
                self._drop_partition(key[0], tp)

    def partitions(self, cluster: str) -> list[Partition]:
        """The partitions some group of `cluster` committed to, and those of the offsets topic the
        monitor reads, sorted: what the sampler asks about."""
        with self._lock:
            found = self._sorted.get(cluster)
            if found is None:
                asked = {tp for c, tp in self._groups_of if c == cluster}
                if cluster == self.read_cluster and self._read:
                    asked.update((topic, p) for topic, parts in self._read.items() for p in parts)
                found = self._sorted[cluster] = sorted(asked)
            return list(found)

    def note_read(self, by_topic: dict[str, dict[int, int]], tick_s: float | None) -> None:
        """After a batch: the monitor's positions in the offsets topic ({topic: {partition: next
        offset}}), and its source's caught-up marker if the batch had one (every partition read to
        its end at that moment)."""
        if self.read_cluster is None:
            return
        with self._lock:
            old = self._read or {}
            if {t: set(p) for t, p in old.items()} != {t: set(p) for t, p in by_topic.items()}:
                self._sorted.pop(self.read_cluster, None)
            self._read = {**old, **by_topic}
            if tick_s is not None:
                self._read_tick_s = max(self._read_tick_s or tick_s, tick_s)

    def note_topic_names(self, cluster: str, names: dict[str, str]) -> None:
        """The topics' names by id, as of the sampler's last metadata answer (replaced whole)."""
        self._topic_names[cluster] = dict(names)

    def topic_names(self, cluster: str) -> dict[str, str]:
        """{topic id: name} of `cluster` (the sampler's last metadata answer); not to be changed."""
        return self._topic_names.get(cluster) or {}

    def commits_read_through(self, key: tuple[str, str], now_s: float) -> float | None:
        """Until when the monitor has read every commit of the group (Unix seconds, at most
        `now_s`): the later of its source's last caught-up marker and its position in the group's
        offsets partition against that partition's sampled end offsets. None when neither is
        known yet (nothing can be said of a silence); `now_s` when the book notes no positions."""
        if self.read_cluster is None:
            return now_s
        if key[0] != self.read_cluster:
            return None
        with self._lock:
            read, through = self._read, self._read_tick_s
            if read:
                sampled: list[float | None] = []
                for topic, parts in read.items():
                    p = offsets_partition(key[1], len(parts))
                    position = parts.get(p)
                    sampled.append(None if position is None
                                   else read_through_at(self._ends.get((key[0], (topic, p))), position))
                if sampled and all(t is not None for t in sampled):
                    low = min(t for t in sampled if t is not None)
                    through = low if through is None else max(through, low)
        return None if through is None else min(now_s, through)

    def note_ends(self, cluster: str, asked: list[Partition], ends: dict[Partition, int], errors: dict[Partition, str],
                  at_s: float) -> None:
        """One sampling round of the partitions `asked`: the end offsets it got, and the reason for
        each it did not. The history of a partition no group commits to any more goes (looked for
        when the partitions asked differ from the last round's)."""
        with self._lock:
            if asked != self._asked.get(cluster):
                wanted = set(asked)
                for key in [k for k in self._ends if k[0] == cluster and k[1] not in wanted]:
                    del self._ends[key]
                self._asked[cluster] = list(asked)
            histories = self._ends
            for tp, offset in ends.items():
                history = histories.get((cluster, tp))
                if history is None:
                    history = histories[(cluster, tp)] = EndHistory()
                history.add(int(offset), at_s)
            for tp, reason in errors.items():
                history = histories.get((cluster, tp))
                if history is None:
                    history = histories[(cluster, tp)] = EndHistory()
                history.failed(reason, at_s)

    def load_history(self, cluster: str, samples: dict[Partition, list[tuple[float, int]]]) -> None:
        """A replay's end-offset samples ((Unix seconds, offset) per partition, oldest first): each
        partition's whole history, not the last HISTORY_SAMPLES (the file bounds it)."""
        with self._lock:
            for tp, points in samples.items():
                history = self._ends[(cluster, tp)] = EndHistory(keep=None)
                for at_s, offset in points:
                    history.add(offset, at_s)

    def committed_of(self, key: tuple[str, str]) -> dict[Partition, tuple[int, int]]:
        """A copy of the group's (committed offset, commit time ms) per partition."""
        with self._lock:
            return dict(self._committed.get(key) or {})

    def committed_before(self, key: tuple[str, str], asks: list[tuple[Partition, int]]
                         ) -> list[tuple[int, int] | None]:
        """The group's (committed offset, commit time ms) of each (partition, time ms) asked: the
        newest of its last two commits made at or before that time, None when both came later
        (or none is known)."""
        out: list[tuple[int, int] | None] = []
        with self._lock:
            book, prior = self._committed.get(key) or {}, self._prior.get(key) or {}
            for tp, at_ms in asks:
                out.append(next((e for e in (book.get(tp), prior.get(tp)) if e is not None and e[1] <= at_ms),
                                None))
        return out

    def committed_and_fresh_ends(self, key: tuple[str, str], now_s: float
                                 ) -> tuple[dict[Partition, tuple[int, int]], dict[Partition, int]]:
        """committed_of(key) and the fresh_end of each of its partitions that has one, under one
        lock (a scrape asks this of every group)."""
        stale_before = now_s - STALE_SAMPLES * self.sample_seconds
        ends: dict[Partition, int] = {}
        with self._lock:
            committed = dict(self._committed.get(key) or {})
            for tp in committed:
                history = self._ends.get((key[0], tp))
                if history is not None and history.samples:
                    newest = history.samples[-1]
                    if newest.last_s >= stale_before:
                        ends[tp] = newest.offset
        return committed, ends

    def fresh_end(self, cluster: str, tp: Partition, now_s: float) -> int | None:
        """The partition's newest end offset, or None when it has none within STALE_SAMPLES
        sampling intervals (what is not current is no evidence)."""
        with self._lock:
            history = self._ends.get((cluster, tp))
            newest = history.newest if history is not None else None
        if newest is None or newest.last_s < now_s - STALE_SAMPLES * self.sample_seconds:
            return None
        return newest.offset

    def ends_at(self, cluster: str, asks: list[tuple[Partition, float]]) -> list[int | str]:
        """The end offset of each (partition, Unix seconds) asked, interpolated between the samples
        around it, or why there is none: END_LATER (no sample that new yet), END_BEFORE_HISTORY (the
        history does not reach back that far), or the partition's sampling error (REASON_*)."""
        out: list[int | str] = []
        with self._lock:
            for tp, at_s in asks:
                history = self._ends.get((cluster, tp))
                if history is None or not history.samples:
                    out.append(history.error if history is not None and history.error else REASON_NOT_SAMPLED)
                    continue
                offset = history.offset_at(at_s)
                if offset is not None:
                    out.append(offset)
                elif at_s > history.samples[-1].last_s:
                    out.append(END_LATER)
                else:
                    out.append(END_BEFORE_HISTORY)
        return out

    def lags(self, now_s: float) -> list[TopicLag]:
        """Every group's lag per topic at `now_s` (Unix seconds)."""
        stale_before = now_s - STALE_SAMPLES * self.sample_seconds
        out: list[TopicLag] = []
        with self._lock:
            for (cluster, group), book in sorted(self._committed.items()):
                by_topic: dict[str, list[tuple[int, EndHistory | None]]] = {}
                for tp, (offset, _) in book.items():
                    by_topic.setdefault(tp[0], []).append((offset, self._ends.get((cluster, tp))))
                for topic, partitions in sorted(by_topic.items()):
                    out.append(_topic_lag(cluster, group, topic, partitions, now_s, stale_before))
        return out

    def partition_lags(self, key: tuple[str, str], now_s: float) -> list[tuple[Partition, int, float]]:
        """One group's lag per partition (records, seconds) at `now_s`, sorted, for the partitions
        with a fresh end offset (the others' topics are unknown: lags says why)."""
        stale_before = now_s - STALE_SAMPLES * self.sample_seconds
        out: list[tuple[Partition, int, float]] = []
        with self._lock:
            for tp, (offset, _) in sorted((self._committed.get(key) or {}).items()):
                history = self._ends.get((key[0], tp))
                if history is not None and history.samples and history.samples[-1].last_s >= stale_before:
                    out.append((tp, *_partition_lag(offset, history, now_s)))
        return out

    def group_view(self, key: tuple[str, str], now_s: float
                   ) -> tuple[list[TopicLag], dict[Partition, tuple[int, int]], dict[Partition, int]]:
        """One group's lag per topic (as lags), and committed_and_fresh_ends, in one look at each
        partition: what a scrape needs of every group."""
        cluster, group = key
        stale_before = now_s - STALE_SAMPLES * self.sample_seconds
        ends: dict[Partition, int] = {}
        by_topic: dict[str, list[tuple[int, EndHistory | None]]] = {}
        with self._lock:
            committed = dict(self._committed.get(key) or {})
            for tp, (offset, _) in committed.items():
                history = self._ends.get((cluster, tp))
                by_topic.setdefault(tp[0], []).append((offset, history))
                if history is not None and history.samples:
                    newest = history.samples[-1]
                    if newest.last_s >= stale_before:
                        ends[tp] = newest.offset
            lags = [_topic_lag(cluster, group, topic, partitions, now_s, stale_before)
                    for topic, partitions in sorted(by_topic.items())]
        return lags, committed, ends


def _partition_lag(offset: int, history: EndHistory, now_s: float) -> tuple[int, float]:
    """A partition's lag (records, seconds) from its committed offset and fresh end-offset history."""
    newest = history.samples[-1]
    if offset >= newest.offset:
        return 0, 0.0
    written = history.written_at(offset)
    return newest.offset - offset, 0.0 if written is None else max(0.0, now_s - written)


def _topic_lag(cluster: str, group: str, topic: str, partitions: list[tuple[int, EndHistory | None]], now_s: float,
               stale_before: float) -> TopicLag:
    """A topic's lag from each partition's committed offset and end-offset history (the book's lock held)."""
    records, seconds = 0, 0.0
    for committed, history in partitions:
        if history is None or not history.samples:
            reason = history.error if history is not None and history.error else REASON_NOT_SAMPLED
            return TopicLag(cluster, group, topic, None, None, reason)
        newest = history.samples[-1]
        if newest.last_s < stale_before:
            return TopicLag(cluster, group, topic, None, None, history.error or REASON_STALE)
        behind, behind_s = _partition_lag(committed, history, now_s)
        records += behind
        seconds = max(seconds, behind_s)
    return TopicLag(cluster, group, topic, records, seconds)
