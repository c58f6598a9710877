"""The local Spark JVM's class archive (streaming/spark/jvm_archive.py): where it is, the options
that use it, and a training run that fails leaving none."""
from __future__ import annotations

import os
import sys

import pytest

from streaming.app import class_archive
from streaming.spark import jvm_archive
from streaming.spark.session import DRIVER_JAVA_OPTIONS, LOCAL_GC, with_local_jvm_options


@pytest.fixture
def venv(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "prefix", str(tmp_path))
    monkeypatch.delenv(jvm_archive.DUMP_ENV, raising=False)
    return tmp_path


def test_no_archive_no_options(venv):
    assert jvm_archive.java_options() == ""
    assert with_local_jvm_options({"spark.x": "1"}) == {"spark.x": "1", DRIVER_JAVA_OPTIONS: LOCAL_GC}


def test_an_archive_is_mapped_before_the_users_own_options(venv):
    path = jvm_archive.archive_path()
    assert path is not None and path.parent == venv / "jvm"
    path.parent.mkdir()
    path.write_bytes(b"archive")
    assert jvm_archive.java_options().startswith(f"-XX:SharedArchiveFile={path} ")
    assert "-Xlog:cds=off,cds+dynamic=off" in jvm_archive.java_options()   # an unusable one warns no one
    conf = with_local_jvm_options({DRIVER_JAVA_OPTIONS: "-Dmine=1"})
    assert conf[DRIVER_JAVA_OPTIONS] == f"{LOCAL_GC} {jvm_archive.java_options()} -Dmine=1"
    assert with_local_jvm_options({})[DRIVER_JAVA_OPTIONS] == f"{LOCAL_GC} {jvm_archive.java_options()}"


@pytest.mark.parametrize("user", ["-XX:+UseG1GC", "-Dx=1 -XX:+UseZGC -Xss4m", "-XX:+UseParallelGC",
                                  "-XX:+UseSerialGC"])
def test_a_collector_the_user_chose_is_the_only_one(venv, user):
    # two collectors selected stop the JVM at start ("multiple garbage collectors selected")
    assert with_local_jvm_options({DRIVER_JAVA_OPTIONS: user})[DRIVER_JAVA_OPTIONS] == user


@pytest.mark.parametrize("user", ["-XX:+UseStringDeduplication", "-XX:+UseGCOverheadLimit", "-XX:-UseSerialGC",
                                  "-XX:+UseAdaptiveSizePolicyWithSystemGC"])
def test_other_options_keep_the_serial_collector(venv, user):
    assert with_local_jvm_options({DRIVER_JAVA_OPTIONS: user})[DRIVER_JAVA_OPTIONS] == f"{LOCAL_GC} {user}"


def test_the_training_run_dumps_where_it_is_told(venv, monkeypatch):
    monkeypatch.setenv(jvm_archive.DUMP_ENV, str(venv / "x.tmp"))
    assert jvm_archive.java_options().startswith(f"-XX:ArchiveClassesAtExit={venv / 'x.tmp'} ")


def test_the_archive_belongs_to_one_jdk(venv, tmp_path, monkeypatch):
    homes = []
    for name in ("jdk-a", "jdk-b"):
        java = tmp_path / name / "bin" / "java"
        java.parent.mkdir(parents=True)
        java.write_text("#!/bin/sh\nexit 1\n")
        java.chmod(0o755)
        homes.append(tmp_path / name)
    paths = []
    for home in homes:
        monkeypatch.setenv("JAVA_HOME", str(home))
        paths.append(jvm_archive.archive_path())
    assert paths[0] != paths[1]


def test_a_failed_training_run_leaves_no_archive_and_says_so(venv, tmp_path, monkeypatch, capsys):
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\necho 'no java here' >&2\nexit 1\n")
    java.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(java.parent.parent))
    assert class_archive.make_archive() is None
    assert not any(p.suffix in (".jsa", ".tmp") for p in (venv / "jvm").iterdir())
    err = capsys.readouterr().err
    assert err.startswith("class_archive: no class archive (Spark starts without it; ") and err.count("\n") == 1
    assert jvm_archive.java_options() == ""
    assert os.environ.get(jvm_archive.DUMP_ENV) is None
    # not tried again (scripts/bootstrap asks before every command): no run, no message
    import subprocess

    def run(*args, **kwargs):
        raise AssertionError("trained again")
    monkeypatch.setattr(subprocess, "run", run)
    assert class_archive.make_archive() is None
    assert capsys.readouterr().err == ""
