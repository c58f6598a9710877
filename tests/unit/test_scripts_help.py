"""Every script in scripts/ and bench/ works from a fresh clone (issue 52): `--help` answers at once
(exit 0, its usage; nothing installed, nothing started) in a copy of the repository's tracked
files, which has no .venv or .tools; and the copy holds the same scripts and nothing more after
they ran, so no script depends on a file git does not track. In the checkout, where
scripts/test has bootstrapped .venv, a wrapper of a Python module adds that module's options.

The copy is of the working tree's tracked files (`git ls-files`), not a `git clone` of HEAD: the
same thing as a fresh clone in CI (itself a fresh clone), and it also covers uncommitted changes."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# The image's entrypoint: its --help is the installed monitor's (`docker run IMAGE --help`).
IMAGE_ONLY = {"scripts/image-entrypoint"}


def _scripts(root: Path) -> list[str]:
    """The executable scripts (a #! line) of scripts/ and bench/, relative to `root`."""
    return sorted(str(p.relative_to(root)) for d in ("scripts", "bench") for p in (root / d).iterdir()
                  if p.is_file() and os.access(p, os.X_OK) and p.read_bytes()[:2] == b"#!")


def _help(root: Path, script: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run([str(root / script), "--help"], cwd=root, capture_output=True, text=True, timeout=60,
                            env=env)
    assert result.returncode == 0, (script, result.stdout[-2000:], result.stderr[-2000:])
    assert result.stdout.strip(), (script, result.stderr[-2000:])
    return result.stdout


def _files(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir()}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    copy = tmp_path_factory.mktemp("fresh-clone")
    for name in filter(None, listed.decode().split("\0")):
        src = ROOT / name
        if src.is_file():          # a tracked file deleted in the working tree is not copied
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, copy / name)
    return copy


def test_every_script_answers_help_in_a_fresh_clone_and_leaves_nothing(fresh):
    scripts = _scripts(fresh)
    assert scripts == _scripts(ROOT), "a script that git does not track (or an executable bit it does not have)"
    assert len(scripts) >= 20
    before = _files(fresh)
    for script in sorted(set(scripts) - IMAGE_ONLY):
        out = _help(fresh, script)
        assert "Traceback" not in out, (script, out)
    assert _files(fresh) == before       # no .venv, no .tools, no dist/: nothing was installed


def test_every_script_answers_help_in_the_checkout():
    venv = ROOT / ".venv" / "bin" / "python"
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for script in _scripts(ROOT):
        out = _help(ROOT, script, env)
        if venv.exists() and "HELP_MODULE=" in (ROOT / script).read_text():
            assert "usage:" in out, (script, out)          # the module's own options (argparse)
    assert "usage:" in _help(ROOT, "scripts/image-entrypoint", env)      # the monitor's


def test_the_spark_entry_point_answers_help():
    result = subprocess.run([sys.executable, "scripts/spark_entrypoint.py", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 0 and "usage:" in result.stdout, result.stderr[-2000:]
