"""Versions -> rows: the templates and rebalance reasons of every release line, as JSON lines."""
from __future__ import annotations

import json
import re
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from scripts.coordinator_templates.bytecode import bytecode_calls, constant_strings
from scripts.coordinator_templates.examples import example_args, prefix_example_args
from scripts.coordinator_templates.loggers import JAVA_DIRS, PARTITION_PREFIX, SCALA_DIR, TOPIC_MANAGER_PREFIX_4_2
from scripts.coordinator_templates.reasons import REASON_FILES, extract_reasons
from scripts.coordinator_templates.releases import (
    BINARY_ARTIFACTS, MAIN_LINES, OLD_LINES, PATCHES, _vkey, artifacts_for, binary_jar_path, jar_path,
    resolve, resolve_binary,
)
from scripts.coordinator_templates.scope import in_scope
from scripts.coordinator_templates.sources import Call, extract_file, java_constants

# ---------------------------------------------------------------------------------------------
# Versions -> rows
# ---------------------------------------------------------------------------------------------

def source_files(version: str, minor: str) -> dict[str, tuple[str, str]]:
    """path -> (artifact, text) of the coordinator source files of one release."""
    files: dict[str, tuple[str, str]] = {}
    for artifact in artifacts_for(minor):
        with zipfile.ZipFile(jar_path(version, artifact)) as z:
            for name in sorted(z.namelist()):
                scala = name.endswith(".scala") and (
                        (name.startswith(SCALA_DIR) and name.count("/") == 3)
                        or (_vkey(minor) < (0, 11) and name.startswith("kafka/coordinator/") and name.count("/") == 2))
                java = name.endswith(".java") and name.startswith(JAVA_DIRS) and "/generated/" not in name
                if scala or java:
                    files[name] = (artifact, z.read(name).decode("utf-8"))
    return files


@dataclass
class Row:
    logger: str
    level: str
    template: str | None
    prefix: str
    versions: set = field(default_factory=set)
    newest: tuple = ()          # (version key, source, exprs, notes, scala)
    message_expr: str = ""


def collect(resolved: dict[str, str], binary: Sequence[tuple[str, str]] = ()) -> tuple[dict, dict, dict]:
    """Rows of the given lines: `resolved` read from sources jars, `binary` (minor, version) from
    compiled classes. A line may have both (4.2: 4.2.1 sources and 4.2.2 classes): its rows are
    the union."""
    rows: dict[tuple, Row] = {}
    reasons: dict[str, dict] = {}
    counts: dict[str, dict] = {}
    work = [(m, v, False) for m, v in resolved.items()] + [(m, v, True) for m, v in binary]
    work.sort(key=lambda t: (_vkey(t[0]), t[2]))
    per_line: dict[str, tuple[set, set, set, list]] = {}
    topic_manager_prefixed: set[str] = set()   # lines whose sources give InternalTopicManager the group prefix
    for minor, version, from_classes in work:
        n_info, n_debug, n_all, used = per_line.setdefault(minor, (set(), set(), set(), []))
        used.append(version + (" (classes)" if from_classes else ""))
        found: list[tuple[str, Call, str]] = []
        if from_classes:
            for artifact in BINARY_ARTIFACTS:
                for art, c in bytecode_calls(version, artifact):
                    # the LogContext is built by GroupMetadataManager, invisible in the class: a
                    # patch release (4.2.2) keeps the prefix its line's sources (4.2.1) give it
                    if c.logger.endswith(".InternalTopicManager") and minor in topic_manager_prefixed:
                        c.prefix = PARTITION_PREFIX + "[GroupId {}][MemberId {}] "
                    found.append((art, c, f"{art}-{version}.jar!/{c.path}:{c.line} (compiled class)"))
        else:
            files = source_files(version, minor)
            constants = java_constants({p: t for p, (_, t) in files.items()})
            gmm = next((t for p, (_, t) in files.items() if p.endswith("group/GroupMetadataManager.java")), "")
            for path, (artifact, text) in files.items():
                calls, _ = extract_file(path, text, constants)
                for c in calls:
                    if c.logger.endswith(".InternalTopicManager") and TOPIC_MANAGER_PREFIX_4_2 in gmm:
                        c.prefix = PARTITION_PREFIX + "[GroupId {}][MemberId {}] "
                        topic_manager_prefixed.add(minor)
                    found.append((artifact, c, f"{artifact}-{version}-sources.jar!/{path}:{c.line}"))
                if path.rsplit("/", 1)[-1] in REASON_FILES:
                    for tpl, exprs, line in extract_reasons(path, text, constants):
                        r = reasons.setdefault(tpl, {"versions": set(), "newest": None})
                        r["versions"].add(minor)
                        src = f"{artifact}-{version}-sources.jar!/{path}:{line}"
                        if r["newest"] is None or _vkey(minor) > r["newest"][0] or \
                                (_vkey(minor) == r["newest"][0] and src < r["newest"][1]):
                            r["newest"] = (_vkey(minor), src, exprs, path.endswith(".scala"))
        for _artifact, c, src in found:
            n_all.add((c.logger, c.level, c.template, c.message_expr if c.template is None else ""))
            if not in_scope(c.level, c.template) and not (c.template is None and c.level in ("INFO", "WARN", "ERROR")):
                continue
            key = (c.logger, c.level, c.template, c.prefix, c.message_expr if c.template is None else "")
            row = rows.setdefault(key, Row(c.logger, c.level, c.template, c.prefix, message_expr=c.message_expr))
            row.versions.add(minor)
            exprs, notes = c.exprs, c.notes
            if from_classes:
                if row.newest:      # keep the argument expressions read from the newest sources
                    exprs, notes = row.newest[2], row.newest[3]
                else:
                    notes = notes + [f"read from the compiled classes of {version} (no sources jar is served)"]
            cand = (_vkey(minor), src, exprs, notes, c.path.endswith(".scala"))
            if not row.newest or cand[0] > row.newest[0] or (cand[0] == row.newest[0] and src < row.newest[1]):
                row.newest = cand
            (n_debug if c.level == "DEBUG" else n_info).add(key)
        if from_classes:
            _reasons_from_classes(minor, version, reasons)
        counts[minor] = {"version": " + ".join(used), "info_plus": len(n_info),
                         "debug": len(n_debug), "calls_all_levels": len(n_all)}
    return rows, reasons, counts


