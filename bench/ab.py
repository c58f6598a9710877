"""Same-run A/B of a bench against another commit: `bench/ab REF NAME [bench args]`.

Checks REF out into a worktree outside the repo (~/.cache/rebalance-monitor/bench-ab/<sha>),
then runs the bench on that tree's code and on this one's alternately (REF, HEAD, REF, HEAD, ...;
`--rounds`, default 2), so a change in the machine's load hits both alike. Both use this
checkout's virtualenv; PYTHONPATH points each run (and its Spark Python workers) at its own
tree. Both sides run this checkout's bench script and testbed/ (`--bench-of head`, the default), so
the two differ only in the code measured, not in how it is measured; `--bench-of each` runs each tree's
own script instead. Prints the last line of every run, then one line per figure with the median
of each side and their ratio, and last:

    bench=NAME ref=<sha> <figure>_ref=... <figure>_head=... <figure>_ratio=... ...
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("REBALANCE_MONITOR_CACHE", Path.home() / ".cache" / "rebalance-monitor")) / "bench-ab"


def _worktree(ref: str) -> tuple[str, Path]:
    sha = subprocess.run(["git", "rev-parse", "--verify", f"{ref}^{{commit}}"], cwd=ROOT, check=True,
                         capture_output=True, text=True).stdout.strip()
    tree = CACHE / sha[:12]
    if not (tree / ".git").exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), sha], cwd=ROOT, check=True,
                       capture_output=True, text=True)
    return sha, tree


def _run(tree: Path, name: str, args: list[str], bench_of_head: bool) -> dict[str, float]:
    python = str(ROOT / ".venv" / "bin" / "python")
    env = dict(os.environ, PYSPARK_PYTHON=python, PYSPARK_DRIVER_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1")
    with tempfile.TemporaryDirectory(prefix="bench-ab-") as scripts:
        if bench_of_head:
            # `python -m` puts the working directory first on sys.path: this checkout's bench/ and
            # its measuring helpers (testbed/) from there, everything else (streaming/, state/,
            # sinks/) from `tree`.
            os.symlink(ROOT / "bench", Path(scripts) / "bench")
            os.symlink(ROOT / "testbed", Path(scripts) / "testbed")
            cwd, env["PYTHONPATH"] = scripts, os.pathsep.join([scripts, str(tree)])
        else:
            cwd, env["PYTHONPATH"] = str(tree), str(tree)
        result = subprocess.run([python, "-m", f"bench.bench_{name}", *args], cwd=cwd, env=env,
                                capture_output=True, text=True)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if result.returncode != 0 or not lines:
        sys.exit(f"bench/ab: {name} failed on {tree} (exit {result.returncode}):\n{result.stderr[-3000:]}")
    figures = {}
    for pair in lines[-1].split():
        key, _, value = pair.partition("=")
        try:
            figures[key] = float(value)
        except ValueError:
            continue
    print(f"{tree}: {lines[-1]}", flush=True)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ref", help="the commit to compare with (e.g. the base of a change)")
    parser.add_argument("name", choices=["logs", "offsets"], help="bench/logs or bench/offsets")
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs per side (default 2)")
    parser.add_argument("--bench-of", choices=["head", "each"], default="head",
                        help="whose bench script measures both sides: this checkout's (default) or each tree's own")
    args, bench_args = parser.parse_known_args()
    sha, tree = _worktree(args.ref)
    runs: dict[str, list[dict[str, float]]] = {"ref": [], "head": []}
    for _ in range(args.rounds):
        runs["ref"].append(_run(tree, args.name, bench_args, args.bench_of == "head"))
        runs["head"].append(_run(ROOT, args.name, bench_args, args.bench_of == "head"))
    summary = [f"bench={args.name}", f"ref={sha[:12]}"]
    for key in runs["head"][0]:
        ref = statistics.median(r[key] for r in runs["ref"] if key in r)
        head = statistics.median(r[key] for r in runs["head"])
        summary += [f"{key}_ref={ref:g}", f"{key}_head={head:g}", f"{key}_ratio={head / ref if ref else 0:.3f}"]
    print(" ".join(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
