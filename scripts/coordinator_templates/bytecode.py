"""Releases without sources jars: the log calls of the compiled classes (javap) of the binary jars."""
from __future__ import annotations

import re
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from scripts.coordinator_templates.loggers import JAVA_DIRS, PASSED_LOGGER, STATIC_LOGGER, java_prefix
from scripts.coordinator_templates.releases import binary_jar_path
from scripts.coordinator_templates.sources import Call
from scripts.coordinator_templates.templates import _unescape

# ---------------------------------------------------------------------------------------------
# Releases without sources jars: read the compiled classes (javap) of the binary jars
# ---------------------------------------------------------------------------------------------
# Maven Central serves no -sources.jar for some releases (4.4.0, 4.2.2: see tests/data/README.md).
# Their Java coordinator is read from the binary jars instead: a log call's message is the string
# constant (or the string-concatenation recipe, or the String.format pattern) that is pushed right
# after the Logger is loaded; javac folds concatenated literals, so the constant is the template as
# the source spells it. The level is the Logger method, the line comes from the LineNumberTable.
# Validated against the sources of 4.3.1 (same INFO+ rows; see README).

_INSN = re.compile(r"^\s+(\d+): (\w+)\s*([^/]*?)\s*(?://\s*(.*))?$")
_LOGGER_CALL = re.compile(r"InterfaceMethod org/slf4j/Logger\.(info|warn|error|debug|trace):")
_LINE_ENTRY = re.compile(r"^\s+line (\d+): (\d+)$")
_LVT_ENTRY = re.compile(r"^\s+(\d+)\s+(\d+)\s+(\d+)\s+(\S+)\s+(\S+)$")


def _javap(jar: Path, classes: list[str]) -> str:
    out = []
    for i in range(0, len(classes), 200):
        proc = subprocess.run(["javap", "-v", "-p", "-cp", str(jar)] + classes[i:i + 200],
                              capture_output=True, text=True, check=True)
        out.append(proc.stdout)
    return "".join(out)


def bytecode_calls(version: str, artifact: str) -> list[tuple[str, Call]]:
    """(artifact, Call) for every Logger call of the coordinator classes of a binary jar."""
    jar = binary_jar_path(version, artifact)
    with zipfile.ZipFile(jar) as z:
        names = [n[:-6].replace("/", ".") for n in sorted(z.namelist())
                 if n.endswith(".class") and n.startswith(JAVA_DIRS) and "/generated/" not in n]
    text = _javap(jar, names)
    calls: list[tuple[str, Call]] = []
    chunks = re.split(r"(?m)^Classfile ", text)[1:]
    loggers: dict[str, str] = {}
    static_loggers: set[str] = set()
    parsed = []
    with zipfile.ZipFile(jar) as z:
        pools = {n[:-6].replace("/", "."): constant_strings(z.read(n)) for n in z.namelist() if n.endswith(".class")
                 and n.startswith(JAVA_DIRS)}
    for chunk in chunks:
        m = re.search(r"!/(\S+)\.class", chunk.splitlines()[0])
        assert m is not None   # javap names the class file of every chunk
        cls = m.group(1).replace("/", ".")
        pool = pools.get(cls, {})
        src = re.search(r'Compiled from "([^"]+)"', chunk)
        source_file = src.group(1) if src else cls.rsplit(".", 1)[-1].split("$")[0] + ".java"
        boots = _bootstrap_recipes(chunk, pool)
        methods = _methods(chunk)
        parsed.append((cls, source_file, boots, methods, pool))
        # the class's own logger: `ldc class X` then LogContext.logger / LoggerFactory.getLogger
        for _, insns, _, _ in methods:
            for i, (_off, op, _arg, com) in enumerate(insns):
                if op.startswith("ldc") and com.startswith("class "):
                    nxt = insns[i + 1][3] if i + 1 < len(insns) else ""
                    if re.search(r"LogContext\.logger:|LoggerFactory\.getLogger:", nxt):
                        loggers.setdefault(cls, com[6:].replace("/", "."))
                        if "LoggerFactory.getLogger" in nxt:
                            static_loggers.add(cls)
    for cls, source_file, boots, methods, pool in parsed:
        pkg_path = cls.rsplit(".", 1)[0].replace(".", "/")
        owner_chain = cls.split("$")
        logger = None
        for k in range(len(owner_chain), 0, -1):
            logger = loggers.get("$".join(owner_chain[:k]))
            if logger:
                owner = "$".join(owner_chain[:k]).rsplit(".", 1)[-1]
                if "$".join(owner_chain[:k]) in static_loggers:
                    owner = STATIC_LOGGER
                break
        if logger is None:
            outer = owner_chain[0]
            logger = PASSED_LOGGER.get(outer, outer)
            owner = ""
        for _mname, insns, lines, lvt in methods:
            for i, (off, op, _arg, com) in enumerate(insns):
                lm = _LOGGER_CALL.search(com)
                if not lm or not op.startswith("invoke"):
                    continue
                level = lm.group(1).upper()
                start = _logger_load(insns, i, lvt)
                template: str | None = None
                notes: list[str] = []
                if start is not None:
                    template, notes = _message_after(insns, start + 1, i, boots, pool)
                if template is None:
                    notes.append("message computed at run time")
                line = _line_for(lines, off)
                c = Call(logger, level, template, [], java_prefix(logger, owner),
                         f"{pkg_path}/{source_file}", line, notes, "")
                calls.append((artifact, c))
    return calls


