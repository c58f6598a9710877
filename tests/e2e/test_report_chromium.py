"""The report as a browser shows it: `rebalance-monitor report` of the bundled captures' replay
outputs (tests/fixtures/golden: what `replay` writes for them, the demo's input) rendered by headless
Chromium (Debian's `chromium`; scripts/test installs it). The DOM Chromium builds has one section per
group, one bar group per rebalance and one marker per removal of the outputs, and the diagnosis
rows; the screenshot is a real picture (size, many colours, the colours of the drawn elements)."""
from __future__ import annotations

import html
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.support.png import distinct_colours, read_png
from tests.support.report_pages import GOLDEN, elements, records

ROOT = Path(__file__).resolve().parents[2]
WINDOW = (1440, 2000)


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("chromium not installed (Debian package 'chromium'; scripts/test installs it)")
    return path


def _browser(tmp: Path, *args: str) -> subprocess.CompletedProcess:
    # --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
           f"--user-data-dir={tmp / 'profile'}", *args]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr[-2000:]
    return result


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """(the report file, the DOM Chromium serialised, the screenshot)."""
    tmp = tmp_path_factory.mktemp("report")
    page = tmp / "report.html"
    made = subprocess.run([sys.executable, "-m", "streaming.app.cli", "report", *map(str, GOLDEN), "-o", str(page)],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, made.stderr
    dom = _browser(tmp, "--dump-dom", page.as_uri()).stdout
    shot = tmp / "report.png"
    _browser(tmp, f"--screenshot={shot}", f"--window-size={WINDOW[0]},{WINDOW[1]}", page.as_uri())
    return page, dom, shot


def test_the_browser_dom_has_every_group_rebalance_removal_and_diagnosis_row(rendered):
    _, dom, _ = rendered
    rebalances, removals = records("rebalances.jsonl"), records("member_removals.jsonl")
    page = elements(dom)
    sections = page.having("section", "group")
    expected = Counter((r["cluster"], r["group"]) for r in rebalances)
    assert len(sections) == len({(r["cluster"], r["group"]) for r in rebalances + removals}) == 56
    # per group: as many rebalance bar groups and removal markers as records, in document order
    tags = page.tags
    starts = [i for i, (t, a) in enumerate(tags) if t == "section" and "group" in a.get("class", "")]
    for n, i in enumerate(starts):
        key = (tags[i][1]["data-cluster"], tags[i][1]["data-group"])
        inside = tags[i:starts[n + 1] if n + 1 < len(starts) else len(tags)]
        bars = [a for t, a in inside if t == "g" and a.get("class") == "rebalance"]
        markers = [a for t, a in inside if t == "path" and a.get("class") == "removal"]
        rows = [a for t, a in inside if t == "tr" and "removal-row" in a.get("class", "")]
        assert len(bars) == expected[key], key
        group_removals = [r for r in removals if (r["cluster"], r["group"]) == key]
        assert len(markers) == len(rows) == len(group_removals), key
        assert Counter(m["data-root-cause"] for m in markers) == Counter(r["root_cause"] for r in group_removals)
    # the fleet timeline counts every rebalance once (its bars' tooltips: "<n> <trigger> of <total> ...")
    assert len(page.having("svg", "fleet")) == 1
    assert len(page.having("rect", "bin")) > 10
    assert dom.count('class="group-row') == 56


def test_removal_markers_carry_their_evidence_on_hover(rendered):
    _, dom, _ = rendered
    tips = [html.unescape(t) for t in re.findall(r'<path class="removal"[^>]*><title>(.*?)</title>', dom, re.S)]
    assert len(tips) == 155
    for r in records("member_removals.jsonl"):
        assert any(r["member_id"] in t and r["evidence"] in t and r["root_cause"] in t for t in tips), r["member_id"]


def test_the_screenshot_is_a_picture_of_the_timelines(rendered):
    _, _, shot = rendered
    assert shot.stat().st_size > 50_000
    width, height, rows = read_png(shot)
    assert (width, height) == WINDOW
    bpp = len(rows[0]) // width
    colours = distinct_colours(rows, bpp, every=1)
    assert len(colours) > 200          # text, charts, swatches: not a blank or single-colour page
    from sinks.report.svg import PHASE_COLORS, ROOT_CAUSE_COLORS, TRIGGER_COLORS
    drawn = {"member_join bars of the fleet timeline": TRIGGER_COLORS["member_join"],
             "heartbeat_expiry bars": TRIGGER_COLORS["heartbeat_expiry"],
             "process_crash swatches": ROOT_CAUSE_COLORS["process_crash"],
             "KIP-848 reconciliation bars": PHASE_COLORS["reconciliation"]}
    missing = [name for name, hex_colour in drawn.items() if bytes.fromhex(hex_colour[1:]) not in colours]
    assert missing == []
