"""Which state layout a checkpoint holds, so a restart keeps it.

The stateful step keys its state by (cluster, group) in checkpoints written before state buckets,
and by (cluster, bucket of the group) since (QueryOptions.state_buckets). Spark refuses to resume
a checkpoint with another key schema, and a different bucket count would look each group up in
the wrong bucket: a checkpoint that already holds state keeps the layout and count it was
written with, whatever the setting says now. Spark writes the key schema of the operator's state
next to its first partition; the bucket column's name carries the count (streaming/rows.py).
"""
from __future__ import annotations

import json
import logging
import os
import re

from streaming.rows import STATE_BUCKET_PREFIX

LOG = logging.getLogger(__name__)
_BUCKETS = re.compile(r'"name"\s*:\s*"' + re.escape(STATE_BUCKET_PREFIX) + r'(\d+)"')
_GROUP = re.compile(r'"name"\s*:\s*"group"')


def checkpoint_state_buckets(query_checkpoint: str) -> int | None:
    """The bucket count the checkpoint's state was written with (0: one key per group), None when
    it holds no state yet."""
    path = os.path.join(query_checkpoint, "state", "0", "0", "_metadata", "schema")
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    found = _BUCKETS.search(text)
    if found:
        return int(found.group(1))
    if _GROUP.search(text):
        return 0
    raise ValueError(f"{path}: the checkpoint's state has a key schema this release does not know; "
                     f"was it written by another program?")


def checkpoint_conf(query_checkpoint: str, key: str) -> str | None:
    """A Spark setting a checkpoint keeps (its newest offsets-log entry's `conf`: the state
    partitions, the state store provider...); None when it has no entry yet or the entry lacks it."""
    offsets = os.path.join(query_checkpoint, "offsets")
    try:
        batches = sorted((int(n) for n in os.listdir(offsets) if n.isdigit()), reverse=True)
    except FileNotFoundError:
        return None
    for batch in batches:
        try:
            with open(os.path.join(offsets, str(batch)), encoding="utf-8", errors="replace") as handle:
                lines = handle.read().splitlines()
            conf = json.loads(lines[1])["conf"]
        except (OSError, IndexError, KeyError, ValueError, TypeError):
            continue      # a half-written or foreign entry: the one before says it too
        value = conf.get(key) if isinstance(conf, dict) else None
        return None if value is None else str(value)
    return None


def checkpoint_shuffle_partitions(query_checkpoint: str) -> int | None:
    """The state partitions (spark.sql.shuffle.partitions) a checkpoint was written with; None
    when it has none yet."""
    value = checkpoint_conf(query_checkpoint, "spark.sql.shuffle.partitions")
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


def state_store_note(query_checkpoint: str, configured: dict[str, str]) -> str | None:
    """What to tell the user at start when the `state_store` setting names another provider than
    the checkpoint's: Spark keeps the checkpoint's."""
    from streaming.spark.session import STATE_STORE_PROVIDER, STATE_STORES
    existing = checkpoint_conf(query_checkpoint, STATE_STORE_PROVIDER)
    wanted = configured.get(STATE_STORE_PROVIDER)
    if existing is None or wanted is None or existing == wanted:
        return None
    names = {conf[STATE_STORE_PROVIDER]: name for name, conf in STATE_STORES.items()}
    return (f"state_store: the checkpoint in {query_checkpoint} keeps its state in {names.get(existing, existing)} "
            f"and Spark keeps that provider (the setting says {names.get(wanted, wanted)}). To change it, start a new "
            f"checkpoint location: with kafka.starting_offsets = earliest (the default) it rebuilds every group's "
            f"state from the topics (docs/configuration.md)")


def shuffle_partitions_note(query_checkpoint: str, configured: int) -> str | None:
    """What to tell the user at start when the setting differs from the checkpoint's count: Spark
    keeps the checkpoint's (it partitions the state by it), so the setting has no effect there."""
    existing = checkpoint_shuffle_partitions(query_checkpoint)
    if existing is None or existing == configured:
        return None
    return (f"shuffle_partitions: the checkpoint in {query_checkpoint} was written with {existing} state "
            f"partitions and Spark keeps them (the setting says {configured}): the stateful step runs on at "
            f"most {existing} cores at once. To change the count, start a new checkpoint location: with "
            f"kafka.starting_offsets = earliest (the default) it rebuilds every group's state from the topics "
            f"(docs/configuration.md)")


def state_buckets_for(query_checkpoint: str, configured: int) -> int:
    """`configured` for a new checkpoint, the checkpoint's own count for one that has state."""
    existing = checkpoint_state_buckets(query_checkpoint)
    if existing is None:
        return configured
    if existing != configured:
        LOG.warning("state_buckets: the checkpoint in %s was written with %s; keeping it (the setting says %d; "
                    "a new checkpoint location starts with the setting)", query_checkpoint,
                    f"{existing} state buckets" if existing else "one state key per group", configured)
    return existing
