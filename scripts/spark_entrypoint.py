"""Entry point for spark-submit (it needs a .py file): `spark-submit ... scripts/spark_entrypoint.py run --config FILE`.

The packages (state, streaming, sinks) come from --py-files dist/rebalance_monitor.zip
(scripts/package) or from an image where the project is installed.
"""
import sys

from streaming.app.cli import main

if __name__ == "__main__":
    sys.exit(main())
