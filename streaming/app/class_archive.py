"""Making the local Spark JVM's class archive (streaming/spark/jvm_archive.py says what it is and
how a session uses it): a training run replays the bundled captures in a JVM that dumps the
classes it loaded as it exits. `scripts/bootstrap` runs `python -m streaming.app.class_archive -q`
before every command: it returns at once when the archive (or a failed attempt's note) is there.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from streaming.spark.jvm_archive import DUMP_ENV, archive_path


def make_archive() -> Path | None:
    """Make the archive unless it exists; returns it (None: none). A failed training run leaves no
    archive, says why in one line and is not tried again for this JDK and venv (its reason is kept
    beside, `*.failed`): Spark then starts as it did without it."""
    import subprocess
    path = archive_path()
    if path is None or path.is_file():
        return path
    failed = path.with_suffix(".failed")
    if failed.is_file():
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    dump = path.with_suffix(f".{os.getpid()}.tmp")
    env = {**os.environ, DUMP_ENV: str(dump)}
    try:
        proc = subprocess.run([sys.executable, "-m", "streaming.app.class_archive", "--train"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600)
        lines = (proc.stderr or "").strip().splitlines()
        reason = "" if proc.returncode == 0 and dump.is_file() else (lines[-1] if lines else f"exit {proc.returncode}")
    except (OSError, subprocess.TimeoutExpired) as exc:
        reason = f"the training run: {exc}"
    if reason:
        dump.unlink(missing_ok=True)
        failed.write_text(f"{reason}\n")
        print(f"class_archive: no class archive (Spark starts without it; {failed} says why): {reason}",
              file=sys.stderr)
        return None
    os.replace(dump, path)
    return path


def _train() -> None:
    """A replay of the demo's captures in a JVM that dumps its classes at exit; returns once that
    JVM has exited (so the archive is whole)."""
    from streaming.app.cli.demo import DEFAULT_CAPTURES, demo_inputs
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load
    from streaming.spark.jvm_archive import stop_and_wait_for_jvm
    from streaming.spark.session import get_spark
    settings = load(ReplaySettings)
    spark = get_spark(settings.spark_master, settings.shuffle_partitions, driver_memory=settings.driver_memory)
    logs, offsets = demo_inputs(DEFAULT_CAPTURES)
    replay(spark, settings, logs, offsets)
    stop_and_wait_for_jvm(spark)


if __name__ == "__main__":
    if sys.argv[1:] == ["--train"]:
        _train()
    else:
        made = make_archive()
        if made is not None and "-q" not in sys.argv[1:]:
            print(made)