def constant_strings(data: bytes) -> dict[int, str]:
    """Index -> text of the CONSTANT_String entries of a class file (exact, unlike javap's output,
    which drops trailing blanks)."""
    import struct
    count = struct.unpack(">H", data[8:10])[0]
    utf8: dict[int, str] = {}
    strings: dict[int, int] = {}
    i, pos = 1, 10
    sizes = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}
    while i < count:
        tag = data[pos]
        if tag == 1:
            n = struct.unpack(">H", data[pos + 1:pos + 3])[0]
            utf8[i] = _modified_utf8(data[pos + 3:pos + 3 + n])
            pos += 3 + n
        else:
            if tag == 8:
                strings[i] = struct.unpack(">H", data[pos + 1:pos + 3])[0]
            pos += 1 + sizes[tag]
            if tag in (5, 6):
                i += 1
        i += 1
    return {k: utf8.get(v, "") for k, v in strings.items()}


def _modified_utf8(b: bytes) -> str:
    # Java's modified UTF-8: NUL as C0 80, supplementary characters as surrogate pairs
    return b.replace(b"\xc0\x80", b"\x00").decode("utf-8", errors="surrogatepass").encode(
        "utf-16", "surrogatepass").decode("utf-16")


def _bootstrap_recipes(chunk: str, pool: dict[int, str]) -> dict[int, str]:
    out: dict[int, str] = {}
    sec = chunk.split("\nBootstrapMethods:\n", 1)
    if len(sec) < 2:
        return out
    cur = None
    for ln in sec[1].splitlines():
        m = re.match(r"^\s+(\d+): #\d+ REF_invokeStatic (\S+)", ln)
        if m:
            cur = int(m.group(1)) if "makeConcatWithConstants" in m.group(2) else None
            continue
        if cur is not None:
            m = re.match(r"^\s+#(\d+) (.*)$", ln)
            if m and cur not in out:
                out[cur] = pool.get(int(m.group(1)), _unescape(m.group(2)))
    return out


