"""docs/ is a contract: every setting and every exported metric is documented."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

from prometheus_client import CollectorRegistry

ROOT = Path(__file__).resolve().parents[2]


def test_every_setting_is_in_the_configuration_reference():
    from streaming.app.settings import COMMANDS, KafkaSettings
    text = (ROOT / "docs" / "configuration.md").read_text()
    for settings_cls in COMMANDS:
        for name in settings_cls.model_fields:
            if name != "kafka":
                assert f"`{name}`" in text, name
    for name in KafkaSettings.model_fields:
        assert f"`kafka.{name}`" in text, name


def test_example_config_is_valid(tmp_path):
    from streaming.app.settings import RunSettings
    doc = tomllib.loads((ROOT / "docs" / "monitor.example.toml").read_text())
    doc["kafka"].pop("client_secret_files")     # names files that exist only in a pod
    settings = RunSettings(**doc)
    assert settings.kafka.log_topics == ["kafka-broker-logs"]


def test_every_metric_is_in_docs_metrics():
    from sinks.metrics import MetricsSink
    sink = MetricsSink([1.0], registry=CollectorRegistry())
    text = (ROOT / "docs" / "metrics.md").read_text()
    names = set()
    for metric in sink.registry.collect():
        names.add(metric.name)
    assert len(names) > 20
    for name in sorted(names):
        documented = f"### {name}" in text or f"### {name}_total" in text
        assert documented, f"{name} is not documented in docs/metrics.md"


def test_metrics_doc_lists_every_root_cause():
    from state.diagnosis.rules import ROOT_CAUSES
    text = (ROOT / "docs" / "metrics.md").read_text()
    row = next(line for line in text.splitlines() if line.startswith("| label values | `cause`:")
               and "`root_cause`" in line)
    listed = row.split("`root_cause`:", 1)[1]
    assert [c for c in ROOT_CAUSES if f"`{c}`" not in listed] == []
    assert "always `unknown`" not in listed


def test_design_doc_tree_lists_every_module():
    """docs/design.md "The tree" has a line for every module of state/, streaming/ and sinks/."""
    text = (ROOT / "docs" / "design.md").read_text()
    tree = text.split("## The tree", 1)[1].split("```", 2)[1]
    # every path in the tree, from its indentation
    listed: set[str] = set()
    stack: list[str] = []
    for line in tree.splitlines():
        if not line.strip():
            continue
        name = line.split()[0]
        depth = (len(line) - len(line.lstrip())) // 2
        stack = stack[:depth] + [name.rstrip("/")]
        listed.add("/".join(stack) + ("/" if name.endswith("/") else ""))
    missing = []
    for package in ("state", "streaming", "sinks"):
        for path in sorted((ROOT / package).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if path.name == "__init__.py":
                if path.read_text().strip() and f"{path.parent.relative_to(ROOT).as_posix()}/" not in listed:
                    missing.append(rel)
                continue
            if rel not in listed:
                missing.append(rel)
    assert missing == []


def test_configuration_reference_says_which_commands_take_each_key():
    """The `commands` column of docs/configuration.md equals the settings classes' fields."""
    import re

    from streaming.app.settings import COMMANDS, KafkaSettings
    text = (ROOT / "docs" / "configuration.md").read_text()
    documented = {}
    for line in text.splitlines():
        m = re.match(r"\| `([a-z_]+)` \| [^|]+ \| [^|]+ \| [^|]+ \| ([^|]+) \|", line)
        if m:
            documented[m.group(1)] = {c.split("(")[0].strip() for c in m.group(2).split(",")}
    expected: dict[str, set[str]] = {}
    for settings_cls, command in COMMANDS.items():
        for name in settings_cls.model_fields:
            if name != "kafka":   # documented key by key (kafka.*)
                expected.setdefault(name, set()).add(command)
    assert documented == expected
    for name in KafkaSettings.model_fields:
        assert f"`kafka.{name}`" in text, name


def _cli_actions():
    """(command, action) for every flag and positional of every `rebalance-monitor` command."""
    import argparse

    from streaming.app.cli import build_parser
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    commands = {choice.dest: choice.help for choice in sub._choices_actions}
    for name, parser in sub.choices.items():
        assert (commands.get(name) or "").strip(), f"`rebalance-monitor {name}` has no help text"
        for action in parser._actions:
            if not isinstance(action, argparse._HelpAction):
                yield name, action


def test_every_cli_flag_has_a_description():
    """`--help` of every command describes every flag and argument it takes."""
    import argparse
    undocumented = [f"{command} {'/'.join(action.option_strings) or action.dest}"
                    for command, action in _cli_actions()
                    if not (action.help or "").strip() or action.help == argparse.SUPPRESS]
    assert undocumented == []
    assert len(list(_cli_actions())) > 30


