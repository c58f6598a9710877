"""The pager check's CI subset on Kafka 4.4.0 (issue 49): through `scripts/pager-check`, as on-call
would run it. A coordinator broker killed under a group pages once, as a broker death naming the
group; a rolling restart of three groups pages nobody. The whole catalogue (ten cases, about 15
minutes) is `scripts/pager-check` with no options (docs/runbooks.md)."""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_a_coordinator_kill_pages_once_and_a_rolling_restart_not_at_all(tmp_path):
    result = subprocess.run([str(ROOT / "scripts" / "pager-check"), "--only", "rolling_restart", "--only",
                             "coordinator_kill", "--out", str(tmp_path / "pager")],
                            capture_output=True, text=True, timeout=900, cwd=ROOT)
    last = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    figures = dict(item.split("=", 1) for item in last.split())
    assert figures["incidents"] == "1" and figures["paged"] == "1", last
    assert figures["pages_per_incident_max"] == "1" and figures["root_cause_right"] == "1", last
    assert figures["groups_right"] == "1" and figures["benign_pages"] == "0", last
    assert float(figures["page_p95_seconds"]) <= 60.0, last
    assert int(figures["deadman_pings"]) >= 1, last
