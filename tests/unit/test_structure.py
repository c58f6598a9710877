"""The architecture, checked: the import layers of docs/design.md and the size limits of modules
and functions. Imports are read from the source (AST), including those inside functions;
imports under `if TYPE_CHECKING:` are type-only and not counted."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# scripts/coordinator_templates: the extractor of tests/data/coordinator_templates.jsonl (the only
# package of scripts/; the rest of scripts/ are commands, outside these checks).
PACKAGES = ("state", "streaming", "sinks", "dashboards", "scripts/coordinator_templates")
PROJECT = {package.split("/")[0] for package in PACKAGES} | {"bench", "tests"}
# Modules every layer of `streaming` may use: the row and quarantine contracts, input kinds.
STREAMING_BASE = ("streaming.rows", "streaming.quarantine", "streaming.inputs", "streaming.defaults")

# (module prefix, project modules it may import, third-party packages it may import); first match wins.
LAYERS: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = [
    ("state", ("state",), ()),
    ("streaming.logs", ("state", "streaming.logs", "streaming.offsets", *STREAMING_BASE), ("pyarrow",)),
    ("streaming.offsets", ("state", "streaming.offsets", "streaming.logs", *STREAMING_BASE),
     ("numpy", "pandas", "pyarrow", "cramjam", "crc32c")),
    ("streaming.rows", ("state", *STREAMING_BASE), ("numpy", "pandas", "pyarrow", "pydantic_core")),
    ("streaming.quarantine", (), ()),
    ("streaming.inputs", (), ()),
    ("streaming.defaults", (), ()),
    ("streaming.spark", ("state", "streaming.spark", "streaming.logs", "streaming.offsets", *STREAMING_BASE),
     ("pyspark", "pandas", "pyarrow", "numpy", "kafka")),
    ("streaming.app", ("state", "streaming", "sinks"), ("pydantic", "pydantic_settings")),
    ("sinks", ("state", "sinks"), ("prometheus_client",)),
    ("dashboards", ("state", "dashboards"), ("yaml",)),
    # standard library only: it runs with a bare python3 (tests/data/README.md)
    ("scripts.coordinator_templates", ("scripts.coordinator_templates",), ()),
    ("streaming", (), ()),   # the package's own __init__
]
# Files allowed over the size limits: declarative data and builders (see the reason).
LONG_FILES: dict[str, str] = {}
LONG_FUNCTIONS = {
    "streaming/offsets/vectorised/direct.py:fast_group_metadata":
        "the hot loop of GroupMetadata records, one function so the member reads stay inline",
    "streaming/offsets/vectorised/direct.py:fast_consumer_group_record":
        "one direct reader per record type, a flat sequence of struct reads",
    "dashboards/fleet.py:build": "declarative: the fleet dashboard's rows of panels",
    "dashboards/group.py:build": "declarative: the group dashboard's rows of panels",
}
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80


def _modules() -> list[tuple[str, Path]]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out.append((name, path))
    return out


MODULE_NAMES = {name for name, _ in _modules()}


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST, module: str) -> set[str]:
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for stmt in node.orelse:
                visit(stmt)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            assert not node.level, f"{module}: relative import"
            for alias in node.names:   # `from streaming.logs import catalog` imports a module
                candidate = f"{node.module}.{alias.name}"
                found.add(candidate if candidate in MODULE_NAMES else node.module)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def _layer(module: str) -> tuple[str, tuple[str, ...], tuple[str, ...]]:
    for prefix, allowed, third_party in LAYERS:
        if module == prefix or module.startswith(prefix + "."):
            return prefix, allowed, third_party
    raise AssertionError(f"{module} belongs to no layer of tests/unit/test_structure.py")


def _within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def test_import_layers() -> None:
    violations = []
    for module, path in _modules():
        prefix, allowed, third_party = _layer(module)
        for name in sorted(_imports(ast.parse(path.read_text()), module)):
            top = name.split(".")[0]
            if top in sys.stdlib_module_names or top == "__future__":
                continue
            if top in PROJECT:
                if not _within(name, allowed):
                    violations.append(f"{module} imports {name}")
                continue
            if prefix == "streaming.app" or top in third_party:
                continue
            violations.append(f"{module} imports {name} (third-party, not allowed in {prefix})")
    assert violations == []


def test_pyspark_only_in_streaming_spark() -> None:
    users = [module for module, path in _modules()
             if any(n.split(".")[0] == "pyspark" for n in _imports(ast.parse(path.read_text()), module))]
    assert all(_within(m, ("streaming.spark",)) for m in users), users


def _function_lengths(tree: ast.AST) -> list[tuple[str, int]]:
    out = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            start = min([d.lineno for d in node.decorator_list] + [node.lineno])
            out.append((node.name, (node.end_lineno or node.lineno) - start + 1))
    return out


def test_the_exceptions_are_still_needed() -> None:
    """An allow-listed file or function that shrank below the limit leaves the list."""
    for rel in LONG_FILES:
        assert (ROOT / rel).read_text().count("\n") > MAX_FILE_LINES, rel
    for key in LONG_FUNCTIONS:
        rel, name = key.split(":")
        lengths = dict(_function_lengths(ast.parse((ROOT / rel).read_text())))
        assert lengths.get(name, 0) > MAX_FUNCTION_LINES, key


@pytest.mark.parametrize("package", [*PACKAGES, "bench", "tests", "testbed"])
def test_module_and_function_sizes(package: str) -> None:
    too_long = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(("tests/fixtures/", "bench/.data/")):   # bench/.data: generated, and the base worktree
            continue
        text = path.read_text()
        lines = text.count("\n")
        if lines > MAX_FILE_LINES and rel not in LONG_FILES and not rel.startswith("tests/"):
            too_long.append(f"{rel}: {lines} lines")
        for name, length in _function_lengths(ast.parse(text)):
            if length > MAX_FUNCTION_LINES and f"{rel}:{name}" not in LONG_FUNCTIONS and not rel.startswith("tests/"):
                too_long.append(f"{rel}:{name}: {length} lines")
    assert too_long == []


def test_the_layer_test_catches_a_violation(tmp_path: Path) -> None:
    tree = ast.parse("import pyspark\nfrom streaming.app import settings\nfrom state.model import Member\n"
                     "if TYPE_CHECKING:\n    from sinks import metrics\n")
    imports = _imports(tree, "state.x")
    assert imports == {"pyspark", "streaming.app.settings", "state.model"}
    assert not _within("streaming.app.settings", _layer("state.x")[1])


def _generation_writes(source: str) -> list[int]:
    """Lines that assign a `.generation` attribute."""
    return [node.lineno for node in ast.walk(ast.parse(source))
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
            for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
            if isinstance(target, ast.Attribute) and target.attr == "generation"]


def test_one_writer_of_the_generation() -> None:
    """The group's generation (and its rebalance's) changes in MachineBase.enter_generation only, as
    Kafka's ClassicGroup has one initNextGeneration."""
    writers = {f"{path.relative_to(ROOT)}:{line}" for path in sorted((ROOT / "state").rglob("*.py"))
               for line in _generation_writes(path.read_text())}
    base = (ROOT / "state/machine/base.py").read_text()
    tree = ast.parse(base)
    enter = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "enter_generation")
    assert writers == {f"state/machine/base.py:{line}" for line in _generation_writes(base)
                       if enter.lineno <= line <= (enter.end_lineno or line)}
    assert len(writers) == 2
    assert _generation_writes("m.generation = 3\no.generation += 1\nx = 1") == [1, 2]
