"""`scripts/kafka-bed VERSION`: a cluster for a developer; prints the bootstrap servers and the
log paths, keeps running until Ctrl-C (or SIGTERM), then stops every process it started."""
from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path

from testbed.bed.cluster import KafkaCluster
from testbed.bed.log4jconf import LAYOUTS
from testbed.bed.procs import BedError
from testbed.bed.shipper import LogShipper


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="kafka-bed", description=__doc__)
    p.add_argument("version", help="Kafka version, e.g. 4.4.0, 3.9.2, 2.8.2")
    p.add_argument("--brokers", type=int, default=2)
    p.add_argument("--layout", default="default", choices=sorted(LAYOUTS))
    p.add_argument("--workdir", type=Path, help="default: a new temp dir (kept after exit)")
    p.add_argument("--offsets-retention-minutes", type=int)
    p.add_argument("--ship", metavar="TOPIC", help="ship every broker's server.log into TOPIC")
    p.add_argument("--envelope", action="store_true", help="with --ship: Filebeat-style JSON")
    args = p.parse_args(argv)
    def interrupt(*_):
        raise KeyboardInterrupt
    # Ctrl-C even when started in the background (where a shell ignores SIGINT), and SIGTERM.
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    t0 = time.monotonic()
    cluster = KafkaCluster(args.version, args.brokers, workdir=args.workdir, layout=args.layout,
                           offsets_retention_minutes=args.offsets_retention_minutes)
    shipper = None
    try:
        cluster.start()
        print(f"Kafka {args.version} ({'KRaft' if cluster.kraft else 'ZooKeeper'}) up in "
              f"{time.monotonic() - t0:.1f} s")
        print(f"bootstrap: {cluster.bootstrap}")
        for bid in cluster.brokers:
            print(f"broker {bid}: {cluster.server_log_path(bid)}")
        if args.ship:
            shipper = LogShipper(cluster, args.ship, envelope=args.envelope).start()
            print(f"shipping server.log lines into topic {args.ship}")
        print(f"workdir: {cluster.workdir}  (Ctrl-C stops)", flush=True)
        while True:
            signal.pause()
    except KeyboardInterrupt:
        print("stopping", file=sys.stderr)
    except BedError as exc:
        print(f"kafka-bed: {exc}", file=sys.stderr)
        return 1
    finally:
        if shipper is not None:
            shipper.stop(drain=False, timeout=10)
        cluster.close(keep=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
