"""Releases and artifacts: the patch releases of every minor line, the jars that hold the group
coordinator, and downloading them (sources and, where none are served, binary jars) with `mvn`
into the cache."""
from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

CACHE = Path(os.environ.get("REBALANCE_MONITOR_SOURCES_CACHE",
                            Path.home() / ".cache" / "rebalance-monitor" / "sources"))
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.6.1"

# ---------------------------------------------------------------------------------------------
# Releases and artifacts
# ---------------------------------------------------------------------------------------------

# Patch releases per minor line as listed by Maven Central's maven-metadata.xml (2026-11), newest
# first. The first one whose sources jars are served is used; the others are fallbacks.
PATCHES: dict[str, list[str]] = {
    "0.10.2": ["0.10.2.2", "0.10.2.1", "0.10.2.0"],
    "0.11": ["0.11.0.3", "0.11.0.2", "0.11.0.1", "0.11.0.0"],
    "1.0": ["1.0.2", "1.0.1", "1.0.0"],
    "1.1": ["1.1.1", "1.1.0"],
    "2.0": ["2.0.1", "2.0.0"],
    "2.1": ["2.1.1", "2.1.0"],
    "2.2": ["2.2.2", "2.2.1", "2.2.0"],
    "2.3": ["2.3.1", "2.3.0"],
    "2.4": ["2.4.1", "2.4.0"],
    "2.5": ["2.5.1", "2.5.0"],
    "2.6": ["2.6.3", "2.6.2", "2.6.1", "2.6.0"],
    "2.7": ["2.7.2", "2.7.1", "2.7.0"],
    "2.8": ["2.8.2", "2.8.1", "2.8.0"],
    "3.0": ["3.0.2", "3.0.1", "3.0.0"],
    "3.1": ["3.1.2", "3.1.1", "3.1.0"],
    "3.2": ["3.2.3", "3.2.2", "3.2.1", "3.2.0"],
    "3.3": ["3.3.2", "3.3.1", "3.3.0"],
    "3.4": ["3.4.1", "3.4.0"],
    "3.5": ["3.5.2", "3.5.1", "3.5.0"],
    "3.6": ["3.6.2", "3.6.1", "3.6.0"],
    "3.7": ["3.7.2", "3.7.1", "3.7.0"],
    "3.8": ["3.8.1", "3.8.0"],
    "3.9": ["3.9.2", "3.9.1", "3.9.0"],
    "4.0": ["4.0.2", "4.0.1", "4.0.0"],
    "4.1": ["4.1.2", "4.1.1", "4.1.0"],
    "4.2": ["4.2.2", "4.2.1", "4.2.0"],
    "4.3": ["4.3.1", "4.3.0"],
    "4.4": ["4.4.0"],
}
MAIN_LINES = [m for m in PATCHES if m not in ("0.10.2", "0.11", "1.0")]   # 1.1 .. 4.4
OLD_LINES = ["0.10.2", "0.11", "1.0"]                                     # wordings that differ only


def _vkey(minor: str) -> tuple[int, ...]:
    return tuple(int(p) for p in minor.split("."))


def artifacts_for(minor: str) -> list[str]:
    """Maven artifact ids (group org.apache.kafka) whose sources hold coordinator code in `minor`."""
    k = _vkey(minor)
    out = []
    if k <= (4, 1):   # Scala coordinator (..4.0), Scala CoordinatorLoaderImpl (3.6-4.1)
        out.append("kafka_2.12" if k < (2, 4) else "kafka_2.13")
    # 4.2+: kafka_2.13's kafka/coordinator/group/ holds only CoordinatorPartitionWriter, which logs
    # nothing (checked in 4.2.1 and 4.3.1); its sources jar is not served for 4.2.2 and 4.4.0.
    if k >= (3, 5):
        out.append("kafka-group-coordinator")                # Java coordinator (3.7+ usable)
    if k >= (4, 0):
        out.append("kafka-coordinator-common")               # CoordinatorRuntime & co. (4.0+)
    return out


def _mvn_copy(artifact: str, version: str, dest: Path) -> tuple[bool, str]:
    dest.mkdir(parents=True, exist_ok=True)
    cmd = ["mvn", "-B", "-q", f"{DEPENDENCY_PLUGIN}:copy",
           f"-Dartifact=org.apache.kafka:{artifact}:{version}:jar:sources",
           f"-DoutputDirectory={dest}", "-Dmdep.overWriteReleases=false"]
    proc = subprocess.run(cmd, cwd=dest, capture_output=True, text=True)
    if proc.returncode == 0:
        return True, ""
    lines = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in (proc.stdout + proc.stderr).splitlines() if "ERROR" in ln]
    return False, (lines[0] if lines else f"mvn exit {proc.returncode}")


def jar_path(version: str, artifact: str) -> Path:
    return CACHE / version / f"{artifact}-{version}-sources.jar"


def resolve(minor: str, offline: bool, problems: list[str]) -> str | None:
    """The newest patch of `minor` whose sources jars are all present (downloading if allowed)."""
    for version in PATCHES[minor]:
        ok = True
        for artifact in artifacts_for(minor):
            path = jar_path(version, artifact)
            if path.exists():
                continue
            if offline:
                ok = False
                problems.append(f"{minor}: {path} not in the cache (--offline)")
                break
            good, err = _mvn_copy(artifact, version, path.parent)
            if not good or not path.exists():
                ok = False
                problems.append(f"{minor}: org.apache.kafka:{artifact}:{version}:jar:sources not served: {err}")
                break
        if ok:
            return version
    return None


# Binary jars: releases whose sources jars are not served are read from their compiled classes
# (scripts/coordinator_templates/bytecode.py).
BINARY_ARTIFACTS = ("kafka-group-coordinator", "kafka-coordinator-common")


def binary_jar_path(version: str, artifact: str) -> Path:
    return CACHE / version / f"{artifact}-{version}.jar"


def resolve_binary(minor: str, offline: bool, problems: list[str], only: str = "") -> str | None:
    for version in ([only] if only else PATCHES[minor]):
        ok = True
        for artifact in BINARY_ARTIFACTS:
            path = binary_jar_path(version, artifact)
            if path.exists():
                continue
            if offline:
                ok = False
                break
            path.parent.mkdir(parents=True, exist_ok=True)
            proc = subprocess.run(
                ["mvn", "-B", "-q", f"{DEPENDENCY_PLUGIN}:copy",
                 f"-Dartifact=org.apache.kafka:{artifact}:{version}:jar", f"-DoutputDirectory={path.parent}"],
                cwd=path.parent, capture_output=True, text=True)
            if proc.returncode != 0 or not path.exists():
                problems.append(f"{minor}: org.apache.kafka:{artifact}:{version}:jar not served either")
                ok = False
                break
        if ok:
            return version
    return None

