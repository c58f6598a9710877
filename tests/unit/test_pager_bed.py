"""The pager bed's parts that need no server (testbed/bed/pager.py, receiver.py)."""
from __future__ import annotations

import json
import urllib.request

import yaml

from dashboards import alertmanager
from testbed.bed.pager import SHIPPED_AM, shipped_config
from testbed.bed.receiver import Receiver


def test_the_check_runs_the_shipped_alertmanager_file_with_only_its_receivers_moved():
    urls = {name: f"http://127.0.0.1:1/{name}" for name in alertmanager.PLACEHOLDER_URLS}
    ran = shipped_config(urls)
    shipped = yaml.safe_load(SHIPPED_AM.read_text())
    assert ran["route"] == shipped["route"] and ran["inhibit_rules"] == shipped["inhibit_rules"]
    assert {r["name"]: r["webhook_configs"][0]["url"] for r in ran["receivers"]} == urls
    assert ran == alertmanager.config(urls)


def test_the_receiver_records_each_notification_with_its_receiver_and_time(tmp_path):
    receiver = Receiver(tmp_path / "n.jsonl").start()
    try:
        body = {"status": "firing", "groupKey": "{}:{incident=\"x\"}", "alerts": [{"labels": {"alertname": "A"}}]}
        request = urllib.request.Request(f"{receiver.url}/pager", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
        urllib.request.urlopen(request, timeout=5).read()
        (n,) = receiver.received("pager")
        assert (n.status, n.group_key, n.alerts[0]["labels"]["alertname"]) == ("firing", body["groupKey"], "A")
        assert receiver.received("tickets") == []
        assert json.loads((tmp_path / "n.jsonl").read_text())["receiver"] == "pager"
    finally:
        receiver.stop()
