"""The lag sampler's cost (`bench/cost --only lag_sampler`, issue 54): `run`'s lag sampler
(streaming/app/lag_sampler.py: LagSampler, KafkaEndOffsets) against a real Kafka 4.4 broker with
`--lag-topics` x `--lag-topic-partitions` partitions, and the scrape side (sinks/lag_gauges.py).

1. A KRaft broker of the bed (`--lag-brokers`, default 1; a larger heap than the bed's, group
   and index settings for many partitions) and the topics, created in batches; records produced
   to every `--lag-produce-every`-th partition, and a trickle to those during the rounds, so that
   end offsets are not all 0 and move.
2. A LagBook filled as the driver fills it: `--lag-groups` groups' COMMITTED_OFFSETS records
   (LagBook.note_commits), `--lag-group-partitions` partitions each, laid over the partitions in
   turn (10,000 groups of 10 cover 100,000 partitions once; with fewer partitions, groups share
   them). Each group's snapshot (Stable, 2 members) for the scrape's members-at-risk figure.
3. The real LagSampler thread (`run`'s loop at `lag.sample_seconds`, 10 s by default): after
   `--lag-warm-up` rounds, `--lag-rounds` rounds are measured. CPU time, not wall: of the sampler's
   thread and the threads its kafka-python client started (the IO thread decodes the responses),
   over the rounds' wall (N intervals). Each round's wall time. The broker's CPU over the same
   window is printed for information (not the monitor's).
4. The scrape: LagCollector.collect() (the lag families of /metrics) every `--lag-scrape-seconds`
   (15 s) during the rounds, its CPU time in this thread; at least one scrape. After each scrape
   the groups commit again (the same offsets, a new commit time), as a live fleet's would. Every group's every
   topic must have a lag figure (none unknown) at the last scrape, or the bench stops.

Figures: lag_sampler_cpu_cores (sampler thread + its client's threads), lag_round_seconds_p95,
lag_scrape_cpu_seconds (mean per scrape), lag_cpu_cores (the sampler's cores plus one scrape per
`--lag-scrape-seconds`), lag_within_ceiling (1 when lag_cpu_cores <= LAG_CEILING_CORES),
lag_partitions, lag_groups.

A broker keeps a file open per partition (its active segment): one broker takes at most its open
file limit (ulimit -Hn) less about 1,000 of them; the bench says so before it starts one that
cannot (more brokers, `--lag-brokers`, or fewer partitions).
"""
from __future__ import annotations

import os
import resource
import shutil
import threading
import time
from pathlib import Path
from typing import Any

CLUSTER = "bench"
LAG_CEILING_CORES = 0.1          # issue 54: at most 0.1 core at 10,000 groups and 100,000 partitions
# Open files a broker needs besides one per partition: jars, sockets, its own logs and checkpoints.
BROKER_FILES_BESIDES_PARTITIONS = 1_000
# CreateTopics records per request: the KRaft controller refuses an operation of more than 10,000.
CREATE_BATCH_PARTITIONS = 5_000
BROKER_HEAP = "-Xmx3g"
CONTROLLER_HEAP = "-Xmx1g"
# Many partitions on one broker: high-watermark and recovery-point checkpoints (a line per
# partition) less often, indexes small (they are mapped when a segment is first written).
MANY_PARTITIONS = {
    "replica.high.watermark.checkpoint.interval.ms": 60_000,
    "log.flush.offset.checkpoint.interval.ms": 300_000,
    "log.flush.start.offset.checkpoint.interval.ms": 300_000,
    "log.index.size.max.bytes": 65_536,
    "log.segment.bytes": 16 * 1024 * 1024,
    "num.io.threads": 4,
}


def topic_name(t: int) -> str:
    return f"lag-bench-{t:04d}"


def group_name(g: int) -> str:
    return f"lag-bench-group-{g:05d}"


