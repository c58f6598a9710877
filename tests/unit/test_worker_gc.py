"""Python workers freeze their loaded heap once (streaming/spark/worker_gc.py)."""
import subprocess
import sys

PROGRAM = """
import gc
import pandas, pyarrow
from streaming.spark.worker_gc import freeze_worker_heap
assert gc.get_freeze_count() == 0
freeze_worker_heap()
frozen = gc.get_freeze_count()
class Cycle:
    pass
a, b = Cycle(), Cycle()
a.other, b.other = b, a          # cyclic garbage made after the freeze: still collected
del a, b
freeze_worker_heap()             # once per process: the new objects are not frozen
assert gc.get_freeze_count() == frozen, (gc.get_freeze_count(), frozen)
assert gc.collect() >= 2
print(frozen)
"""


def test_the_heap_is_frozen_once_and_later_garbage_is_collected():
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) > 10_000        # pandas and pyarrow alone hold tens of thousands of objects
