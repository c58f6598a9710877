"""Spark's reused Python workers run a full `gc.collect()` after every task (pyspark/daemon.py).
A worker holds pyspark, pandas, pyarrow and the monitor's modules: about 80,000 objects the
collector walks each time (about 40 ms), for every task of every micro-batch. py-spy on a live
monitor at a 1 s trigger found 95 % of its workers' samples in that call.

`freeze_worker_heap()`, called first by every function Spark runs in a worker, freezes what the
worker holds at that moment once (`gc.freeze`: moved out of the cyclic collector's reach;
reference counting still frees those objects), so each later collection walks the objects of
the tasks since. What the first task creates stays collectable.
"""
from __future__ import annotations

import gc

_frozen = False


def freeze_worker_heap() -> None:
    global _frozen
    if not _frozen:
        _frozen = True
        gc.freeze()