def layout(topics: int, per_topic: int, groups: int, per_group: int) -> list[list[tuple[str, int]]]:
    """Each group's partitions: `per_group` consecutive ones of all topics' partitions in turn,
    wrapping around (groups share partitions when groups x per_group exceeds them)."""
    total = topics * per_topic
    return [[(topic_name(i // per_topic), i % per_topic) for i in ((g * per_group + j) % total
                                                                   for j in range(per_group))]
            for g in range(groups)]


def fill_book(book: Any, groups: list[list[tuple[str, int]]], ends: dict[tuple[str, int], int], now_ms: int) -> None:
    """COMMITTED_OFFSETS records as the driver gets them: each group's commit of its partitions,
    every other partition behind its end by up to 5 records (lag), the others caught up."""
    for g, partitions in enumerate(groups):
        offsets = []
        for k, (topic, partition) in enumerate(partitions):
            end = ends.get((topic, partition), 0)
            offsets.append([topic, partition, max(0, end - (k % 2) * (1 + g % 5)), now_ms - 1_000])
        book.note_commits({"cluster": CLUSTER, "group": group_name(g), "offsets": offsets})


def snapshots(groups: list[list[tuple[str, int]]], now_ms: int) -> list[dict[str, Any]]:
    """A snapshot per group, Stable for an hour, its partitions split between 2 members
    (max.poll.interval.ms 300 s), as the scrape's members-at-risk figure reads them."""
    out = []
    for g, partitions in enumerate(groups):
        names = [f"{t}:{p}" for t, p in partitions]
        members = [{"member_id": f"{group_name(g)}-m{m}", "client_id": f"c{m}", "rebalance_timeout_ms": 300_000,
                    "partitions": names[m::2]} for m in range(2)]
        out.append({"cluster": CLUSTER, "group": group_name(g), "state": "Stable", "state_since_ms": now_ms - 3_600_000,
                    "members": members})
    return out


def check_files(partitions: int, brokers: int) -> str | None:
    """Why `brokers` brokers cannot hold `partitions` (each keeps a file open per partition), or None."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = hard if hard != resource.RLIM_INFINITY else None
    per_broker = -(-partitions // brokers)
    if limit is not None and per_broker + BROKER_FILES_BESIDES_PARTITIONS > limit:
        most = (limit - BROKER_FILES_BESIDES_PARTITIONS) * brokers
        return (f"{partitions:,} partitions on {brokers} broker(s) need about {per_broker:,} open files per broker "
                f"(one per partition's active segment) and this machine allows {limit:,} a process (ulimit -Hn; "
                f"raising it needs CAP_SYS_RESOURCE): at most about {most:,} partitions on {brokers} broker(s); "
                f"use --lag-brokers {-(-partitions // (limit - BROKER_FILES_BESIDES_PARTITIONS))} or fewer "
                f"--lag-topics")
    return None


def many_partitions_cluster(version: str, brokers: int, workdir: Path) -> Any:
    """The bed's KafkaCluster with larger heaps (later -Xmx wins) and MANY_PARTITIONS."""
    from testbed.bed import KafkaCluster
    from testbed.bed.cluster import JAVA_OPTS

    class ManyPartitions(KafkaCluster):
        def _java(self, main: str, args: list[str], node: Any) -> list[str]:
            cmd = super()._java(main, args, node)
            if main != "kafka.Kafka":          # the storage tool keeps the bed's heap
                return cmd
            at = 1 + len(JAVA_OPTS)              # after the bed's -Xmx: the last one wins
            return [*cmd[:at], BROKER_HEAP if node.role == "broker" else CONTROLLER_HEAP, *cmd[at:]]

    return ManyPartitions(version, brokers=brokers, workdir=workdir, overrides=MANY_PARTITIONS,
                          start_timeout=300.0)


def create_topics(cluster: Any, topics: int, per_topic: int, timeout: float) -> float:
    """The topics, in CreateTopics requests of at most CREATE_BATCH_PARTITIONS partitions, then
    until the metadata shows every partition with a leader; returns the seconds it took."""
    from confluent_kafka.admin import NewTopic
    started = time.monotonic()
    adm = cluster.admin()
    per_batch = max(1, CREATE_BATCH_PARTITIONS // per_topic)
    names = [topic_name(t) for t in range(topics)]
    for first in range(0, topics, per_batch):
        batch = names[first:first + per_batch]
        futures = adm.create_topics([NewTopic(n, per_topic, 1) for n in batch], operation_timeout=timeout,
                                    request_timeout=timeout)
        for name, future in futures.items():
            try:
                future.result(timeout)
            except Exception as exc:
                if "TOPIC_ALREADY_EXISTS" not in str(exc):
                    raise SystemExit(f"bench/cost: lag_sampler: creating topic {name} ({per_topic} partitions, "
                                     f"{first + len(batch):,} of {topics:,} topics asked for): {exc}") from None
        for node in cluster.brokers.values():
            cluster._died(node)
        done = first + len(batch)
        if done % (per_batch * 10) == 0 or done == topics:
            print(f"  lag_sampler: {done:,} of {topics:,} topics created ({done * per_topic:,} partitions, "
                  f"{time.monotonic() - started:.0f} s)", flush=True)
    deadline = time.monotonic() + timeout
    while True:
        led = sum(1 for t in adm.list_topics(timeout=60).topics.values() if t.topic.startswith("lag-bench-")
                  for p in t.partitions.values() if p.leader >= 0)
        if led == topics * per_topic:
            return time.monotonic() - started
        for node in cluster.brokers.values():
            cluster._died(node)
        if time.monotonic() > deadline:
            raise SystemExit(f"bench/cost: lag_sampler: {led:,} of {topics * per_topic:,} partitions have a leader "
                             f"after {timeout:.0f} s")
        time.sleep(2)


def await_logs(cluster: Any, partitions: list[tuple[str, int]], timeout: float) -> float:
    """Until the brokers answer ListOffsets for every partition (a broker creates the logs of new
    partitions after the metadata names it their leader: thousands take minutes); the seconds."""
    from streaming.app.lag_sampler import KafkaEndOffsets
    started = time.monotonic()
    source = KafkaEndOffsets(cluster.bootstrap, {}, 10.0)
    try:
        while True:
            ends, errors = source.fetch(partitions)
            if not errors:
                return time.monotonic() - started
            for node in cluster.brokers.values():
                cluster._died(node)
            if time.monotonic() - started > timeout:
                raise SystemExit(f"bench/cost: lag_sampler: {len(errors):,} of {len(partitions):,} partitions still "
                                 f"without an end offset after {timeout:.0f} s, e.g. {sorted(errors.items())[:3]}")
            time.sleep(5)
    finally:
        source.close()


def produce(cluster: Any, partitions: list[tuple[str, int]], records: int) -> None:
    """`records` small records to each of `partitions` (confluent-kafka's producer), flushed."""
    from confluent_kafka import Producer
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 50, "log_level": 2})
    for topic, partition in partitions:
        for i in range(records):
            while True:
                try:
                    producer.produce(topic, value=b"x" * 32, key=str(i).encode(), partition=partition)
                    break
                except BufferError:
                    producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120) != 0:
        raise SystemExit("bench/cost: lag_sampler: records not delivered within 120 s")


