"""Cost of many consumer groups (issue 15): `bench/scale [--groups N ...] [--base TREE] [--paced]`.

For each N: generates N copies of the real sc03 group (bench/scale_inputs.py, deterministic), runs
`rebalance-monitor replay` over them end to end as a child process of this tree (and, with
--base, of another checkout, e.g. /work/base at commit 2a45599, with that tree's own virtualenv:
same inputs, same run, alternately), checks the outputs (every copy has exactly the sc03
rebalances and removals, no anomalies) before it reports anything, and prints per run:

  rows/s end to end (log lines + offsets records / wall time of the whole command), CPU seconds of
  the process tree (driver, JVM, Python workers), peak RSS of the driver, the JVM and the Python
  workers (sampled every 0.25 s), series per group on metrics.prom (max and mean over the groups).

Then the read-only ceiling (bench/replay_ceiling.py, this tree): the same session and query up to
the stateful step (read, filter, parse, decode, watermarks) into Spark's noop sink, as a child
process the same way; its rows/s is what a replay end to end could at best reach with Spark and
these sources on this machine.

`state_bytes_per_group` is the stored size (both state columns) of one generated group at its
idle Stable moment with one lateness window of commit rows held, with this tree's encoder (as
tests/unit/test_state_budget.py asserts it, testbed/state_budget.py measures it).

--paced (this tree only) also runs the query in process with micro-batches of 10 s of event time
(the live trigger's worth of input per batch) and reports the median batch wall time after the
first 3 batches as live_batch_seconds. It reads the generated files, not Kafka: the Kafka source's
own fixed cost per batch is not in it.

Last line: groups=N live_batch_seconds=... replay_rows_per_second=... state_bytes_per_group=...
series_per_group=... ceiling_rows_per_second=... (the largest N; live_batch_seconds=nan without
--paced).
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench.scale_inputs import check_outputs, generate
from testbed.proc import tree_cpu_seconds

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "bench" / ".data"
# The generated traffic's span: N scenarios spread over 600 s, each lasting about 164 s.
SCENARIO_SECONDS = 764


def _tree(root: int) -> list[tuple[int, str, int]]:
    """(pid, command name, parent pid) of `root` and every process below it."""
    procs: dict[int, tuple[str, int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    head, rest = handle.read().rsplit(")", 1)
                procs[int(entry)] = (head.split("(", 1)[1], int(rest.split()[1]))
            except OSError:
                continue
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        if pid in procs:
            out.append((pid, procs[pid][0], procs[pid][1]))
            todo.extend(p for p, (_, parent) in procs.items() if parent == pid)
    return out


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


# HotSpot's perf-data counters of the heap's spaces (what `jstat -gc` adds up), in bytes: in use,
# and committed (what the JVM holds of its heap, which its RSS follows).
_HEAP_SPACE = re.compile(rb"sun\.gc\.generation\.\d+\.space\.\d+\.used")
HEAP_COMMITTED = re.compile(rb"sun\.gc\.generation\.\d+\.capacity")


def jvm_heap_mb(pid: int, counters: re.Pattern[bytes] = _HEAP_SPACE) -> float | None:
    """The heap in use of a HotSpot JVM (or the sum of other `counters`), read from its perf-data file
    (hsperfdata: the memory-mapped counters jstat reads, without starting a JVM per sample as jstat
    would); None without one (-XX:-UsePerfData, not a HotSpot JVM, gone)."""
    import pwd
    import struct
    try:
        data = Path(f"/tmp/hsperfdata_{pwd.getpwuid(os.getuid()).pw_name}/{pid}").read_bytes()
    except (OSError, KeyError):
        return None
    if len(data) < 32 or data[:4] != b"\xca\xfe\xc0\xc0":
        return None
    order = "<" if data[4] == 1 else ">"
    position, entries = struct.unpack_from(order + "ii", data, 24)
    used = 0
    for _ in range(entries):
        if position + 20 > len(data):
            return None
        length, name_at, vector, kind, _flags, _units, _variability, value_at = struct.unpack_from(
            order + "iiibbbbi", data, position)
        if length <= 0:
            return None
        name = data[position + name_at:data.find(b"\0", position + name_at)]
        if kind == ord("J") and vector == 0 and counters.fullmatch(name):
            used += struct.unpack_from(order + "q", data, position + value_at)[0]
        position += length
    return used / 2**20


class PeakRss(threading.Thread):
    """Peak RSS of the driver (the root Python), the JVM and the Python workers (all Python
    processes below the JVM), summed per kind at each sample; and the peak heap in use of the JVMs
    ("heap": jvm_heap_mb, 0 when they publish no perf data)."""

    def __init__(self, root: int) -> None:
        super().__init__(daemon=True)
        self.root, self.peak = root, {"driver": 0.0, "jvm": 0.0, "workers": 0.0, "heap": 0.0}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.25):
            now = {"driver": 0.0, "jvm": 0.0, "workers": 0.0, "heap": 0.0}
            procs = _tree(self.root)
            parents = {pid: parent for pid, _, parent in procs}
            jvms = {pid for pid, name, _ in procs if name == "java"}
            for pid, name, _ in procs:
                if name == "java":
                    now["jvm"] += _rss_mb(pid)
                    now["heap"] += jvm_heap_mb(pid) or 0.0
                else:     # the driver (and its wrapper script), or a Python worker below the JVM
                    now["workers" if self._below(pid, parents, jvms) else "driver"] += _rss_mb(pid)
            for kind, value in now.items():
                self.peak[kind] = max(self.peak[kind], value)

    @staticmethod
    def _below(pid: int, parents: dict[int, int], jvms: set[int]) -> bool:
        while pid in parents:
            pid = parents[pid]
            if pid in jvms:
                return True
        return False


def run_replay(tree: Path, inputs: Path, out: Path, ceiling: bool = False) -> dict:
    """`<tree>/rebalance-monitor replay` over the generated files (with `ceiling`, this tree's
    bench/replay_ceiling.py instead); wall, CPU, peak RSS."""
    if out.exists():
        shutil.rmtree(out)
    log, offsets = str(inputs / "broker1-server.log"), str(inputs / "offsets-topic.jsonl")
    command = [str(tree / "rebalance-monitor"), "replay", "--broker-log", log,
               "--offsets", offsets, "--out", str(out), "--cluster", "bench"]
    if ceiling:
        out.mkdir(parents=True)
        command = [str(tree / ".venv" / "bin" / "python"), "-m", "bench.replay_ceiling", log, offsets]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "PYTHONPATH"))}
    started = time.monotonic()
    with open(out.with_suffix(".log"), "w") as run_log:
        proc = subprocess.Popen(command, cwd=tree, env=env, stdout=run_log, stderr=subprocess.STDOUT)
        sampler = PeakRss(proc.pid)
        sampler.start()
        cpu = 0.0
        while proc.poll() is None:
            cpu = max(cpu, tree_cpu_seconds(proc.pid))
            time.sleep(0.25)
        sampler.done.set()
    wall = time.monotonic() - started
    if proc.returncode != 0:
        tail = out.with_suffix(".log").read_text()[-2000:]
        raise SystemExit(f"bench/scale: replay in {tree} failed (exit {proc.returncode}):\n{tail}")
    return {"wall": wall, "cpu": cpu, "rss": sampler.peak, "output": out.with_suffix(".log").read_text()}


def series_stats(out: Path) -> tuple[int, float, float]:
    """(max, mean) series per group of metrics.prom, and its size in MB."""
    from sinks.exposition import series_per_group
    page = (out / "metrics.prom").read_text()
    counts = series_per_group(page)
    return max(counts.values()), statistics.mean(counts.values()), len(page.encode()) / 1e6


def state_bytes_per_group() -> int:
    from testbed.state_budget import held_commits, sc03, stored_bytes
    model, commit = sc03()
    return stored_bytes(model, held_commits(commit))


def paced_batches(inputs: Path, rows_per_batch: int, conf: dict[str, str] | None = None,
                  checkpoint_dir: str | None = None) -> tuple[list[float], Any]:
    """Wall time of each micro-batch of an in-process replay of `rows_per_batch` rows per source,
    and its collector (the metrics); `conf`: Spark settings of the session."""
    from streaming.app.collector import RunCollector
    from streaming.app.replay import replay
    from streaming.app.settings import LogInput, OffsetsInput, ReplaySettings, load
    from streaming.spark.session import get_spark
    from sinks.metrics import MetricsSink
    # live_view as `run` has it: these batches stand for the live path's cost.
    settings = load(ReplaySettings, max_rows_per_batch=rows_per_batch, cluster="bench", live_view=True)
    collector = RunCollector(MetricsSink(settings.duration_buckets), keep_records=False)
    stamps = [time.monotonic()]
    collector.on_batch = lambda c, batch_id: stamps.append(time.monotonic())
    spark = get_spark("local[2]", 2, conf=conf)
    replay(spark, settings, [LogInput(path=str(inputs / "broker1-server.log"), cluster="bench")],
           [OffsetsInput(path=str(inputs / "offsets-topic.jsonl"), cluster="bench")], collector=collector,
           checkpoint_dir=checkpoint_dir)
    return [b - a for a, b in itertools.pairwise(stamps)], collector


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--groups", type=int, nargs="+", default=[1000])
    parser.add_argument("--base", type=Path, help="another checkout to run on the same inputs (e.g. /work/base)")
    parser.add_argument("--paced", action="store_true", help="also the in-process run with 10 s batches")
    parser.add_argument("--seed", type=int, default=15)
    args = parser.parse_args()
    state_bytes = state_bytes_per_group()
    last = ""
    for n in args.groups:
        inputs = DATA / f"scale-{n}-seed{args.seed}"
        counts = generate(n, inputs, seed=args.seed)
        rows = counts["log_lines"] + counts["offsets_records"]
        print(f"groups={n}: {counts['log_lines']} log lines, {counts['offsets_records']} offsets records", flush=True)
        trees = [("head", ROOT)] + ([("base", args.base.resolve())] if args.base else [])
        results = {}
        for name, tree in trees:
            out = DATA / f"scale-{n}-out-{name}"
            result = run_replay(tree, inputs, out)
            problems = check_outputs(out, n)
            if problems:
                print(f"bench/scale: {name} outputs wrong at {n} groups ({len(problems)} problems), e.g.:\n  "
                      + "\n  ".join(problems[:5]), file=sys.stderr)
                return 1
            smax, smean, size = series_stats(out)
            results[name] = result
            rss = result["rss"]
            print(f"  {name}: all {n} groups' rebalances and removals found; wall {result['wall']:.1f} s, "
                  f"{rows / result['wall']:,.0f} rows/s, CPU {result['cpu']:.1f} s ({rows / result['cpu']:,.0f} rows "
                  f"per CPU-s), load average {os.getloadavg()[0]:.1f}, peak RSS driver "
                  f"{rss['driver']:.0f} MB / JVM {rss['jvm']:.0f} MB / workers {rss['workers']:.0f} MB, series per "
                  f"group max {smax} mean {smean:.1f}, metrics.prom {size:.1f} MB", flush=True)
        if "base" in results:
            print(f"  head/base: wall {results['head']['wall'] / results['base']['wall']:.2f}, "
                  f"CPU {results['head']['cpu'] / results['base']['cpu']:.2f}", flush=True)
        ceiling = run_replay(ROOT, inputs, DATA / f"scale-{n}-out-ceiling", ceiling=True)
        read = re.search(r"read-only ceiling: (\d+) input rows", ceiling["output"])
        if read is None or int(read.group(1)) < rows:
            print(f"bench/scale: the read-only ceiling read {read.group(1) if read else 'no'} rows of {rows}",
                  file=sys.stderr)
            return 1
        print(f"  read-only ceiling (no state machine, noop sink): wall {ceiling['wall']:.1f} s, "
              f"{rows / ceiling['wall']:,.0f} rows/s, CPU {ceiling['cpu']:.1f} s; head/ceiling wall "
              f"{results['head']['wall'] / ceiling['wall']:.2f}", flush=True)
        live = float("nan")
        if args.paced:
            # 10 s of event time per micro-batch: the generator spreads n scenarios over 600 s
            per_batch = max(1, rows * 10 // SCENARIO_SECONDS)
            batches, _ = paced_batches(inputs, per_batch)
            steady = batches[3:] or batches
            live = statistics.median(steady)
            print(f"  paced: {len(batches)} batches of {per_batch} rows per source, median {live:.2f} s, "
                  f"max {max(steady):.2f} s", flush=True)
        smax, _, _ = series_stats(DATA / f"scale-{n}-out-head")
        last = (f"groups={n} live_batch_seconds={live:.2f} replay_rows_per_second={rows / results['head']['wall']:.0f} "
                f"state_bytes_per_group={state_bytes} series_per_group={smax} "
                f"ceiling_rows_per_second={rows / ceiling['wall']:.0f}")
    print(json.dumps({"state_bytes_per_group": state_bytes}))
    print(last)
    return 0


if __name__ == "__main__":
    sys.exit(main())
