"""The stateful step's input text (streaming/spark/steps.py packed_event_column): what the JVM
packs for each event row is what the step's readers expect, as rows.packed_fields says: null
fields left out and the data spliced in as an object, whatever the data holds."""
from __future__ import annotations

import json

import pytest

from streaming.rows import EVENT_COLUMNS, PACKED_DATA, event_data, packed_fields, unpack_event_rows

DATAS = [
    None,
    '{"commits":[{"offset":7,"partition":0,"topic":"t"}]}',
    '{"reason":"said \\"bye\\"\\nthen left","path":"C:\\\\x","uni":"\\u00e9t\\u00e9 \\u2603"}',
    '{"members":[],"nested":{"a":[1,2.5,null,true]}}',
    "{}",
]


@pytest.mark.spark
def test_the_jvm_packs_each_row_as_packed_fields_says(spark):
    from streaming.spark.schema import EVENT_SCHEMA
    from streaming.spark.steps import packed_event_column
    rows = [("c", f"g{i}", 1_000 + i, "log", "b1", i, "member_joined", i if i % 2 else None, None,
             "m-1" if i else None, 'a "quoted" reason' if i == 2 else None, data) for i, data in enumerate(DATAS)]
    frame = spark.createDataFrame(rows, EVENT_SCHEMA)
    texts = [r[0] for r in frame.select(packed_event_column()).collect()]
    for row, text in zip(rows, texts):
        parsed = json.loads(text)
        assert parsed == packed_fields(row), text
        assert (PACKED_DATA in parsed) == bool(row[-1])
        # and the step's reader gives back the row, its data decoded once
        [back] = unpack_event_rows(row[0], row[1], [text])
        assert back[:-1] == list(row[:-1]) and event_data(back[-1]) == event_data(row[-1])
    assert len(texts) == len(rows) and EVENT_COLUMNS[-1] == "data_json"