class Trickle(threading.Thread):
    """A few records a second to the produced partitions, in turn, while the rounds run: their end
    offsets move (the history of end samples grows as in a live cluster)."""

    def __init__(self, cluster: Any, partitions: list[tuple[str, int]], per_second: float) -> None:
        super().__init__(name="lag-bench-trickle", daemon=True)
        from confluent_kafka import Producer
        self.producer = Producer({"bootstrap.servers": cluster.bootstrap, "linger.ms": 100, "log_level": 2})
        self.partitions, self.per_second = partitions, per_second
        self.done = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.done.wait(1.0):
            for _ in range(int(self.per_second)):
                topic, partition = self.partitions[i % len(self.partitions)]
                self.producer.produce(topic, value=b"y" * 32, partition=partition)
                i += 1
            self.producer.poll(0)
        self.producer.flush(30)


def thread_cpu(threads: list[threading.Thread]) -> float:
    """The CPU seconds of live `threads` (their own CPU clocks)."""
    total = 0.0
    for t in threads:
        if t.ident is None or not t.is_alive():
            continue
        try:
            total += time.clock_gettime(time.pthread_getcpuclockid(t.ident))
        except (OSError, ProcessLookupError):
            continue
    return total


class MeasuredRounds:
    """Wraps a LagSampler's sample_once: each round's wall and the sampler thread's CPU; from the
    first measured round's start to the start of the round after the last, the CPU of the sampler's
    thread and of the threads started after `before` (its client's), then stops the sampler."""

    def __init__(self, sampler: Any, warm_up: int, rounds: int, stop: threading.Event,
                 before: set[int]) -> None:
        self.sampler, self.warm_up, self.rounds, self.stop = sampler, warm_up, rounds, stop
        self.before = before
        self.inner = sampler.sample_once
        self.index = 0
        self.walls: list[float] = []
        self.thread_cpus: list[float] = []
        self.started = threading.Event()       # the first measured round starts
        self.done = threading.Event()
        self.window: dict[str, float] = {}
        self.threads: list[threading.Thread] = []
        self.error: BaseException | None = None
        sampler.sample_once = self

    def _client_threads(self) -> list[threading.Thread]:
        me = threading.current_thread()
        return [t for t in threading.enumerate() if t is not me and t.ident not in self.before]

    def __call__(self) -> None:
        if self.index == self.warm_up:
            self.threads = self._client_threads()
            self.window.update(wall0=time.monotonic(), own0=time.thread_time(), client0=thread_cpu(self.threads))
            self.started.set()
        if self.index == self.warm_up + self.rounds:
            now_threads = self._client_threads()
            self.window.update(wall1=time.monotonic(), own1=time.thread_time(), client1=thread_cpu(self.threads),
                               threads_changed=float({t.ident for t in now_threads} != {t.ident for t in self.threads}))
            self.stop.set()
            self.done.set()
            return
        self.index += 1
        wall, cpu = time.monotonic(), time.thread_time()
        try:
            self.inner()
        except BaseException as exc:     # the sampler's loop logs it; the bench stops on it
            self.error = exc
            raise
        if self.index > self.warm_up:
            self.walls.append(time.monotonic() - wall)
            self.thread_cpus.append(time.thread_time() - cpu)


