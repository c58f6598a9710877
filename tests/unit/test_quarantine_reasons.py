"""The quarantine reasons have one list (state/quarantine_reasons.py): every reason belongs to
one input kind, docs/metrics.md documents each, and no production module spells one out again."""
from __future__ import annotations

import re
from pathlib import Path

from sinks.recorders import QUARANTINE_REASONS
from state.quarantine_reasons import BROKER_LOG_REASONS, OFFSETS_REASONS, QuarantineReason

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("state", "streaming", "sinks", "dashboards")


def test_every_reason_belongs_to_one_input_kind():
    assert sorted(BROKER_LOG_REASONS + OFFSETS_REASONS) == sorted(QuarantineReason)
    assert not set(BROKER_LOG_REASONS) & set(OFFSETS_REASONS)
    assert QUARANTINE_REASONS == {"broker_log": BROKER_LOG_REASONS, "offsets": OFFSETS_REASONS}


def test_docs_metrics_lists_every_reason():
    doc = (ROOT / "docs" / "metrics.md").read_text()
    row = next(line for line in doc.splitlines() if line.startswith("| label values | `reason`:"))
    assert sorted(re.findall(r"`([a-z_]+)`", row.split("`cluster`")[0])[1:]) == sorted(QuarantineReason)


def test_no_module_spells_a_reason_out():
    literal = re.compile("[\"'](" + "|".join(QuarantineReason) + ")[\"']")
    found = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
             for package in PACKAGES for path in sorted((ROOT / package).rglob("*.py"))
             if path.name != "quarantine_reasons.py"
             for n, line in enumerate(path.read_text().splitlines(), 1)
             if literal.search(line.split("#")[0])]
    assert found == []