def test_every_cli_flag_is_in_the_configuration_reference():
    """docs/configuration.md names every flag of every command, and the setting each sets."""
    from streaming.app.cli.options import SETTING_KEYS
    text = (ROOT / "docs" / "configuration.md").read_text()
    missing = sorted({flag for _, action in _cli_actions() for flag in action.option_strings
                      if f"`{flag}" not in text})
    assert missing == []
    assert sorted(key for key in SETTING_KEYS if f"`{key}`" not in text) == []


# A path the docs cite (`streaming/spark/session.py`), or a module's name with what it defines
# (`streaming/spark/session.live_conf`); a prefix of files (`tests/fixtures/kafka-2.7/broker{1,2}.log`).
CITED = re.compile(
    r"(?<![\w./-])((?:state|streaming|sinks|dashboards|tests|testbed|bench|scripts|helm|alerts|docs)/[\w./-]*\w)")
DOC_FILES = ("README.md", "helm/README.md", "dashboards/README.md", "docs/*.md", "tests/**/README.md",
             "testbed/**/README.md")


# Folders the docs name that a command makes on first use (git ignores them).
GENERATED = ("bench/.data",)


def _cited_exists(path: str) -> bool:
    if path.startswith(GENERATED):
        return True
    if (ROOT / path).exists() or any(ROOT.glob(path + "*")):
        return True
    module, _, name = path.rpartition(".")
    source = ROOT / f"{module}.py"
    return source.is_file() and re.search(rf"^\s*(?:def|class)\s+{name}\b|^\s*{name}\s*[:=]", source.read_text(),
                                          re.M) is not None


def test_every_file_the_docs_cite_exists():
    missing = [f"{doc.relative_to(ROOT)}:{n}: {path}"
               for pattern in DOC_FILES for doc in sorted(ROOT.glob(pattern))
               for n, line in enumerate(doc.read_text().splitlines(), 1)
               for path in CITED.findall(line) if not _cited_exists(path.rstrip("."))]
    assert missing == []


def test_the_event_sink_folders_are_in_the_configuration_reference():
    from sinks.files import RECORD_FILES
    row = next(line for line in (ROOT / "docs" / "configuration.md").read_text().splitlines()
               if line.startswith("| `events_dir`"))
    assert all(f"`{folder}/`" in row for folder in RECORD_FILES.values()), row


def test_every_record_field_is_in_docs_output():
    """Every field of the records the golden replays wrote (rebalances, removals, trigger decisions
    with their impact corrections, group snapshots' top level) is named in docs/output.md."""
    import json
    text = (ROOT / "docs" / "output.md").read_text()
    golden = ROOT / "tests" / "fixtures" / "golden"
    missing = set()
    for name in ("rebalances.jsonl", "member_removals.jsonl", "rebalance_triggers.jsonl"):
        for capture in ("kafka-2.7", "kafka-4.0"):
            for line in (golden / capture / name).read_text().splitlines():
                missing |= {f"{name}: {key}" for key in json.loads(line) if f"`{key}`" not in text}
    assert not missing, sorted(missing)


# README, docs/benchmarks.md, docs/kafka-matrix.md and docs/design.md say what is true now
# (issue 52): short, no history, and the README's table of proof holds the figures of the docs
# it summarises, each with its command.
DOC_LIMITS = {"README.md": 120, "docs/benchmarks.md": 400, "docs/kafka-matrix.md": 150, "docs/design.md": 600}
NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?")
DATE = re.compile(r"\b20\d\d-\d\d-\d\d\b")


def _numbers(text: str) -> list[str]:
    return [n.replace(",", "") for n in NUMBER.findall(text)]


def _section(text: str, heading: str) -> str:
    """The text under `heading` (a whole line) up to the next heading of its level or higher."""
    level = heading.split()[0]
    lines = text.splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines))
                if lines[i].startswith("#") and len(lines[i].split()[0]) <= len(level)), len(lines))
    return "\n".join(lines[start:end])


def _first_table(text: str) -> list[list[str]]:
    """The cells of the first markdown table's body rows in `text` (header and rule left out)."""
    rows: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert len(rows) > 2, "no table"
    return rows[2:]


def test_docs_that_state_the_present_keep_their_length():
    for name, limit in DOC_LIMITS.items():
        lines = (ROOT / name).read_text().count("\n")
        assert lines <= limit, f"{name}: {lines} lines, at most {limit}"


