"""The test bed, shared by the tests (tests/) and the benches (bench/); neither imports the
other's modules, both import these. No pytest dependency.

- `testbed.bed`: real Apache Kafka brokers from Maven jars on loopback, a log shipper, members as
  processes, scenarios with a ground-truth timeline (`scripts/kafka-bed`);
- `testbed.judge`: what the monitor must report for what the bed did (expect.py), verdicts on its
  event sink and /metrics (verdict.py), the version matrix (`python -m testbed.judge.matrix`,
  `scripts/kafka-matrix`), faults, and the latency probe (latency.py);
- `testbed.monitor`: `rebalance-monitor run` as a process (`MonitorProcess`);
- `testbed.metrics`: /metrics pages parsed with prometheus_client's parser;
- `testbed.proc`, `testbed.stats`: CPU of a process tree, percentiles;
- `testbed.spark_cluster`, `testbed.chart`: a Spark standalone cluster that submits with the Helm
  chart's settings;
- `testbed.state_budget`: the stored state of the real sc03 group (issue 15's budget)."""
