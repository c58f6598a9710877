"""The replay outputs of both captures equal the committed golden files byte for byte
(tests/fixtures/golden/README.md): moving or rewriting code must not change a single record."""
from __future__ import annotations

import pytest

from tests.support.golden import CAPTURES, differing_files


@pytest.mark.parametrize("capture", CAPTURES)
def test_replay_outputs_equal_golden(replay_capture, capture):
    _, out = replay_capture(capture)
    assert differing_files(capture, out) == [], f"{capture}: outputs differ from tests/fixtures/golden"
