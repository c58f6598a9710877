"""Captures real `__consumer_offsets` records of share, streams and KIP-848 groups for the decoder's
fixtures (tests/fixtures/offsets-4x): runs scenarios on a real cluster, then reads the topic from
its start to its end and keeps the raw key/value bytes of the scenarios' groups, with the
runner's timeline (what the members did) next to them.

    .venv/bin/python -m testbed.bed.capture 4.2.2 4.4.0 --out tests/fixtures/offsets-4x

Writes, per version, `<out>/<version>/offsets-topic.jsonl` (the dump format of `replay` and
`decode-offsets`: partition, offset, timestamp, key_b64, value_b64|null), `timeline.jsonl` and
`capture.json` (versions of broker and clients, scenario results, record counts)."""
from __future__ import annotations

import argparse
import base64
import json
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from testbed.bed import jars
from testbed.bed.checks import each_offsets_record
from testbed.bed.cluster import KafkaCluster
from testbed.bed.runner import Runner
from testbed.bed.running import java_libs, run_scenario
from testbed.bed.scenarios import BY_NAME, ST_FENCED, ST_JOINED, Ctx, Expect, Scenario, _spec, with_group
from testbed.bed.shipper import LogShipper


def streams_pair(r: Runner, ctx: Ctx) -> None:
    """Two streams members share the tasks; one is killed (fenced when its 6 s session expires),
    the other takes its tasks and then leaves."""
    r.cluster.create_topic(f"{ctx.group}-out", 1, 1)
    a = r.start(_spec(ctx, "a", library="java-streams", protocol="streams"))
    b = r.start(_spec(ctx, "b", library="java-streams", protocol="streams"))
    since = r.shipper.mark()
    r.kill(b)
    r.wait_log(ST_FENCED.replace("{g}", re.escape(ctx.group)), 45, since)
    r.leave(a)


CAPTURE_SCENARIOS = [
    BY_NAME["share_group"], BY_NAME["streams_group"],
    Scenario("streams_pair", streams_pair, lambda c: [Expect("joined", ST_JOINED, 2), Expect("fenced", ST_FENCED, 1)],
             min_version=(4, 2), needs=("streams",)),
    BY_NAME["kip848"],
]


def read_topic(bootstrap: str, groups: set | None, timeout: float = 60.0) -> list[dict]:
    """Every record of `__consumer_offsets` (whose key's group is in `groups`, unless None), as
    dump lines sorted by (partition, offset)."""
    from streaming.offsets.decoder import decode_key
    out: list[dict] = []

    def keep(msg: Any) -> None:
        key, value = msg.key(), msg.value()
        if key is not None and (groups is None or decode_key(key)["group"] in groups):
            ts_type, ts = msg.timestamp()
            out.append({"partition": msg.partition(), "offset": msg.offset(),
                        "timestamp": ts, "timestamp_type": ts_type,
                        "key_b64": base64.b64encode(key).decode(),
                        "value_b64": None if value is None else base64.b64encode(value).decode()})
    each_offsets_record(bootstrap, "kafkabed-capture", keep, timeout)
    return sorted(out, key=lambda d: (d["partition"], d["offset"]))


def capture(version: str, out: Path, names: list | None) -> dict:
    work = Path(tempfile.mkdtemp(prefix=f"kafkabed-capture-{version}-"))
    scenarios = [s for s in CAPTURE_SCENARIOS if jars.parse_version(version) >= s.min_version
                 and (not names or s.name in names)]
    info: dict = {"version": version, "captured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "scenarios": []}
    java_lib, streams_lib, notes = java_libs(version)
    info["notes"] = notes
    groups = set()
    with KafkaCluster(version, workdir=work / "cluster") as cluster:
        shipper = LogShipper(cluster, "kafkabed-broker-logs").start()
        try:
            for s in scenarios:
                ctx = with_group(Ctx(version, "", "", has_java=java_lib is not None), s,
                                 f"x{version.replace('.', '')}")
                res = run_scenario(cluster, shipper, s, ctx, work, java_lib, streams_lib)
                groups.add(ctx.group)
                print(f"  {version} {s.name:<14} {res.status} {res.seconds:6.1f} s {res.error or ''}", flush=True)
                info["scenarios"].append({"scenario": s.name, "group": ctx.group, "status": res.status,
                                          "error": res.error, "lines": {c["label"]: c["found"] for c in res.lines}})
        finally:
            shipper.stop()
        records = read_topic(cluster.bootstrap, groups)
    dest = out / version
    dest.mkdir(parents=True, exist_ok=True)
    with open(dest / "offsets-topic.jsonl", "w") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    with open(dest / "timeline.jsonl", "w") as f:
        for s in scenarios:
            tl = work / s.name / "timeline.jsonl"
            if tl.exists():
                f.write(tl.read_text())
    info["records"] = len(records)
    (dest / "capture.json").write_text(json.dumps(info, indent=1) + "\n")
    if all(s["status"] == "PASS" for s in info["scenarios"]):
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"  kept {work} (a scenario failed)", flush=True)
    return info


def main(argv: list | None = None) -> int:
    p = argparse.ArgumentParser(prog="kafkabed-capture", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("versions", nargs="+")
    p.add_argument("--out", required=True)
    p.add_argument("--scenario", action="append")
    args = p.parse_args(argv)
    ok = True
    for v in args.versions:
        info = capture(v, Path(args.out), args.scenario)
        ok &= all(s["status"] == "PASS" for s in info["scenarios"])
        print(f"{v}: {info['records']} records", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