OFFSETS_TOPIC = "__consumer_offsets"


def _run_book(cluster: Any, sample_seconds: float) -> tuple[Any, int]:
    """A lag book as `run` has it: the monitor's own positions in __consumer_offsets are sampled
    beside the groups' partitions (state/lag.py commits_read_through). And how many there are."""
    from state.lag import LagBook
    from testbed.monitor import ensure_offsets_topic
    ensure_offsets_topic(cluster)
    partitions = cluster.admin().list_topics(OFFSETS_TOPIC, timeout=30).topics[OFFSETS_TOPIC].partitions
    book = LagBook(sample_seconds, read_cluster=CLUSTER)
    book.note_read({OFFSETS_TOPIC: dict.fromkeys(partitions, 0)}, None)
    return book, len(partitions)


def lag_sampler(args: Any, work: Path) -> dict[str, float]:
    from sinks.lag_gauges import LagCollector
    from streaming.app.lag_sampler import KafkaEndOffsets, LagSampler
    from streaming.app.settings.schema import LAG_SAMPLE_SECONDS
    from testbed.proc import tree_cpu_seconds

    sample_seconds = args.lag_sample_seconds or LAG_SAMPLE_SECONDS
    partitions = args.lag_topics * args.lag_topic_partitions
    problem = check_files(partitions, args.lag_brokers)
    if problem:
        raise SystemExit(f"bench/cost: lag_sampler: {problem}")
    groups = layout(args.lag_topics, args.lag_topic_partitions, args.lag_groups, args.lag_group_partitions)
    committed = len({tp for g in groups for tp in g})
    print(f"lag_sampler: {args.lag_groups:,} groups committing to {args.lag_group_partitions} partitions each "
          f"({committed:,} distinct) of {args.lag_topics:,} topics x {args.lag_topic_partitions} partitions on "
          f"{args.lag_brokers} broker(s) of Kafka {args.version}; sampling every {sample_seconds:g} s, "
          f"{args.lag_warm_up} warm-up + {args.lag_rounds} measured rounds", flush=True)
    cluster = many_partitions_cluster(args.version, args.lag_brokers, work / "lag-cluster")
    try:
        cluster.start()
        produced = _prepare(args, cluster, partitions)
        ends = dict.fromkeys(produced, args.lag_records)
        now_ms = int(time.time() * 1000)
        book, offsets_partitions = _run_book(cluster, sample_seconds)
        fill_book(book, groups, ends, now_ms)
        snaps = snapshots(groups, now_ms)
        collector = LagCollector(lambda: snaps)
        collector.book = book
        print(f"  lag_sampler: {args.lag_records} records in each of {len(produced):,} partitions; the book holds "
              f"{sum(len(g) for g in groups):,} committed offsets, and the monitor's positions in the "
              f"{offsets_partitions} partitions of {OFFSETS_TOPIC}", flush=True)

        trickle = Trickle(cluster, produced, args.lag_trickle)
        trickle.start()
        before = {t.ident for t in threading.enumerate() if t.ident is not None}
        source = KafkaEndOffsets(cluster.bootstrap, {}, sample_seconds)
        counted: dict[str, int] = {}
        sampler = LagSampler(book, CLUSTER, source,
                             count_error=lambda reason, n: counted.__setitem__(reason, counted.get(reason, 0) + n))
        stop = threading.Event()
        rounds = MeasuredRounds(sampler, args.lag_warm_up, args.lag_rounds, stop, before)
        brokers = [n.proc.pid for n in cluster.nodes.values() if n.proc is not None]
        thread = sampler.start(stop)
        timeout = (args.lag_warm_up + 2) * max(sample_seconds, MAX_ROUND_S)
        if not rounds.started.wait(timeout):
            raise SystemExit(f"bench/cost: lag_sampler: the warm-up rounds did not end within {timeout:.0f} s "
                             f"({rounds.index} rounds)")
        broker0 = sum(tree_cpu_seconds(pid) for pid in brokers)
        scrapes: list[float] = []
        series = {}
        next_scrape = time.monotonic()
        limit = time.monotonic() + (args.lag_rounds + 2) * max(sample_seconds, MAX_ROUND_S)
        while not rounds.done.is_set() or not scrapes:
            if time.monotonic() > limit:
                raise SystemExit(f"bench/cost: lag_sampler: the measured rounds did not end in time ({rounds.index} "
                                 "rounds)")
            if time.monotonic() >= next_scrape:
                cpu = time.thread_time()
                scraped = list(collector.collect())
                scrapes.append(time.thread_time() - cpu)
                series = {f.name: len(f.samples) for f in scraped}
                next_scrape += args.lag_scrape_seconds
                fill_book(book, groups, ends, int(time.time() * 1000))
            rounds.done.wait(max(0.05, min(1.0, next_scrape - time.monotonic())))
        broker_cpu = sum(tree_cpu_seconds(pid) for pid in brokers) - broker0
        thread.join(2 * MAX_ROUND_S)
        trickle.done.set()
        trickle.join(60)
        if rounds.error is not None:
            raise SystemExit(f"bench/cost: lag_sampler: a round failed: {rounds.error!r}")
        if counted:
            raise SystemExit(f"bench/cost: lag_sampler: end offsets the sampler could not get, by reason: {counted}")
        _check_shown(collector, groups)
    finally:
        cluster.close(keep=False)
        if not os.environ.get("KAFKABED_KEEP"):
            shutil.rmtree(work / "lag-cluster", ignore_errors=True)     # a directory per partition
    return _figures(args, rounds, scrapes, series, broker_cpu, committed)


