"""Kafka jars (and Spark's Kafka connector) from Maven Central into a cache outside the repository.

Why Maven and not a release tarball: Maven Central is the registry this machine reaches; a
generated POM plus `mvn dependency:copy-dependencies` gives exactly the broker's runtime
classpath, resolved once and kept under `~/.cache/rebalance-monitor/kafka/<version>/lib`
(`REBALANCE_MONITOR_CACHE` overrides the root). A `.complete` marker makes it idempotent.

Two resolution passes for 4.x: the first one resolves the broker (which brings `log4j-core`);
the second adds the slf4j binding and the JSON layout at that exact log4j version.

Spark's connector (`fetch_spark_connector`) goes to `~/.cache/rebalance-monitor/spark-connector/
<version>/lib`: the jars `spark-submit --packages` would add, for `spark.jars`
(`python -m testbed.bed.jars spark-connector [VERSION]`, scripts/spark-connector).
"""
from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

KAFKA_GROUP = "org.apache.kafka"
LOG4J2_FALLBACK = "2.24.3"   # the log4j2 of Kafka 4.0's distribution
# Pulled in by some 4.x broker POMs with runtime scope by mistake (junit, apacheds), or
# logging backends that would fight the one we choose (logback from ZooKeeper 3.8).
_EXCLUDES = [("org.junit.jupiter", "*"), ("org.apache.directory.api", "*"),
             ("org.apache.directory.server", "*"), ("ch.qos.logback", "*")]


class MavenError(RuntimeError):
    """Maven could not resolve a coordinate; the message names it and Maven's first error."""


def cache_root() -> Path:
    return Path(os.environ.get("REBALANCE_MONITOR_CACHE") or Path.home() / ".cache" / "rebalance-monitor")


