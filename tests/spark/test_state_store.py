"""The `state_store` setting (streaming/spark/session.py STATE_STORES): with RocksDB the replay of a
real capture gives the golden outputs byte for byte, and the checkpoint is RocksDB's (its changelog
files), so the setting reaches Spark; Spark keeps a checkpoint's own provider on restart."""
from __future__ import annotations

import json

import pytest

from streaming.spark.session import STATE_STORE_PROVIDER, STATE_STORES, state_store_conf
from tests.support.capture_expectations import capture_inputs
from tests.support.golden import differing_files


def test_each_setting_names_a_provider_spark_has(spark):
    jvm = spark.sparkContext._jvm
    for name in STATE_STORES:
        provider = state_store_conf(name)[STATE_STORE_PROVIDER]
        assert jvm.java.lang.Class.forName(provider).getName() == provider


@pytest.mark.parametrize("capture", ["kafka-4.0"])
def test_a_replay_on_rocksdb_gives_the_golden_outputs(spark, tmp_path, capture):
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load
    settings = load(ReplaySettings, state_store="rocksdb")
    before = {key: spark.conf.get(key, None) for key in state_store_conf("rocksdb")}
    for key, value in state_store_conf(settings.state_store).items():
        spark.conf.set(key, value)
    try:
        logs, offsets = capture_inputs(capture)
        replay(spark, settings, logs, offsets, out_dir=str(tmp_path / "out"), checkpoint_dir=str(tmp_path / "ckpt"))
    finally:
        for key, value in before.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)
    assert differing_files(capture, tmp_path / "out") == []
    state = tmp_path / "ckpt" / "state"
    assert list(state.rglob("*.changelog")), "no RocksDB changelog in the checkpoint's state"
    assert not list(state.rglob("*.delta")), "HDFS-backed delta files in a RocksDB checkpoint"


def test_the_replay_command_passes_the_setting_to_spark(monkeypatch, tmp_path, capsys):
    """`replay` with REBALANCE_MONITOR_STATE_STORE=rocksdb asks for RocksDB's settings; `spark_conf`
    still wins over them."""
    import streaming.spark.session as session
    from streaming.app.cli import main
    from tests.support.capture_expectations import capture_inputs

    asked: list[dict] = []

    class Stop(Exception):
        pass

    def get_spark(*args, conf=None, **kw):
        asked.append(dict(conf or {}))
        raise Stop
    monkeypatch.setattr(session, "get_spark", get_spark)
    logs, offsets = capture_inputs("kafka-2.7")
    argv = ["replay", "--broker-log", logs[0].path, "--offsets", offsets[0].path, "--out", str(tmp_path / "out")]
    monkeypatch.setenv("REBALANCE_MONITOR_STATE_STORE", "rocksdb")
    with pytest.raises(Stop):
        main(argv)
    assert asked[-1][STATE_STORE_PROVIDER].endswith("RocksDBStateStoreProvider")
    monkeypatch.setenv("REBALANCE_MONITOR_SPARK_CONF", json.dumps({STATE_STORE_PROVIDER: "x.Mine"}))
    with pytest.raises(Stop):
        main(argv)
    assert asked[-1][STATE_STORE_PROVIDER] == "x.Mine"
    monkeypatch.setenv("REBALANCE_MONITOR_STATE_STORE", "leveldb")
    assert main(argv) == 2
    assert "state_store" in capsys.readouterr().err
