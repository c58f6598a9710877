"""The defaults `--help` states are the settings' own (issue 29: `run --help` said a 10 s trigger
and a 30 s lateness where `run` uses 0.5 s and 10 s)."""
from __future__ import annotations

import argparse
import re

import pytest

from streaming.app.cli import build_parser
from streaming.app.settings import DemoSettings, ReplaySettings, RunSettings


def _help(command: str) -> str:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return " ".join(sub.choices[command].format_help().split())


def _default(settings, key: str) -> str:
    value = settings.model_fields[key].default
    return str(value) if isinstance(value, int) else f"{value:g}"


@pytest.mark.parametrize("command", ["replay", "demo", "run"])
def test_the_help_states_the_defaults_the_command_uses(command):
    text = _help(command)
    if command != "demo":        # the demo replays with the defaults
        lateness = re.search(r"--lateness-seconds S watermark delay .*?\(default (\S+); run: (\S+)\)", text)
        assert lateness and (lateness.group(1), lateness.group(2)) == \
            (_default(ReplaySettings, "lateness_seconds"), _default(RunSettings, "lateness_seconds"))
        assert (lateness.group(1), lateness.group(2)) == ("30", "10")
    if command == "run":
        trigger = re.search(r"micro-batch interval \(default (\S+)\)", text)
        assert trigger and trigger.group(1) == _default(RunSettings, "trigger_interval_seconds") == "0.5"
    else:
        rows = re.search(r"event rows per micro-batch, .*?\(default: replay (\d+), demo (\d+)\)", text)
        assert rows and rows.groups() == (_default(ReplaySettings, "max_rows_per_batch"),
                                          _default(DemoSettings, "max_rows_per_batch"))