def _methods(chunk: str):
    methods = []
    cur: list[Any] | None = None   # [signature, instructions, line table, Logger slots]
    mode = None
    for ln in chunk.splitlines():
        if re.match(r"^  \S.*\);$|^  \S.*\)( throws .*)?;$|^  static \{\};$", ln):
            cur = [ln.strip(), [], [], {}]
            methods.append(cur)
            mode = None
            continue
        if cur is None:
            continue
        s = ln.strip()
        if s == "Code:":
            mode = "code"
            continue
        if s == "LineNumberTable:":
            mode = "lines"
            continue
        if s == "LocalVariableTable:":
            mode = "lvt"
            continue
        if s.startswith(("StackMapTable:", "Exceptions:", "Signature:", "RuntimeVisible", "MethodParameters:",
                         "LocalVariableTypeTable:", "Exception table:")):
            mode = None
            continue
        if mode == "code":
            m = _INSN.match(ln)
            if m:
                cur[1].append((int(m.group(1)), m.group(2), m.group(3), m.group(4) or ""))
        elif mode == "lines":
            m = _LINE_ENTRY.match(ln)
            if m:
                cur[2].append((int(m.group(2)), int(m.group(1))))
        elif mode == "lvt":
            m = _LVT_ENTRY.match(ln)
            if m and m.group(5) == "Lorg/slf4j/Logger;":
                cur[3][int(m.group(3))] = True
    return [(m[0], m[1], m[2], m[3]) for m in methods]


def _logger_load(insns, i: int, lvt: dict) -> int | None:
    for j in range(i - 1, max(-1, i - 400), -1):
        off, op, arg, com = insns[j]
        if op in ("getfield", "getstatic") and com.endswith(":Lorg/slf4j/Logger;"):
            return j
        if op.startswith("aload"):
            slot = int(op.split("_")[1]) if "_" in op else int(arg or -1)
            if lvt.get(slot):
                return j
        if op.startswith("invoke") and _LOGGER_CALL.search(com):
            return None
    return None


def _message_after(insns, a: int, b: int, boots: dict[int, str],
                   pool: dict[int, str]) -> tuple[str | None, list[str]]:
    off, op, arg, com = insns[a]
    if op.startswith("ldc") and com.startswith("String "):
        fmt = pool.get(int(arg.lstrip("#"))) if arg.startswith("#") else None
        fmt = _unescape(com[7:]) if fmt is None else fmt
        for k in range(a + 1, b):
            if "java/lang/String.format:" in insns[k][3]:
                return re.sub(r"%(\d+\$)?[-#+ 0,(]*\d*(?:\.\d+)?([a-zA-Z%])",
                              lambda m: "%" if m.group(2) == "%" else ("\n" if m.group(2) == "n" else "{}"),
                              fmt), []
            if insns[k][1].startswith("invoke") and "(Ljava/lang/String;" not in insns[k][3] and False:
                break
        return fmt, []
    if op.startswith("aload") and (b - a) <= 3:
        slot = op.split("_")[1] if "_" in op else arg
        for k in range(a - 1, max(-1, a - 200), -1):
            o2, op2, arg2, com2 = insns[k]
            if op2.startswith("astore") and (op2.split("_")[1] if "_" in op2 else arg2) == slot:
                if k >= 1 and "java/lang/String.format:" in insns[k - 1][3]:
                    for q in range(k - 2, max(-1, k - 80), -1):
                        if insns[q][1].startswith("ldc") and insns[q][3].startswith("String ") and "%" in insns[q][3]:
                            t, _ = _message_after(insns, q, k, boots, pool)
                            return t, ["message built in a local variable with String.format"]
                break
    for k in range(a, b):
        o, op2, arg2, com2 = insns[k]
        if op2 == "invokedynamic" and "makeConcatWithConstants" in com2:
            m = re.search(r"InvokeDynamic #(\d+):", com2)
            recipe = boots.get(int(m.group(1)), "") if m else ""
            return recipe.replace("\x01", "{}"), []
        if op2 == "ldc" or op2 == "ldc_w":
            break
    return None, []


def _line_for(lines: list[tuple[int, int]], off: int) -> int:
    best = 0
    for o, ln in sorted(lines):
        if o <= off:
            best = ln
        else:
            break
    return best

