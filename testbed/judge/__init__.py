"""The judge: what the monitor must report for what the bed did (expect.py, from the bed's
timeline and the broker's own lines, never from the monitor's output), verdicts on its event sink
and /metrics (verdict.py), scenarios with the monitor watching (live_run.py, watch.py), the version
matrix (matrix.py: `python -m testbed.judge.matrix`, scripts/kafka-matrix), faults against a
replay reference (faults.py), and the latency of broker line -> /metrics (latency.py)."""
