"""The Helm chart as the tests see it: `render(profile, *sets)` runs the real helm binary
(scripts/tools installs it into .tools/bin) and returns the rendered documents; `Submission`
is what spark-operator makes of a rendered SparkApplication, so that the Spark-cluster tests
submit with the chart's own settings (testbed/spark_cluster.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CHART = ROOT / "helm" / "rebalance-monitor"
NAMESPACE = "kafka-monitoring"
# Where the image holds the project (Dockerfile; the chart's mainApplicationFile points there).
IMAGE_PROJECT = "/opt/rebalance-monitor"


class HelmMissing(RuntimeError):
    pass


def helm_binary() -> str:
    for candidate in (os.environ.get("REBALANCE_MONITOR_HELM"), str(ROOT / ".tools" / "bin" / "helm"),
                      shutil.which("helm")):
        if candidate and Path(candidate).is_file():
            return candidate
    raise HelmMissing("helm not installed: run scripts/tools (scripts/test and scripts/spark-cluster-check do)")


def helm(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    result = subprocess.run([helm_binary(), *args], capture_output=True, text=True, timeout=120)
    if check and result.returncode != 0:
        raise AssertionError(result.stdout + result.stderr)
    return result


def values_args(profile: str | None, extra=()) -> list[str]:
    args = ["-f", str(CHART / "ci" / profile)] if profile else []
    for item in extra:
        args += ["--set", item]
    return args


_RENDERED: dict = {}


def render(profile: str | None = None, *extra: str) -> list[dict]:
    key = (profile, extra)
    if key not in _RENDERED:
        out = helm("template", "rm", str(CHART), "--namespace", NAMESPACE, *values_args(profile, extra)).stdout
        _RENDERED[key] = [d for d in yaml.safe_load_all(out) if d]
    return _RENDERED[key]


def by_kind(docs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for d in docs:
        out.setdefault(d["kind"], []).append(d)
    return out


def one(docs, kind: str, name_suffix: str = "") -> dict:
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"].endswith(name_suffix)]
    assert len(found) == 1, f"{kind}*{name_suffix}: {[d['metadata']['name'] for d in found]}"
    return found[0]


@dataclass(frozen=True)
class Submission:
    """spark-submit's view of a SparkApplication: spark-operator turns `driver.cores/memory/
    memoryOverhead` and `executor.instances/cores/memory/memoryOverhead` into the spark.driver.*
    and spark.executor.* settings, `coreLimit` into spark.kubernetes.*.limit.cores, `deps.packages`
    into --packages, and adds `sparkConf` as it is; then it submits `mainApplicationFile` with
    `arguments`."""
    conf: dict
    packages: tuple
    main_file: str
    arguments: tuple

    @classmethod
    def of(cls, app: dict) -> Submission:
        spec = app.get("spec", app)
        driver, executor = spec["driver"], spec["executor"]
        conf = {k: str(v) for k, v in (spec.get("sparkConf") or {}).items()}
        conf |= {"spark.driver.cores": str(driver["cores"]), "spark.driver.memory": str(driver["memory"]),
                 "spark.driver.memoryOverhead": str(driver["memoryOverhead"]),
                 "spark.kubernetes.driver.limit.cores": str(driver["coreLimit"]),
                 "spark.executor.instances": str(executor["instances"]),
                 "spark.executor.cores": str(executor["cores"]), "spark.executor.memory": str(executor["memory"]),
                 "spark.executor.memoryOverhead": str(executor["memoryOverhead"]),
                 "spark.kubernetes.executor.limit.cores": str(executor["coreLimit"])}
        return cls(conf, tuple((spec.get("deps") or {}).get("packages") or ()), spec["mainApplicationFile"],
                   tuple(spec["arguments"]))

    def local_main_file(self) -> Path:
        """The entry point in this checkout that the image's `local://` path names."""
        path = self.main_file.removeprefix("local://")
        assert path.startswith(IMAGE_PROJECT + "/"), self.main_file
        return ROOT / path[len(IMAGE_PROJECT) + 1:]


def spark_application(profile: str | None = None, *extra: str) -> dict:
    return one(render(profile, *extra), "SparkApplication")
