"""One Java or Scala source file -> its log calls (logger, level, template, prefix, line)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from scripts.coordinator_templates.lexing import mask, match_close, split_top, top_level
from scripts.coordinator_templates.loggers import PASSED_LOGGER, SCALA_LOGGING_BASES, STATIC_LOGGER, java_prefix
from scripts.coordinator_templates.templates import Builder, _norm_expr, _unescape, fill_slf4j, render

# ---------------------------------------------------------------------------------------------
# One source file -> log calls
# ---------------------------------------------------------------------------------------------

@dataclass
class Call:
    logger: str
    level: str
    template: str | None
    exprs: list[str]
    prefix: str
    path: str
    line: int
    notes: list[str] = field(default_factory=list)
    message_expr: str = ""


@dataclass
class TypeDecl:
    kind: str           # class, object, trait, interface, enum, record
    name: str
    header: str         # text between the name and the body
    body: tuple[int, int]
    parent: TypeDecl | None = None

    def chain(self) -> list[TypeDecl]:
        out: list[TypeDecl] = []
        t: TypeDecl | None = self
        while t is not None:
            out.append(t)
            t = t.parent
        return out[::-1]


_DECL_RE = re.compile(r"(?<![.\w$])(class|object|trait|interface|enum|record)\s+([A-Za-z_]\w*)")
_NO_BODY_NEXT = re.compile(r"\s*(private|protected|public|case|class|object|trait|@|val|var|def|sealed|"
                           r"abstract|final|import|package|implicit|lazy|override|\}|$)")


def find_types(masked: str, scala: bool) -> list[TypeDecl]:
    decls: list[TypeDecl] = []
    for m in _DECL_RE.finditer(masked):
        j, n = m.end(), len(masked)
        body = None
        while j < n:
            c = masked[j]
            if c in "([":
                j = match_close(masked, j) + 1
                if j <= 0:
                    break
                continue
            if c == "{":
                body = (j, match_close(masked, j))
                break
            if c in ";=" or (c == ")" ):
                break
            if c == "\n" and scala:
                rest = masked[j + 1:j + 200]
                stripped = rest.lstrip()
                if not stripped.startswith(("extends", "with", "{")) and _NO_BODY_NEXT.match(rest):
                    # the declaration continues only if the next line continues it
                    prev = masked[m.end():j].rstrip()
                    if not prev.endswith((",", "(", "with", "extends")):
                        break
            j += 1
        if body is None or body[1] < 0:
            continue
        decls.append(TypeDecl(m.group(1), m.group(2), masked[m.end():body[0]], body))
    # nesting
    for d in decls:
        best = None
        for e in decls:
            if e is not d and e.body[0] < d.body[0] and d.body[1] <= e.body[1] and \
                    (best is None or e.body[0] > best.body[0]):
                best = e
        d.parent = best
    return decls


def enclosing(decls: list[TypeDecl], pos: int) -> list[TypeDecl]:
    inner = [d for d in decls if d.body[0] < pos < d.body[1]]
    inner.sort(key=lambda d: d.body[0])
    return inner   # outermost first


def fqn(package: str, decl: TypeDecl) -> str:
    names = []
    for t in decl.chain():
        names.append(t.name + ("$" if t.kind == "object" else ""))
    # Scala: nested class of an object is Outer$Inner (the object's `$` joins them)
    s = ""
    for idx, nm in enumerate(names):
        s = nm if idx == 0 else s + ("" if s.endswith("$") else "$") + nm
    return f"{package}.{s}"


_SCALA_CALL = re.compile(r"(?<![.\w$])(info|warn|error|debug|trace|fatal)\s*\(")
_JAVA_CALL = re.compile(r"(?<![.\w$])(log|LOG|logger|LOGGER|log\(\))\s*\.\s*(info|warn|error|debug|trace)\s*\(")
_JAVA_LOGGER_FIELD = re.compile(
    r"(\w+)\s*=\s*(?:[\w.]+\s*\.\s*)?(?:new\s+LogContext\([^;]*?\)\s*\.\s*)?(?:logger|getLogger)\s*\(\s*([\w.]+)\.class\s*\)")
_PACKAGE = re.compile(r"^\s*package\s+([\w.]+)", re.M)


def java_constants(files: dict[str, str]) -> dict[str, str]:
    """`Class.NAME` -> value for the `static final String NAME = "..."` of the given files."""
    out: dict[str, str] = {}
    for path, text in files.items():
        if not path.endswith(".java"):
            continue
        cls = path.rsplit("/", 1)[-1][:-5]
        for m in re.finditer(r"static\s+final\s+String\s+(\w+)\s*=\s*\"((?:[^\"\\]|\\.)*)\"\s*;", text):
            out[f"{cls}.{m.group(1)}"] = _unescape(m.group(2))
    return out


def extract_file(path: str, text: str, constants: dict[str, str]) -> tuple[list[Call], list[tuple]]:
    scala = path.endswith(".scala")
    masked, lits = mask(text, scala)
    pm = _PACKAGE.search(masked)
    package = pm.group(1) if pm else ""
    decls = find_types(masked, scala)
    local_consts = dict(constants)
    if not scala:
        for m in re.finditer(r"static\s+final\s+String\s+(\w+)\s*=\s*\"((?:[^\"\\]|\\.)*)\"\s*;", text):
            local_consts[m.group(1)] = _unescape(m.group(2))
    builder = Builder(text, masked, lits, scala, local_consts)
    line_of = _line_index(text)
    calls: list[Call] = []

    # loggers and prefixes per declaration
    java_loggers, scala_ident = _declared_loggers(masked, decls, package, builder, scala)

    pattern = _SCALA_CALL if scala else _JAVA_CALL
    for m in pattern.finditer(masked):
        if scala:
            before = masked[max(0, m.start() - 5):m.start()]
            if re.search(r"def\s*$", before):
                continue
        level = (m.group(1) if scala else m.group(2)).upper()
        if level == "FATAL":
            level = "ERROR"
        open_ = m.end() - 1
        close = match_close(masked, open_)
        if close < 0:
            continue
        args = split_top(masked, open_ + 1, close, ",")
        if not masked[args[0][0]:args[0][1]].strip():
            continue
        encl = enclosing(decls, m.start())
        logger, prefix = "", ""
        for d in reversed(encl):
            if id(d) in java_loggers:
                logger = java_loggers[id(d)]
                prefix = scala_ident.get(id(d), "") if scala else java_prefix(logger, scala_ident.get(id(d), ""))
                break
        if not logger:
            top = encl[0] if encl else None
            top_name = fqn(package, top) if top else package
            if scala:
                continue   # not a Logging method (a local `error(...)` helper or the like)
            logger = PASSED_LOGGER.get(top_name, "")
            if not logger:
                logger = top_name
            prefix = java_prefix(logger)
        notes: list[str] = []
        segs = builder.expr(*args[0])
        segs = _inline_local(segs, text, masked, builder, m.start(), notes)
        rest_args = [text[a:b] for a, b in args[1:]]
        if not scala:
            segs, extra = fill_slf4j(segs, rest_args, builder)
            if extra:
                notes.append("last argument is a Throwable (stack trace follows)" if len(extra) == 1
                             else f"{len(extra)} arguments without {{}}")
            if any(s == "{}" for s in segs if isinstance(s, str)):
                notes.append("more {} than arguments: a {} prints literally")
        elif rest_args:
            notes.append("last argument is a Throwable (stack trace follows)")
        has_text = any(isinstance(s, str) and s.strip() for s in segs)
        template: str | None
        template, exprs = render(segs)
        message_expr = _norm_expr(text[args[0][0]:args[0][1]])
        if not has_text:
            template = None
            notes.append(f"message computed at run time: {message_expr}")
        calls.append(Call(logger, level, template, exprs, prefix, path, line_of(m.start()), notes,
                          message_expr))
    return calls, []


def _declared_loggers(masked: str, decls: list[TypeDecl], package: str, builder: Builder,
                      scala: bool) -> tuple[dict[int, str], dict[int, str]]:
    """The loggers and prefixes per declaration of one file (extract_file): id(decl) -> logger name,
    and id(decl) -> the Scala `logIdent`, or the Java class whose LogContext is used."""
    java_loggers: dict[int, str] = {}     # id(decl) -> logger name
    scala_ident: dict[int, str] = {}
    if scala:
        for d in decls:
            if re.search(r"\b(?:extends|with)\s+(?:" + "|".join(SCALA_LOGGING_BASES) + r")\b", d.header):
                m = re.search(r"(?:this\.)?logIdent\s*=\s*", masked[d.body[0]:d.body[1]])
                if m:
                    a = d.body[0] + m.end()
                    b = masked.find("\n", a)
                    segs = builder.expr(a, b)
                    scala_ident[id(d)] = render(segs)[0]
                java_loggers[id(d)] = fqn(package, d)
    else:
        by_name = {d.name: d for d in decls}
        imports = {m.group(2): m.group(1) + m.group(2)
                   for m in re.finditer(r"^\s*import\s+([\w.]+\.)(\w+)\s*;", masked, re.M)}
        for m in _JAVA_LOGGER_FIELD.finditer(masked):
            cls = m.group(2).rsplit(".", 1)[-1]
            owner = enclosing(decls, m.start())
            if not owner:
                continue
            target = by_name.get(cls)
            if target is not None:
                name = fqn(package, target)
            elif "." in m.group(2):
                name = m.group(2)
            else:
                name = imports.get(cls, f"{package}.{cls}")
            java_loggers.setdefault(id(owner[-1]), name)
            # the class whose LogContext is used, or none for LoggerFactory loggers
            scala_ident.setdefault(id(owner[-1]), STATIC_LOGGER if "getLogger" in m.group(0) else owner[-1].name)
    return java_loggers, scala_ident


def _inline_local(segs: list, text: str, masked: str, builder: Builder, at: int, notes: list[str]) -> list:
    """`log.error(msg, ex)` / `error(s"$msg.")`: replace a placeholder that is a local variable
    defined just before the call (`String msg = ...;` / `val msg = ...`) by that definition."""
    out = []
    for s in segs:
        if isinstance(s, str) or not re.fullmatch(r"[a-z]\w*", s[1]):
            out.append(s)
            continue
        name = s[1]
        window_start = max(0, masked.rfind("\n", 0, max(0, at - 1500)))
        defs = list(re.finditer(r"(?:\bString|\bval|\bvar)\s+" + name + r"\s*=\s*", masked[window_start:at]))
        if not defs:
            out.append(s)
            continue
        a = window_start + defs[-1].end()
        # the definition ends at a `;` or at a line end that no `+` continues
        b = next((j for j in top_level(masked, a, at)
                  if masked[j] == ";" or (masked[j] == "\n" and not masked[a:j].rstrip().endswith("+")
                                          and not masked[j + 1:].lstrip().startswith("+"))), at)
        inner = builder.expr(a, b)
        if any(isinstance(x, str) and x.strip() for x in inner):
            out.extend(inner)
            notes.append(f"message built in local variable `{name}`")
        else:
            out.append(s)
    return out


def _line_index(text: str):
    starts = [0]
    for i, c in enumerate(text):
        if c == "\n":
            starts.append(i + 1)
    import bisect

    def line_of(pos: int) -> int:
        return bisect.bisect_right(starts, pos)
    return line_of

