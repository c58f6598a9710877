"""A failed query's one line (streaming/spark/failure.py) from the error texts Spark gives: a Python
exception in foreachBatch (its traceback embedded), a JVM cause chain, a heap failure, one line."""
from __future__ import annotations

from streaming.spark.failure import query_failure

FOREACH_BATCH = """[STREAM_FAILED] Query [id = b8f2, runId = a2f7] terminated with exception: [FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink. Reason: An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/py4j/clientserver.py", line 644, in _call_proxy
    return_value = getattr(self.pool[obj_id], method)(*params)
  File "/work/streaming/app/collector.py", line 9, in foreach_batch
    raise _Stopped(f"stopped at batch {bid}")
_Stopped: stopped at batch 0
 SQLSTATE: 39000 SQLSTATE: XXKST
=== Streaming Query ===
Identifier: [id = b8f2, runId = a2f7]
Current State: ACTIVE
"""


def test_the_exception_a_python_function_raised_is_the_line():
    assert query_failure(Exception(FOREACH_BATCH)) == "a Python function of the query raised _Stopped: stopped at batch 0"


def test_else_the_innermost_jvm_cause_else_the_first_line():
    chain = "Job aborted\nCaused by: org.apache.spark.SparkException: task failed\nCaused by: java.io.IOException: disk full"
    assert query_failure(Exception(chain)) == "java.io.IOException: disk full"
    assert query_failure(Exception("\n  one line  \nmore")) == "one line"
    assert len(query_failure(Exception("x" * 1000))) == 300


def test_a_heap_failure_names_the_setting():
    assert "raise driver_memory" in query_failure(Exception("a\nCaused by: java.lang.OutOfMemoryError: Java heap space"))
