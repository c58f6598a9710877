"""The golden replay outputs (tests/fixtures/golden/README.md): compare a replay's output
directory with them, or rewrite them. `python -m tests.support.golden [--write]` replays both
captures (scripts/replay-golden runs it)."""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from tests.support.capture_expectations import FIXTURES, capture_inputs

GOLDEN = FIXTURES / "golden"
CAPTURES = ("kafka-2.7", "kafka-4.0")
FILES = ("rebalances.jsonl", "member_removals.jsonl", "rebalance_triggers.jsonl", "groups.jsonl", "anomalies.jsonl",
         "clock_skew.jsonl", "quarantine.jsonl", "metrics.prom")
# Samples that depend on the wall clock or the machine's speed, not on the input.
WALL_CLOCK = ("rebalance_monitor_input_rows_per_second", "rebalance_monitor_batch_duration_seconds",
              "rebalance_monitor_watermark_delay_seconds", "rebalance_monitor_source_newest_event_age_seconds")


def _rounded_sum(line: str) -> str:
    """A histogram `_sum` to 9 decimals: float additions in another order (the records of a batch
    observed in the order a cluster's executors returned them) differ in the last bits."""
    name, _, value = line.rstrip("\n").rpartition(" ")
    if "_sum{" not in name and not name.endswith("_sum"):
        return line
    return f"{name} {round(float(value), 9)!r}\n"


def comparable_metrics(text: str) -> str:
    """metrics.prom without `_created` samples (process times) and wall-clock gauges, histogram
    sums to 9 decimals, lines sorted (the order of metric families in the exposition is not part
    of the contract)."""
    return "".join(sorted(_rounded_sum(line) for line in text.splitlines(keepends=True)
                          if "_created" not in line and not line.startswith(WALL_CLOCK)))


def comparable(name: str, text: str) -> str:
    return comparable_metrics(text) if name == "metrics.prom" else text


def differing_files(capture: str, out: Path) -> list[str]:
    """The output files of a replay of `capture` in `out` that differ from the golden ones."""
    return [name for name in FILES
            if comparable(name, (out / name).read_text()) != (GOLDEN / capture / name).read_text()]


RECORD_FILES = tuple(name for name in FILES if name.endswith(".jsonl"))


def lost_and_doubled(capture: str, out: Path) -> tuple[int, int]:
    """Records of the golden output files missing from `out` (lost), and records in `out`
    beyond the golden's count of that same record (doubled: written twice, or not in the golden)."""
    from collections import Counter
    lost = doubled = 0
    for name in RECORD_FILES:
        want = Counter((GOLDEN / capture / name).read_text().splitlines())
        have = Counter((out / name).read_text().splitlines()) if (out / name).exists() else Counter()
        lost += sum((want - have).values())
        doubled += sum((have - want).values())
    return lost, doubled


def write_golden(capture: str, out: Path) -> None:
    for name in FILES:
        (GOLDEN / capture / name).write_text(comparable(name, (out / name).read_text()))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help="rewrite the golden files instead of comparing")
    args = parser.parse_args()
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load
    from streaming.spark.session import get_spark
    spark = get_spark("local[2]", 2)
    failed = False
    for capture in CAPTURES:
        out = Path(tempfile.mkdtemp(prefix=f"golden-{capture}-"))
        try:
            replay(spark, load(ReplaySettings), *capture_inputs(capture), out_dir=str(out))
            if args.write:
                write_golden(capture, out)
                print(f"{capture}: golden files rewritten")
                continue
            differ = differing_files(capture, out)
            failed |= bool(differ)
            print(f"{capture}: {'differs: ' + ', '.join(differ) if differ else 'byte-identical to the golden outputs'}")
        finally:
            shutil.rmtree(out, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
