"""Why an input could not be used: the one list of quarantine reasons. Each quarantine record
(the event sinks' `quarantine/`, replay's quarantine.jsonl) and the `reason` label of
rebalance_monitor_quarantined_records_total (docs/metrics.md) carries one of these values."""
from __future__ import annotations

from enum import StrEnum


class QuarantineReason(StrEnum):
    # broker logs
    UNPARSEABLE_LINE = "unparseable_line"                  # names the coordinator, layout or timestamp unreadable
    UNKNOWN_COORDINATOR_LINE = "unknown_coordinator_line"  # a coordinator line no catalog entry matches
    # __consumer_offsets
    MALFORMED_DUMP_LINE = "malformed_dump_line"            # a dump line that is not a record
    NULL_KEY = "null_key"
    UNKNOWN_RECORD_TYPE = "unknown_record_type"            # a key version no decoder knows
    UNKNOWN_VALUE_VERSION = "unknown_value_version"        # a value version newer than the decoders
    CORRUPT_RECORD = "corrupt_record"                      # a field that does not decode (the error names it)
    CORRUPT_BATCH = "corrupt_batch"                        # a segment's record batch: CRC, header, codec
    TRUNCATED_BATCH = "truncated_batch"                    # a segment that ends inside a batch
    UNCOMMITTED_TRANSACTION = "uncommitted_transaction"    # a transaction's records without its commit marker
    UNREADABLE_SEGMENT = "unreadable_segment"              # a segment file that cannot be opened or read


R = QuarantineReason
# The reasons each input kind can give, by the `source` label of the metrics.
BROKER_LOG_REASONS = (R.UNPARSEABLE_LINE, R.UNKNOWN_COORDINATOR_LINE)
OFFSETS_REASONS = (R.MALFORMED_DUMP_LINE, R.NULL_KEY, R.UNKNOWN_RECORD_TYPE, R.UNKNOWN_VALUE_VERSION,
                   R.CORRUPT_RECORD, R.CORRUPT_BATCH, R.TRUNCATED_BATCH, R.UNCOMMITTED_TRANSACTION,
                   R.UNREADABLE_SEGMENT)
