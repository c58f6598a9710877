"""Spark Structured Streaming glue and the input parsers (broker logs, __consumer_offsets)."""
