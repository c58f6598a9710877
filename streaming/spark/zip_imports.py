"""Spark's Python processes import pyspark from compiled files when they can.

Spark starts its Python processes (the worker daemons; one runner per query for each Python data
source, which the replay sources are) with `$SPARK_HOME/python/lib/pyspark.zip` first on their
PYTHONPATH. Python never caches the compiled code of modules it imports from a zip, so every such
process compiles the pyspark modules it needs anew before it does anything: about 0.7 s of CPU
here, paid again by every replay query, on its critical path (bench/logs, docs/benchmarks.md).

When SPARK_HOME is the pip-installed pyspark package itself (local mode, and this project's
image), the same sources sit next to the zip in site-packages, compiled at install time. Moving
the zip behind site-packages makes those processes import them from there. Any other SPARK_HOME
(a Spark distribution, a cluster's image) keeps its order: its zip may hold a different pyspark.

Called at interpreter start by the .pth file that `install_pth` writes
(`rebalance_monitor_pyspark.pth`): it must be cheap and must never raise.
"""
from __future__ import annotations

import os

PTH_NAME = "rebalance_monitor_pyspark.pth"
# One line: .pth files run lines that start with "import"; the guard keeps a venv without this
# project (uninstalled, broken) from printing a traceback at every interpreter start.
PTH_LINE = ('import sys; exec("try:\\n from streaming.spark.zip_imports import prefer_compiled_pyspark\\n'
            ' prefer_compiled_pyspark(sys.path)\\nexcept Exception:\\n pass")\n')


def _own_package_zip(entry: str, path: list[str]) -> bool:
    """Is `entry` the pyspark.zip of a SPARK_HOME that is the pyspark package in a directory
    that is itself on `path` (site-packages)?"""
    if os.path.basename(entry) != "pyspark.zip":
        return False
    lib = os.path.dirname(os.path.realpath(entry))       # the image's /opt/spark is a symlink
    home = os.path.dirname(os.path.dirname(lib))             # <home>/python/lib/pyspark.zip
    if os.path.basename(home) != "pyspark" or not os.path.isfile(os.path.join(home, "__init__.py")):
        return False
    site = os.path.dirname(home)
    return any(p and os.path.realpath(p) == site for p in path)


def prefer_compiled_pyspark(path: list[str]) -> list[str]:
    """Move the pyspark.zip entries of `path` that belong to the installed pyspark package to the
    end of `path` (in place); returns the moved entries."""
    try:
        moved = [p for p in path if _own_package_zip(p, path)]
        for p in moved:
            path.remove(p)
        path.extend(moved)
        return moved
    except Exception:       # never break an interpreter's start over a speed-up
        return []


def install_pth(site_packages: str | None = None) -> str:
    """Write the .pth file into `site_packages` (default: this interpreter's; idempotent);
    returns its path. Run by scripts/bootstrap and the Dockerfile."""
    if site_packages is None:
        import sysconfig     # here, not at the top: the .pth imports this module at every start
        site_packages = sysconfig.get_paths()["purelib"]
    target = os.path.join(site_packages, PTH_NAME)
    try:
        with open(target, encoding="utf-8") as handle:
            if handle.read() == PTH_LINE:
                return target
    except OSError:
        pass
    with open(target, "w", encoding="utf-8") as handle:
        handle.write(PTH_LINE)
    return target

