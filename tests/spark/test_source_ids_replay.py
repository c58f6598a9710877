"""A replay of two server.log files with the same name in different folders keeps two sources."""
from __future__ import annotations

import pytest

from tests.support.capture_expectations import two_server_logs


@pytest.mark.spark
def test_replay_keeps_two_sources(spark, tmp_path):
    from streaming.app.replay import replay
    from streaming.app.settings import ReplaySettings, load
    collector = replay(spark, load(ReplaySettings), *two_server_logs(tmp_path))
    assert {c["source"] for c in collector.clock_skew} == {"default:broker1/server.log", "default:broker2/server.log"}
    assert len(collector.rebalances) + len(collector.in_progress_rebalances()) == 82
