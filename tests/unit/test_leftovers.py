"""The session-end check of tests/support/leftovers.py (issue 52): a pytest run whose test starts a
process and forgets it fails, naming it, and the process is killed; a run that ends what it
starts passes. Each case is a pytest run of its own on a one-test file, with the plugin."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _pytest(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    (tmp_path / "test_case.py").write_text("import subprocess\n\n\ndef test_case():\n" + body)
    env = dict(os.environ, PYTHONPATH=str(ROOT), LEFTOVER_GRACE_SECONDS="1")
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:cloudcoil",
                           "-p", "tests.support.leftovers", "test_case.py"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)


def _running(pattern: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()


def test_a_forgotten_child_and_a_daemon_fail_the_session_and_are_killed(tmp_path):
    # a child left running, and a daemon (its parent, sh, exits: init is its parent)
    result = _pytest(tmp_path, '    subprocess.Popen(["sleep", "423.25"])\n'
                               '    subprocess.run(["sh", "-c", "sleep 423.5 >/dev/null 2>&1 &"])\n')
    out = result.stdout + result.stderr
    assert result.returncode == 1, out
    assert "1 passed" in out and "2 process(es) left running by the test run" in out, out
    assert "sleep 423.25" in out and "sleep 423.5" in out, out
    deadline = time.monotonic() + 10
    while (_running("sleep 423.25") or _running("sleep 423.5")) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _running("sleep 423.25") and not _running("sleep 423.5")


def test_a_session_that_ends_what_it_starts_passes(tmp_path):
    result = _pytest(tmp_path, '    proc = subprocess.Popen(["sleep", "423.75"])\n'
                               '    proc.terminate()\n    proc.wait()\n')
    out = result.stdout + result.stderr
    assert result.returncode == 0, out
    assert "left running" not in out
