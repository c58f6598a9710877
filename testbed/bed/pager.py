"""The pager path on the bed, on loopback: Debian's `prometheus` scraping the monitor with the
project's rules, Debian's `prometheus-alertmanager` with the project's configuration
(alerts/alertmanager.yml as shipped, its receivers pointed at the bed's), and a webhook receiver that
records every notification with its arrival time (testbed/bed/receiver.py). Started and stopped
like the brokers (testbed/bed/procs.Proc)."""
from __future__ import annotations

import json
import shutil
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from dashboards import alertmanager
from testbed.bed.procs import BedError, Proc, free_port, port_open, wait_for
from testbed.bed.receiver import Receiver

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "alerts" / "rebalance-monitor.rules.yml"
SHIPPED_AM = ROOT / "alerts" / "alertmanager.yml"
# Prometheus scrapes and evaluates this often on the bed (what a page waits for is `for:`, group
# wait and these); production setups use 15-30 s, which adds as much to a page.
SCRAPE_INTERVAL = "2s"


def _binary(name: str, package: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BedError(f"{name} not installed: Debian's {package} (scripts/test and scripts/pager-check install it)")
    return found


def shipped_config(urls: dict[str, str]) -> dict:
    """alerts/alertmanager.yml as shipped, its receivers' webhooks at `urls` (nothing else changed)."""
    doc = yaml.safe_load(SHIPPED_AM.read_text())
    for receiver in doc["receivers"]:
        for hook in receiver.get("webhook_configs") or []:
            hook["url"] = urls[receiver["name"]]
    return doc


class _Server:
    """A server of Debian's on a free loopback port, its output in `out`; stopped like the brokers."""

    name = ""

    def __init__(self, out: Path):
        self.out = out
        self.port = free_port()
        out.mkdir(parents=True, exist_ok=True)
        self.proc: Proc | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _launch(self, cmd: list[str], ready, timeout: float, cwd: Path | None = None) -> None:
        self.proc = Proc(cmd, self.name, self.out, cwd=cwd)
        wait_for(ready, timeout, f"{self.name} to be ready", interval=0.2, alive=self._alive)

    def _alive(self) -> None:
        if self.proc is not None and not self.proc.alive():
            raise BedError(f"{self.name} exited: {self.proc.tail()}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(10)
            self.proc = None


class AlertmanagerServer(_Server):
    """Alertmanager with the shipped configuration, its receivers at `receiver`'s address."""

    name = "alertmanager"

    def __init__(self, out: Path, receiver_url: str):
        super().__init__(out)
        self.config_path = out / "alertmanager.yml"
        self.urls = {name: f"{receiver_url}/{name}" for name in alertmanager.PLACEHOLDER_URLS}
        self.config_path.write_text(yaml.safe_dump(shipped_config(self.urls), sort_keys=False))

    def start(self, timeout: float = 30.0) -> AlertmanagerServer:
        self._launch([_binary("prometheus-alertmanager", "prometheus-alertmanager"),
                      f"--config.file={self.config_path}", f"--storage.path={self.out / 'data'}",
                      f"--web.listen-address=127.0.0.1:{self.port}", "--cluster.listen-address="],
                     lambda: port_open(self.port), timeout)
        return self


class PrometheusServer(_Server):
    """Prometheus scraping the monitor (job "rebalance-monitor") with the project's rules,
    sending to `alertmanager_port`."""

    name = "prometheus"

    def __init__(self, out: Path, monitor_port: int, alertmanager_port: int, cluster: str):
        super().__init__(out)
        self.config_path = out / "prometheus.yml"
        shutil.copy(RULES, out / RULES.name)
        self.config_path.write_text(yaml.safe_dump({
            "global": {"scrape_interval": SCRAPE_INTERVAL, "evaluation_interval": SCRAPE_INTERVAL},
            "rule_files": [RULES.name],
            "alerting": {"alertmanagers": [{"static_configs": [{"targets": [f"127.0.0.1:{alertmanager_port}"]}]}]},
            "scrape_configs": [{"job_name": "rebalance-monitor",
                                "static_configs": [{"targets": [f"127.0.0.1:{monitor_port}"],
                                                    "labels": {"bed_cluster": cluster}}]}],
        }, sort_keys=False))

    def start(self, timeout: float = 60.0) -> PrometheusServer:
        self._launch([_binary("prometheus", "prometheus"), f"--config.file={self.config_path}",
                      f"--storage.tsdb.path={self.out / 'data'}", f"--web.listen-address=127.0.0.1:{self.port}"],
                     self._ready, timeout, cwd=self.out)
        return self

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                return r.status == 200
        except OSError:
            return False

    def ever_firing(self, selector: str, since_s: float) -> list[dict]:
        """The label sets of the alerts matching `selector` (on ALERTS) that fired at some point
        since `since_s` (Unix seconds), one per alert."""
        query = urllib.parse.urlencode({"query": f'ALERTS{{alertstate="firing",{selector}}}',
                                        "start": since_s, "end": time.time(), "step": 5})
        with urllib.request.urlopen(f"{self.url}/api/v1/query_range?{query}", timeout=10) as r:
            return [s["metric"] for s in json.loads(r.read())["data"]["result"]]


class Pager:
    """Receiver, Alertmanager and Prometheus, started in that order and stopped in reverse."""

    def __init__(self, out: Path, monitor_port: int, cluster: str):
        self.out = out
        self.receiver = Receiver(out / "notifications.jsonl")
        self.alertmanager = AlertmanagerServer(out / "alertmanager", self.receiver.url)
        self.prometheus = PrometheusServer(out / "prometheus", monitor_port, self.alertmanager.port, cluster)

    def start(self) -> Pager:
        self.receiver.start()
        self.alertmanager.start()
        self.prometheus.start()
        return self

    def stop(self) -> None:
        for part in (self.prometheus, self.alertmanager, self.receiver):
            try:
                part.stop()
            except Exception:        # stop the rest whatever one does
                pass

    def __enter__(self) -> Pager:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
