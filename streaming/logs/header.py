"""Reading a broker log line in any supported layout: time, level, logger and message.

Kafka's own layout is `[%d] %p %m (%c)%n` (layout.HEADER_RE; the parser tries it first, it is the
common case). `read_header` reads the others, in this order:

1. Container and transport prefixes are taken off the front, as many as there are
   (`PREFIXES`): docker-compose `name_1  | ` / `name-1  | `, CRI/containerd
   `2026-11-21T19:21:26.163456789Z stdout F `, `kubectl logs --timestamps` `2026-...Z `, syslog
   `Nov 21 19:21:26 host kafka[123]: ` (RFC 3164) and `<14>1 2026-...Z host app - - - ` (RFC 5424).
2. The rest is matched against the log4j layouts seen in the wild (`LAYOUTS`, docs/broker-logs.md
   "Layouts"): Kafka's default with `%-5p` padding or the location `(%c:%L)`, Strimzi's Kafka 4.x
   `%d{yyyy-MM-dd HH:mm:ss} %-5p [%t] %c{1}:%L - %m` and 3.x `%d{ISO8601} %p %m (%c) [%t]`, Confluent
   for Kubernetes `[%p] %d [%t] %c %M - app=kafka, ... - %m`, `|`-separated columns
   `%d | %p | [%t] | %m | %c (%F:%L)`. If a prefix was taken off and nothing matches, the whole
   line is tried too (a layout whose time looks like a prefix).
3. Otherwise, a line that carries a coordinator message prefix (`[GroupCoordinator 1]: `,
   `[GroupCoordinator id=1 ...] `, `[GroupMetadataManager brokerId=1] `, ...) is read by where
   things are, not by their order (`generic`): the message starts at the prefix and runs to the
   end of the line, less a trailing ` (logger)`, ` [thread]` or ` | column` and a separator left
   before it (` ~`, ` ::`); the time is the first
   timestamp before it, the level the first level word, the logger a coordinator logger name
   anywhere in the line. Every group-coordinator line that carries a rebalance fact has such a
   prefix.
4. Last, the first line of a multi-line message in a layout that writes the logger after the
   message (`[%d] %p %m (%c)`, `%d %p %m (%c) [%t]`, `|` columns: the logger ends its last line) is
   known by its opening (`OPENINGS`): its time and level, no logger. The opening cannot show the
   location a layout writes after the logger (`default-location`, `pipe-location`): it is reported
   as the layout without it.

The layout name of a line (`Header.layout`) is its prefixes and layout joined by `+`, e.g.
`cri+default`, `compose+strimzi4`; JSON layouts (the message and its time, level and logger in
separate fields, envelope.py) are `ecs-json`, `log4j2-json`, `logstash-json` and `generic-json`.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from streaming.logs.layout import COORDINATOR_LOGGER_MARKERS, SHORT_LOGGER_FAMILIES

DEFAULT = "default"
GENERIC = "generic"

_TS = r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d{1,9})?(?:Z|[+-]\d\d(?::?\d\d)?)?"
_LEVEL = r"TRACE|DEBUG|INFO|WARN|ERROR|FATAL"
_LOGGER = r"[A-Za-z_$][\w$]*(?:\.[\w$]+)*"
_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:\d\d)"


@dataclass(frozen=True, slots=True)
class Header:
    layout: str              # layout name (module docstring)
    ts: str | None           # the time as written (timeutil.to_epoch_ms reads it); None if absent
    level: str | None        # TRACE ... FATAL; None if the layout has none
    logger: str | None       # full or short logger name; None if the layout has none
    message: str             # the message (first line of it)


# (name, compiled regex with groups ts, level, msg, logger and optionally pad, loc).
LAYOUTS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # `[%d] %p %m (%c)` with `%-5p` padding and/or the location `(%c:%L)` (Kafka's test log4j).
    (DEFAULT, re.compile(
        rf"\[(?P<ts>{_TS})\] (?P<level>{_LEVEL})(?P<pad> *) (?P<msg>.*) \((?P<logger>{_LOGGER})"
        r"(?P<loc>:(?:\d+|\?))?\)$")),
    # Strimzi, Kafka 4.x: `%d{yyyy-MM-dd HH:mm:ss} %-5p [%t] %c{1}:%L - %m`.
    ("strimzi4", re.compile(
        rf"(?P<ts>{_TS}) +(?P<level>{_LEVEL}) +\[(?P<thread>[^\]]*)\] (?P<logger>{_LOGGER}):(?:\d+|\?) - "
        r"(?P<msg>.*)$")),
    # Strimzi, Kafka 3.x: `%d{ISO8601} %p %m (%c) [%t]`.
    ("strimzi3", re.compile(
        rf"(?P<ts>{_TS}) (?P<level>{_LEVEL}) +(?P<msg>.*) \((?P<logger>{_LOGGER})\) \[(?P<thread>[^\]]*)\]$")),
    # Confluent for Kubernetes: `[INFO] 2026-11-21 19:21:26,163 [thread] logger method - app=kafka, ... - message`.
    ("cfk", re.compile(
        rf"\[(?P<level>{_LEVEL})\] +(?P<ts>{_TS}) \[(?P<thread>[^\]]*)\] (?P<logger>{_LOGGER}) \S+ - "
        r"(?:\w+=[^ ]*(?:, \w+=[^ ]*)* - )?(?P<msg>.*)$")),
    # `|`-separated columns: `%d | %-5p | [%t] | %m | %c (%F:%L)`.
    ("pipe", re.compile(
        rf"(?P<ts>{_TS}) *\| *(?P<level>{_LEVEL}) *\| *(?:\[(?P<thread>[^\]]*)\] *\| *)?(?P<msg>.*?) *\| *"
        rf"(?P<logger>{_LOGGER})(?::\d+)?(?: \((?P<loc>[^()]*)\))?$")),
)

# The first line of a multi-line message in layouts that write the logger after the message: the
# time and level open it, the logger ends its last line. Read for its layout and time only.
OPENINGS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (DEFAULT, re.compile(rf"\[(?P<ts>{_TS})\] (?P<level>{_LEVEL})(?P<pad> *) ")),
    ("strimzi3", re.compile(rf"(?P<ts>{_TS}) (?P<level>{_LEVEL}) ")),
    ("pipe", re.compile(rf"(?P<ts>{_TS}) *\| *(?P<level>{_LEVEL}) *\| ")),
)

# (name, regex of a prefix in front of the log4j line; group `ts` when the prefix carries a time).
PREFIXES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("cri", re.compile(rf"(?P<ts>{_RFC3339}) (?:stdout|stderr) [FP] ")),
    ("kubectl", re.compile(rf"(?P<ts>{_RFC3339}) ")),
    ("compose", re.compile(r"[A-Za-z0-9][\w.-]*[_-]\d+ *\| ")),
    ("syslog", re.compile(r"(?:<\d{1,3}>)?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec) [ \d]\d "
                          r"\d\d:\d\d:\d\d \S+ [\w./-]+(?:\[\d+\])?: ")),
    ("syslog", re.compile(rf"<\d{{1,3}}>1 (?P<ts>{_RFC3339}) \S+ \S+ \S+ \S+ (?:-|\[.*?\]) ")),
)
_PREFIX_START = re.compile(r"[\dA-Za-z<]")
# A JSON document behind container/transport prefixes (a JSON layout read from a CRI file, `kubectl
# logs --timestamps`, docker compose): group 1 is the document. Also valid as a Java regex (the JVM
# envelope step uses it), hence no named groups.
PREFIXED_JSON = ("^(?:" + "|".join(re.sub(r"\(\?P<\w+>", "(?:", p.pattern) for _, p in PREFIXES)
                 + r")+(\{.*)$")
PREFIXED_JSON_RE = re.compile(PREFIXED_JSON)

# The generic reading (module docstring, 3.).
_COORDINATOR_PREFIX = re.compile(
    r"\[(?:GroupCoordinator \d+\]: |GroupCoordinator id=\d+[ \]]|GroupMetadataManager brokerId=\d+\] "
    r"|Group Metadata Manager on Broker \d+\]: )")
_TS_ANYWHERE = re.compile(_TS)
_LEVEL_WORD = re.compile(rf"(?<![\w.]){'(' + _LEVEL + ')'}(?![\w.])")
_FULL_LOGGER = re.compile("(?:" + "|".join(re.escape(m) for m in COORDINATOR_LOGGER_MARKERS) + r")[\w$.]*")
_SHORT_LOGGER = re.compile(r"(?<![\w.$])(" + "|".join(re.escape(n) for n in sorted(SHORT_LOGGER_FAMILIES, key=len,
                                                                                     reverse=True))
                           + r")(?![\w$])")
_TRAILERS = (re.compile(rf" \((?:{_LOGGER})(?::\d+|:\?)?\)(?: \[[^\]]*\])?$"),   # (logger[:L]) [thread]
             re.compile(r" \[[^\]]*\]$"),                                            # [thread]
             re.compile(r" *\| [^|]*$"))                                             # | logger (File:L)
# A column separator left at the end once the logger is cut (`%m ~ (%c)`).
_SEPARATOR_END = re.compile(r"(?: [^\w\s()\[\]{}<>\"'.,]{1,3})+$")


def _from_match(name: str, m: re.Match[str]) -> Header:
    groups = m.groupdict()
    if name == DEFAULT:
        if groups["pad"]:
            name += "-padded"
        if groups["loc"]:
            name += "-location"
    elif name == "pipe" and groups.get("loc"):
        name += "-location"
    return Header(name, groups["ts"], groups["level"], groups["logger"], groups["msg"])


def _match_layouts(text: str) -> Header | None:
    for name, pattern in LAYOUTS:
        m = pattern.match(text)
        if m is not None:
            return _from_match(name, m)
    return None


def strip_prefixes(line: str) -> tuple[tuple[str, ...], str, str | None]:
    """(prefix names, the line without them, the time of the first prefix that has one)."""
    names: list[str] = []
    ts = None
    text = line
    while _PREFIX_START.match(text):
        for name, pattern in PREFIXES:
            m = pattern.match(text)
            if m is not None:
                names.append(name)
                if ts is None and "ts" in pattern.groupindex:
                    ts = m.group("ts")
                text = text[m.end():]
                break
        else:
            break
    return tuple(names), text, ts


def _generic(prefixes: tuple[str, ...], text: str, prefix_ts: str | None) -> Header | None:
    start = _COORDINATOR_PREFIX.search(text)
    if start is None:
        return None
    before, message = text[:start.start()], text[start.start():]
    for trailer in _TRAILERS:
        cut = trailer.search(message)
        if cut is not None:
            message = message[:cut.start()]
            break
    message = _SEPARATOR_END.sub("", message)
    ts = _TS_ANYWHERE.search(before)
    level = _LEVEL_WORD.search(before)
    rest = before + text[start.start() + len(message):]
    logger = _FULL_LOGGER.search(rest) or _SHORT_LOGGER.search(rest)
    ts_text = ts.group(0) if ts is not None else prefix_ts
    if ts_text is None:
        return None
    return Header("+".join(prefixes + (GENERIC,)), ts_text, level.group(1) if level else None,
                  logger.group(0) if logger else None, message)


def read_header(line: str, generic: bool = True) -> Header | None:
    """The time, level, logger and message of a line in any supported layout (module docstring);
    None when no layout fits. `generic=False` leaves out the reading by position (3.)."""
    prefixes, text, prefix_ts = strip_prefixes(line)
    header = _match_layouts(text)
    if header is None and prefixes:
        header = _match_layouts(line)
        if header is not None:
            return header
    if header is not None:
        if prefixes:
            header = Header("+".join(prefixes + (header.layout,)), header.ts or prefix_ts, header.level,
                            header.logger, header.message)
        return header
    header = _generic(prefixes, text, prefix_ts) if generic else None
    if header is None:
        for name, pattern in OPENINGS:
            m = pattern.match(text)
            if m is not None:
                if m.groupdict().get("pad"):
                    name += "-padded"
                return Header("+".join(prefixes + (name,)), m.group("ts"), m.group("level"), None, text[m.end():])
    return header


def inner_line(line: str) -> str:
    """The line without its container/transport prefixes (for the continuation test)."""
    return strip_prefixes(line)[1]