def test_readme_has_no_history():
    text = (ROOT / "README.md").read_text()
    hashes = [w for w in re.findall(r"\b[0-9a-f]{7,40}\b", text) if re.search(r"[a-f]", w) and re.search(r"\d", w)]
    assert hashes == [], hashes
    assert re.findall(r"\bin (?:\w+|\d+) of (?:\w+|\d+) runs\b", text) == []


def _readme_proof() -> list[list[str]]:
    rows = _first_table(_section((ROOT / "README.md").read_text(), "## Proof"))
    for row in rows:
        assert len(row) == 4 and DATE.fullmatch(row[2]) and re.fullmatch(r"`[\w./-]+(?: [^`]+)?`", row[3]), row
    return rows


def test_readme_speed_and_cost_figures_are_those_of_benchmarks():
    """Each row of the README's table of proof that a bench measures has the row of
    docs/benchmarks.md's "Current figures" with the same command, and every number of it (the
    figure, its subject, its date) is in that row."""
    current = _first_table(_section((ROOT / "docs" / "benchmarks.md").read_text(), "## Current figures"))
    by_command = {}
    for row in current:
        assert len(row) == 4 and DATE.fullmatch(row[2]) and row[3].startswith("`"), row
        script = row[3].strip("`").split()[0]
        assert (ROOT / script).is_file(), f"{script}: no such bench"
        assert row[3] not in by_command, f"two current rows for {row[3]}"
        by_command[row[3]] = row
    benches = [row for row in _readme_proof() if not row[3].startswith("`scripts/kafka-matrix")]
    assert len(benches) >= 5
    for row in benches:
        assert row[3] in by_command, f"{row[3]} has no current figure in docs/benchmarks.md"
        assert row[2] == by_command[row[3]][2], f"README's {row[0]!r} is dated {row[2]}, the current figure not"
        source = set(_numbers(" ".join(by_command[row[3]][:3])))
        missing = [n for n in _numbers(" ".join(row[:3])) if n not in source]
        assert missing == [], f"README's {row[0]!r}: {missing} not in docs/benchmarks.md's current row"


def test_readme_kafka_figures_are_those_of_the_matrix():
    """Each Kafka version of the README's table of proof has the matrix's current run: its date,
    scenarios passed, rebalances and removals; "every trigger and cause right" only when the run
    found them all right."""
    matrix = _section((ROOT / "docs" / "kafka-matrix.md").read_text(), "## The current run")
    runs = {row[0]: row for row in _first_table(matrix)}
    kafka = [row for row in _readme_proof() if row[3].startswith("`scripts/kafka-matrix")]
    def version(row: list[str]) -> str:
        found = re.search(r"Kafka ([\d.]+)", row[0])
        assert found, row
        return found.group(1)
    assert {version(row) for row in kafka} == set(runs)
    for row in kafka:
        run = runs[version(row)]
        assert row[2] in matrix, f"{row[0]}: the matrix's current run is not of {row[2]}"
        scenarios, passed, rebalances, removals, triggers, causes = run[1:7]
        m = re.search(r"(\d+) of (\d+) scenarios; rebalances (\d+/\d+), removals (\d+/\d+)", row[1])
        assert m and m.groups() == (passed, scenarios, rebalances, removals), (row, run)
        if "every trigger and cause right" in row[1]:
            found_rebalances, found_removals = rebalances.split("/")[1], removals.split("/")[1]
            assert triggers == f"{found_rebalances}/{found_rebalances}", run
            assert causes == f"{found_removals}/{found_removals}", run


# A citation of a doc's section: `docs/design.md, "Replay in two stages"` (or without the comma),
# in code, tests and docs, possibly broken over lines or comment lines.
SECTION_CITE = re.compile(r"(?<![\w./-])((?:docs/[\w-]+|[\w/-]*README)\.md),?\s+\(?\"([^\"]{3,80})\"")


def test_every_cited_section_exists():
    """A section that code, tests or docs cite by name is a heading (or a paragraph's bold lead-in)
    of the doc they name: moving a doc's text must keep its sections or update the citations."""
    import subprocess
    files = subprocess.run(["git", "ls-files", "*.py", "*.md", "*.yaml", "*.yml", "*.toml", "scripts/*"],
                           cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    missing = []
    for name in files:
        path = ROOT / name
        if not path.is_file():
            continue
        flat = re.sub(r"\s*\n\s*(?:#\s*)?", " ", path.read_text(errors="replace"))
        for doc, section in SECTION_CITE.findall(flat):
            target = ROOT / doc if (ROOT / doc).is_file() else path.parent / doc
            if not target.is_file():
                continue
            text = target.read_text()
            titles = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
            titles += re.findall(r"\*\*([^*]+)\*\*", text)
            if not any(title.startswith(section.rstrip(".")) for title in titles):
                missing.append(f"{name}: {doc}, {section!r}")
    assert missing == []
