"""Class-data sharing for the local Spark JVM: the classes a replay loads, archived once per
virtualenv and JDK, mapped when the JVM starts instead of read and verified from Spark's jars
(Spark's start 5.2 -> 3.3 s on the 2-core build machine, docs/benchmarks.md).

`scripts/bootstrap` makes the archive (`python -m streaming.app.class_archive`): a JVM started
with -XX:ArchiveClassesAtExit runs a replay of the bundled captures (the demo's input) and dumps
the classes it loaded as it exits. The file is renamed into place only after that JVM has exited:
a JVM that maps a half-written archive dies of SIGBUS. get_spark (streaming/spark/session.py)
passes -XX:SharedArchiveFile for a local session when the archive exists; a JVM that cannot use
it (another JDK build or classpath) starts without it, its warning silenced. Under spark-submit
the JVM is not ours to start: nothing changes there.

The archive lives in the virtualenv (`.venv/jvm/`), so a new install of Spark (a new venv) starts
without a stale one; its name holds the JDK's identity (the java binary's path, size and time).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path
from typing import Any

# Set by streaming/app/class_archive.py for its training run: the file that JVM dumps its classes to.
DUMP_ENV = "REBALANCE_MONITOR_JVM_ARCHIVE_DUMP"
_QUIET = "-Xlog:cds=off,cds+dynamic=off"


def _java() -> str | None:
    """The java binary pyspark's launcher runs (spark-class: $JAVA_HOME/bin/java, else java on PATH)."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def archive_path() -> Path | None:
    """Where this virtualenv's archive for the current JDK is (None: no java found)."""
    java = _java()
    if java is None:
        return None
    st = os.stat(java)
    key = hashlib.sha256(f"{java}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return Path(sys.prefix) / "jvm" / f"spark-classes-{key}.jsa"


def java_options() -> str:
    """The driver JVM's class-data sharing options ("" when there is no archive)."""
    dump = os.environ.get(DUMP_ENV)
    if dump:
        return f"-XX:ArchiveClassesAtExit={dump} {_QUIET}"
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {_QUIET}" if path is not None and path.is_file() else ""


def stop_and_wait_for_jvm(spark: Any) -> None:
    """Stop the session and wait until its JVM has exited: a JVM run with ArchiveClassesAtExit
    writes the archive as it exits."""
    from pyspark import SparkContext
    gateway = SparkContext._gateway
    spark.stop()
    jvm = getattr(gateway, "proc", None)
    if jvm is None:
        raise SystemExit("class_archive: the Spark JVM's process is not known; no archive")
    jvm.stdin.close()          # the gateway server exits when its stdin ends
    if jvm.wait(timeout=300) != 0:
        raise SystemExit(f"class_archive: the Spark JVM exited with {jvm.returncode}")