def parse_version(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", version)[:3])


def is_kraft(version: str) -> bool:
    """3.9 and 4.x run KRaft here; 2.x/3.0-3.8 run ZooKeeper mode (3.x could do both)."""
    return parse_version(version) >= (3, 9)


def log4j_family(version: str) -> str:
    """'log4j2' for 4.x (config/log4j2.yaml), 'log4j1' (log4j 1.2 / reload4j) before."""
    return "log4j2" if parse_version(version) >= (4, 0) else "log4j1"


@dataclass
class Dep:
    group: str
    artifact: str
    version: str
    optional: bool = False      # skipped (and recorded) when Maven does not serve it
    excludes: list = field(default_factory=list)

    @property
    def coord(self) -> str:
        return f"{self.group}:{self.artifact}:{self.version}"


def broker_deps(version: str) -> list[Dep]:
    """The broker's coordinates for `version` (see the module docstring for the log4j pass)."""
    deps = [Dep(KAFKA_GROUP, "kafka_2.13", version, excludes=list(_EXCLUDES))]
    v = parse_version(version)
    if v >= (4, 0):
        for art in ("kafka-server", "kafka-group-coordinator", "kafka-storage"):
            deps.append(Dep(KAFKA_GROUP, art, version, excludes=list(_EXCLUDES)))
        # StorageTool (kafka.tools.StorageTool) is in core; kafka-tools is nice to have only.
        # connect-runtime (a tools dependency) is not needed by anything we run.
        deps.append(Dep(KAFKA_GROUP, "kafka-tools", version, optional=True,
                        excludes=list(_EXCLUDES) + [(KAFKA_GROUP, "connect-runtime")]))
    elif v >= (3, 0):
        deps += [Dep("ch.qos.reload4j", "reload4j", "1.2.25"), Dep("org.slf4j", "slf4j-reload4j", "1.7.36")]
        deps[0].excludes += [("log4j", "log4j"), ("org.slf4j", "slf4j-log4j12")]
    else:
        deps += [Dep("log4j", "log4j", "1.2.17"), Dep("org.slf4j", "slf4j-log4j12", "1.7.30")]
    return deps


def _pom(deps: list[Dep], transitive: bool = True) -> str:
    items = []
    for d in deps:
        excl = "".join(f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
                       for g, a in d.excludes)
        if not transitive:
            excl = "<exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion>"
        items.append(f"<dependency><groupId>{d.group}</groupId><artifactId>{d.artifact}</artifactId>"
                     f"<version>{d.version}</version>" + (f"<exclusions>{excl}</exclusions>" if excl else "")
                     + "</dependency>")
    return ("<project xmlns=\"http://maven.apache.org/POM/4.0.0\"><modelVersion>4.0.0</modelVersion>"
            "<groupId>local.kafkabed</groupId><artifactId>fetch</artifactId><version>1</version>"
            "<packaging>pom</packaging><dependencies>" + "".join(items) + "</dependencies></project>")


def _mvn(args: list[str], what: str, cwd: Path | None = None) -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError(f"mvn not found on PATH (needed to fetch {what}); install Debian's 'maven'")
    proc = subprocess.run([mvn, "-B", "-q", "-ntp", *args], cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        out = proc.stdout + proc.stderr
        first = next((ln for ln in out.splitlines() if "[ERROR]" in ln), out.strip()[:300])
        first = re.sub(r"\x1b\[[0-9;]*m", "", first).strip()
        raise MavenError(f"Maven failed for {what}: {first}")
    return proc.stdout


def is_served(coord: str) -> bool:
    """True when Maven Central serves `group:artifact:version` (its POM, no dependencies)."""
    try:
        _mvn(["dependency:get", f"-Dartifact={coord}:pom", "-Dtransitive=false"], coord)
        return True
    except MavenError:
        return False


def copy_dependencies(deps: list[Dep], dest: Path, transitive: bool = True) -> None:
    """Resolves `deps` (and, by default, their runtime closure) into `dest` (plain jar names)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafkabed-pom-") as tmp:
        Path(tmp, "pom.xml").write_text(_pom(deps, transitive))
        _mvn(["dependency:copy-dependencies", f"-DoutputDirectory={dest}", "-DincludeScope=runtime"],
             ", ".join(d.coord for d in deps), cwd=Path(tmp))


def jar_version(lib: Path, artifact: str) -> str | None:
    for jar in lib.glob(f"{artifact}-*.jar"):
        m = re.fullmatch(re.escape(artifact) + r"-(\d[\w.\-]*)\.jar", jar.name)
        if m:
            return m.group(1)
    return None


def _fetch(kind: str, version: str, deps: list[Dep], extra=None, home: Path | None = None) -> Path:
    """`deps` and their runtime closure into `<home>/<kind>` (default home: the Kafka cache of
    `version`), once: `.<kind>.complete` marks a finished fetch, `<kind>.json` lists it."""
    home = home or cache_root() / "kafka" / version
    lib = home / kind
    marker = home / f".{kind}.complete"
    if marker.exists():
        return lib
    home.mkdir(parents=True, exist_ok=True)
    # Two test runs side by side (scripts/test) may want the same fetch: one does it, the other waits.
    with open(home / f".{kind}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.exists():
            return lib
        return _fetch_locked(lib, marker, deps, extra)


def _fetch_locked(lib: Path, marker: Path, deps: list[Dep], extra) -> Path:
    home = lib.parent
    if lib.exists():
        shutil.rmtree(lib)
    skipped = []
    wanted = []
    for d in deps:
        if d.optional and not is_served(d.coord):
            skipped.append(d.coord)
        else:
            wanted.append(d)
    copy_dependencies(wanted, lib)
    if extra:
        skipped += extra(lib)
    (home / f"{lib.name}.json").write_text(json.dumps({"resolved": [d.coord for d in wanted],
                                                   "not_served": skipped}, indent=1))
    marker.touch()
    return lib


def _log4j2_extras(lib: Path) -> list[str]:
    """slf4j binding + JSON layout at the log4j-core version the broker brought."""
    v = jar_version(lib, "log4j-core")
    extras = []
    if v is None:   # 4.0.x POMs do not list log4j-core; its distribution ships 2.24.3
        v = jar_version(lib, "log4j-api") or LOG4J2_FALLBACK
        extras += [Dep("org.apache.logging.log4j", "log4j-core", v), Dep("org.apache.logging.log4j", "log4j-api", v)]
    slf4j = jar_version(lib, "slf4j-api") or "1.7"
    binding = "log4j-slf4j2-impl" if slf4j.startswith("2.") else "log4j-slf4j-impl"
    extras.append(Dep("org.apache.logging.log4j", binding, v))
    skipped = []
    layout = Dep("org.apache.logging.log4j", "log4j-layout-template-json", v)
    if is_served(layout.coord):
        extras.append(layout)
    else:
        skipped.append(layout.coord)
    copy_dependencies(extras, lib, transitive=False)
    return skipped


def fetch_broker(version: str) -> Path:
    """Directory of every jar the broker (and, for 2.8, ZooKeeper) needs; fetched once."""
    extra = _log4j2_extras if log4j_family(version) == "log4j2" else None
    return _fetch("lib", version, broker_deps(version), extra)


def fetch_clients(version: str, streams: bool = False) -> Path:
    """kafka-clients (+ kafka-streams) of `version` with a simple slf4j backend, for the Java
    members. Raises MavenError when kafka-streams is asked for and not served."""
    deps = [Dep(KAFKA_GROUP, "kafka-clients", version)]
    if streams:
        deps.append(Dep(KAFKA_GROUP, "kafka-streams", version))
    deps.append(Dep("org.slf4j", "slf4j-simple", "1.7.36"))
    return _fetch("streams" if streams else "clients", version, deps)


def newest_served(candidates: list[str], artifact: str = "kafka-clients") -> str | None:
    """First of `candidates` (newest first) for which Maven serves org.apache.kafka:artifact."""
    for v in candidates:
        if is_served(f"{KAFKA_GROUP}:{artifact}:{v}"):
            return v
    return None


def fetch_report(version: str) -> dict:
    path = cache_root() / "kafka" / version / "lib.json"
    return json.loads(path.read_text()) if path.exists() else {}


# ---------------------------------------------------------------------------- Spark's connector
SPARK_GROUP = "org.apache.spark"
SPARK_CONNECTOR = "spark-sql-kafka-0-10_2.13"
# What `spark-submit --packages` leaves out (SparkSubmitUtils' exclusion rules): Spark's own
# modules, already on the classpath. Everything else of the runtime closure is added.
_SPARK_MODULES = ("catalyst", "core", "graphx", "kvstore", "launcher", "mllib", "mllib-local", "network-common",
                  "network-shuffle", "repl", "sketch", "sql", "streaming", "tags", "unsafe")


def spark_connector_coord(version: str) -> str:
    return f"{SPARK_GROUP}:{SPARK_CONNECTOR}:{version}"


def fetch_spark_connector(version: str) -> Path:
    """Directory with Spark's Kafka connector for Spark `version` and the jars it needs
    (kafka-clients, commons-pool2, spark-token-provider-kafka-0-10, ...), as `--packages` would
    resolve them; fetched once. Raises MavenError naming the coordinates when Maven fails
    (e.g. a version whose connector Maven Central does not serve)."""
    excludes = [(SPARK_GROUP, f"spark-{m}_2.13") for m in _SPARK_MODULES]
    dep = Dep(SPARK_GROUP, SPARK_CONNECTOR, version, excludes=excludes)
    return _fetch("lib", version, [dep], home=cache_root() / "spark-connector" / version)


def spark_jars(lib: Path) -> str:
    """The value of `spark.jars` for the jars in `lib` (comma-separated paths, connector first)."""
    jars = sorted(lib.glob("*.jar"), key=lambda p: (not p.name.startswith(SPARK_CONNECTOR), p.name))
    return ",".join(str(p) for p in jars)


def classpath(lib: Path) -> str:
    return os.pathsep.join(str(p) for p in sorted(lib.glob("*.jar")))


def spark_connector_main(argv: list[str] | None = None) -> int:
    """scripts/spark-connector [VERSION]: fetches Spark's Kafka connector for VERSION (default:
    the installed PySpark's) and prints the `spark.jars` value."""
    import argparse
    import sys
    parser = argparse.ArgumentParser(prog="scripts/spark-connector", description=spark_connector_main.__doc__)
    parser.add_argument("version", nargs="?", help="Spark version (default: the installed PySpark's)")
    args = parser.parse_args(argv)
    version = args.version
    if version is None:
        import pyspark
        version = pyspark.__version__
    try:
        print(spark_jars(fetch_spark_connector(version)))
    except MavenError as exc:
        print(f"spark-connector: {exc}", file=sys.stderr)
        return 2
    return 0