def _prepare(args: Any, cluster: Any, partitions: int) -> list[tuple[str, int]]:
    """The topics created, every partition's log ready, records in every Nth partition: those."""
    created = create_topics(cluster, args.lag_topics, args.lag_topic_partitions, args.lag_create_timeout)
    print(f"  lag_sampler: {partitions:,} partitions created with leaders in {created:.0f} s", flush=True)
    everyone = [(topic_name(i // args.lag_topic_partitions), i % args.lag_topic_partitions)
                for i in range(partitions)]
    ready = await_logs(cluster, everyone, args.lag_create_timeout)
    print(f"  lag_sampler: every partition's end offset answered {ready:.0f} s later (the brokers create "
          f"the logs after the metadata)", flush=True)
    every = max(1, args.lag_produce_every)
    produced = [(topic_name(i // args.lag_topic_partitions), i % args.lag_topic_partitions)
                for i in range(0, partitions, every)]
    produce(cluster, produced, args.lag_records)
    return produced


def _figures(args: Any, rounds: Any, scrapes: list[float], series: dict, broker_cpu: float,
             committed: int) -> dict[str, float]:
    """The measured rounds and scrapes: printed, and as the bench's figures."""
    from testbed.stats import percentile
    w = rounds.window
    wall = w["wall1"] - w["wall0"]
    own, client = w["own1"] - w["own0"], w["client1"] - w["client0"]
    cores = (own + client) / wall
    scrape = sum(scrapes) / len(scrapes)
    total = cores + scrape / args.lag_scrape_seconds
    p95 = percentile(rounds.walls, 0.95) or 0.0
    names = ", ".join(sorted({t.name for t in rounds.threads})) or "none"
    print(f"  lag_sampler: {args.lag_rounds} rounds in {wall:.1f} s: sampler thread {own:.2f} CPU-s (per round "
          f"p50 {percentile(rounds.thread_cpus, 0.5) or 0:.3f} s, max {max(rounds.thread_cpus):.3f} s), its "
          f"client's threads ({names}) {client:.2f} CPU-s: {cores:.4f} cores; round wall p50 "
          f"{percentile(rounds.walls, 0.5) or 0:.2f} s, p95 {p95:.2f} s"
          + ("; its client's threads changed during the rounds" if w.get("threads_changed") else ""), flush=True)
    print(f"  lag_sampler: {len(scrapes)} scrapes (LagCollector.collect, {series}): {scrape:.3f} CPU-s each "
          f"(max {max(scrapes):.3f} s), {scrape / args.lag_scrape_seconds:.4f} cores at one per "
          f"{args.lag_scrape_seconds:g} s; sampler + scrapes {total:.4f} cores against the ceiling "
          f"{LAG_CEILING_CORES:g}: {'within' if total <= LAG_CEILING_CORES else 'ABOVE'}", flush=True)
    print(f"  lag_sampler: the broker's own CPU over the rounds (not the monitor's, for information): "
          f"{broker_cpu / wall:.2f} cores", flush=True)
    return {"lag_sampler_cpu_cores": cores, "lag_round_seconds_p95": p95, "lag_scrape_cpu_seconds": scrape,
            "lag_cpu_cores": total, "lag_within_ceiling": float(total <= LAG_CEILING_CORES),
            "lag_partitions": float(committed), "lag_groups": float(args.lag_groups),
            "lag_broker_cpu_cores": broker_cpu / wall}

def _check_shown(collector: Any, groups: list[list[tuple[str, int]]]) -> None:
    # every group's topics have a figure at a scrape after the last round
    families = {f.name: f for f in collector.collect()}
    unknown = sum(s.value for s in families["rebalance_monitor_group_lag_unknown"].samples)
    topics_of_groups = sum(len({t for t, _ in g}) for g in groups)
    shown = len(families["rebalance_monitor_group_topic_lag"].samples)
    behind = sum(1 for s in families["rebalance_monitor_group_topic_lag"].samples if s.value > 0)
    if unknown or shown != topics_of_groups or not behind:
        raise SystemExit(f"bench/cost: lag_sampler: {shown:,} lag series of {topics_of_groups:,} groups' topics, "
                         f"{unknown:.0f} unknown, {behind:,} behind: the sampler did not sample them all")


MAX_ROUND_S = 60.0        # a round longer than this stops the bench (the sampler's requests time out in 10 s)


def lag_arguments(p: Any) -> None:
    """bench/cost's options of this part (--only lag_sampler)."""
    p.add_argument("--lag-topics", type=int, default=1_000, help="lag_sampler: topics of the broker")
    p.add_argument("--lag-topic-partitions", type=int, default=100, help="lag_sampler: partitions per topic")
    p.add_argument("--lag-brokers", type=int, default=6,
                   help="lag_sampler: brokers holding the partitions (a broker keeps a file open per "
                        "partition: 6 keep 100,000 under a 20,000 open-file limit)")
    p.add_argument("--lag-groups", type=int, default=10_000, help="lag_sampler: groups in the lag book")
    p.add_argument("--lag-group-partitions", type=int, default=10,
                   help="lag_sampler: partitions each group commits to (laid over all partitions in turn)")
    p.add_argument("--lag-sample-seconds", type=float, default=0.0,
                   help="lag_sampler: seconds between rounds (default: lag.sample_seconds's default, 10)")
    p.add_argument("--lag-warm-up", type=int, default=2, help="lag_sampler: rounds before the measured ones")
    p.add_argument("--lag-rounds", type=int, default=30,
                   help="lag_sampler: measured rounds (30 at 10 s: 5 minutes, kafka-python's metadata max age)")
    p.add_argument("--lag-scrape-seconds", type=float, default=15.0,
                   help="lag_sampler: seconds between two scrapes of the lag families")
    p.add_argument("--lag-produce-every", type=int, default=10,
                   help="lag_sampler: records go to every Nth partition")
    p.add_argument("--lag-records", type=int, default=20, help="lag_sampler: records per such partition at the start")
    p.add_argument("--lag-trickle", type=float, default=50.0,
                   help="lag_sampler: records a second to those partitions during the rounds")
    p.add_argument("--lag-create-timeout", type=float, default=900.0,
                   help="lag_sampler: seconds within which the topics must be created with leaders")


def check_lag_arguments(p: Any, args: Any) -> None:
    """Those options checked: one line on stderr and exit 2 (argparse's error)."""
    counts = {"--lag-topics": args.lag_topics, "--lag-topic-partitions": args.lag_topic_partitions,
              "--lag-brokers": args.lag_brokers, "--lag-groups": args.lag_groups,
              "--lag-group-partitions": args.lag_group_partitions, "--lag-rounds": args.lag_rounds,
              "--lag-produce-every": args.lag_produce_every, "--lag-records": args.lag_records}
    for flag, value in counts.items():
        if value < 1:
            p.error(f"{flag} must be at least 1, not {value}")
    if args.lag_warm_up < 0 or args.lag_scrape_seconds <= 0 or args.lag_sample_seconds < 0:
        p.error("--lag-warm-up and --lag-sample-seconds must be at least 0, --lag-scrape-seconds above 0")
