"""The figures a check's tests measured, summed up in the check's last line (scripts/spark-cluster-check,
scripts/lag-check). The script names a file in an environment variable; each test appends what it
measured to it (one JSON object per line) before it asserts on it, so a failed test still leaves
what it saw; the script then prints `name=value ...` and exits non-zero when a figure misses."""
from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# (figure, how its values over the tests combine, whether the combined value passes)
Figure = tuple[str, Callable[[list], Any], Callable[[Any], bool]]


def record_figure(env: str, name: str, value: object) -> None:
    """Appends a figure to the file `env` names (nothing when unset: a plain pytest run)."""
    path = os.environ.get(env)
    if path:
        with open(path, "a") as handle:
            handle.write(json.dumps({"name": name, "value": value,
                                     "test": os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]}) + "\n")


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def summary(path: Path, figures: Iterable[Figure]) -> tuple[str, bool]:
    """(the last line, whether every figure passes); a figure no test recorded (its test failed
    before measuring it) is `missing`, and fails."""
    recorded: dict[str, list] = {}
    for line in path.read_text().splitlines() if path.exists() else []:
        entry = json.loads(line)
        recorded.setdefault(entry["name"], []).append(entry["value"])
    parts, ok = [], True
    for name, combine, passes in figures:
        if name not in recorded:
            parts.append(f"{name}=missing")
            ok = False
            continue
        value = combine(recorded[name])
        ok &= bool(passes(value))
        parts.append(f"{name}={_text(value)}")
    return " ".join(parts), ok