def _reasons_from_classes(minor: str, version: str, reasons: dict[str, dict]) -> None:
    """A release read from compiled classes: a known reason is present when the class holds it as a
    string constant (String.format pattern) or as a concatenation recipe."""
    texts: set[str] = set()
    jar = binary_jar_path(version, "kafka-group-coordinator")
    with zipfile.ZipFile(jar) as z:
        for n in z.namelist():
            if n.startswith("org/apache/kafka/coordinator/group/GroupMetadataManager") and n.endswith(".class"):
                for t in constant_strings(z.read(n)).values():
                    texts.add(re.sub(r"%(\d+\$)?[-#+ 0,(]*\d*(?:\.\d+)?[a-zA-Z]", "{}", t).replace("\x01", "{}"))
    for tpl, r in reasons.items():
        if r["versions"] and _vkey(max(r["versions"], key=_vkey)) >= (3, 6) and tpl in texts:
            r["versions"].add(minor)


def version_list(vs: Iterable[str]) -> list[str]:
    return sorted(vs, key=_vkey)


def row_json(row: Row) -> dict:
    _, src, exprs, notes, scala = row.newest
    d = {
        "logger": row.logger,
        "level": row.level,
        "template": row.template,
        "prefix": row.prefix,
        "versions": version_list(row.versions),
        "example_args": example_args(row.template, exprs, scala),
        "source": src,
    }
    d["arg_exprs"] = exprs
    d["prefix_example_args"] = prefix_example_args(row.prefix)
    note = list(dict.fromkeys(notes + ROW_NOTES.get((row.logger, row.template), [])))
    if note:
        d["notes"] = "; ".join(note)
    return d


# (logger, template) -> extra notes, written by hand after reading the source.
ROW_NOTES: dict[tuple, list[str]] = {}


def build(offline: bool) -> tuple[str, str, dict, list[str]]:
    problems: list[str] = []
    resolved: dict[str, str] = {}
    binary: list[tuple[str, str]] = []
    for minor in MAIN_LINES + OLD_LINES:
        v = resolve(minor, offline, problems)
        newest = PATCHES[minor][0]
        if v != newest and _vkey(minor) >= (4, 2):
            # the newest patch has no sources jar (4.2.2, 4.4.0): read its compiled classes too
            b = resolve_binary(minor, offline, problems, only=newest)
            if b is not None:
                binary.append((minor, b))
                problems.append(f"{minor}: read the compiled classes of {b}")
                if v is None:
                    continue
        if v is None:
            problems.append(f"{minor}: no served patch release with all sources jars; line skipped")
        else:
            resolved[minor] = v
            if v != newest:
                problems.append(f"{minor}: {newest} has no sources jar; used the sources of {v}")
    main = {m: v for m, v in resolved.items() if m in MAIN_LINES}
    old = {m: v for m, v in resolved.items() if m in OLD_LINES}
    rows, reasons, counts = collect(main, binary)
    old_rows, old_reasons, old_counts = collect(old)
    counts.update(old_counts)
    # 0.10.2-1.0: only wordings that 1.1 does not have
    for key, orow in old_rows.items():
        row = rows.get(key)
        if row is None:
            rows[key] = orow
        elif "1.1" not in row.versions:
            row.versions |= orow.versions
    for tpl, r in old_reasons.items():
        cur = reasons.get(tpl)
        if cur is None:
            reasons[tpl] = r
        elif "1.1" not in cur["versions"]:
            cur["versions"] |= r["versions"]

    out_rows = [row_json(r) for r in rows.values()]
    out_rows.sort(key=lambda d: (d["logger"], d["template"] is None, d["template"] or "", d["level"],
                                 d["prefix"], d.get("notes", "")))
    templates = "".join(json.dumps(d, ensure_ascii=False, sort_keys=False) + "\n" for d in out_rows)

    out_reasons = []
    for tpl, r in reasons.items():
        _, src, exprs, scala = r["newest"]
        out_reasons.append({"reason": tpl, "versions": version_list(r["versions"]),
                            "example_args": example_args(tpl, exprs, scala), "arg_exprs": exprs,
                            "source": src})
    out_reasons.sort(key=lambda d: (d["reason"].lower(), d["reason"]))
    reasons_text = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in out_reasons)
    return templates, reasons_text, counts, problems

