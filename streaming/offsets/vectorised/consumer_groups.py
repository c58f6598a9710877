"""Tier 1 of the vectorised decode for KIP-848 records and tombstones: consumer types 3, 6, 7 and 8
in their common 4.0 layouts (one-byte varints, at most one topic per array, no tagged fields) and
the tombstones of types 2-23 (consumer, share and streams), one event each, JSON built with Arrow
string kernels. Kinds and data as streaming/offsets/record_events.py gives them; anything else is
left to tiers 2 and 3."""
from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from state import events as E
from streaming.offsets.records import (
    GROUP_TYPE_BY_TYPE, KIND_BY_TYPE, MEMBER_KEY_TYPES, MEMBER_STATE_NAMES, RECORD_TYPE_NAMES
)
from streaming.offsets.vectorised.arrays import be, gather_strings, safe
from streaming.offsets.vectorised.view import BatchView

_KIND_BY_TYPE = [KIND_BY_TYPE.get(t, E.CG_OTHER) for t in range(24)]
_KIND_BY_TYPE[2] = E.GROUP_TOMBSTONE
_MEMBER_KEY = np.zeros(24, dtype=bool)
_MEMBER_KEY[sorted(MEMBER_KEY_TYPES)] = True


def _tombstone_json_by_type() -> list[str | None]:
    """The data of a tombstone of each type >= 3 (record_events.py): {"group_type", "tombstone"},
    plus type and type_name for the cg_other types."""
    out: list[str | None] = []
    for t in range(24):
        if t < 3 or t not in RECORD_TYPE_NAMES:
            out.append(None)          # 0/1: offset tombstones (commits.py); 2: group_tombstone, no data
            continue
        data: dict = {"group_type": GROUP_TYPE_BY_TYPE[t], "tombstone": True}
        if t not in KIND_BY_TYPE:
            data.update(type=t, type_name=RECORD_TYPE_NAMES[t])
        out.append(json.dumps(data, separators=(",", ":"), sort_keys=True))
    return out


_TOMBSTONE_JSON = pa.array(_tombstone_json_by_type(), pa.string())
_STATE_NAMES = pa.array([MEMBER_STATE_NAMES.get(x, "UNKNOWN") for x in range(-128, 128)], pa.string())


@dataclass
class _Layouts:
    """The candidate rows (KIP-848 types with a plain key) and which common layout each has; every
    array covers the candidate rows only (commits are most of a batch)."""
    rows: np.ndarray          # candidate rows of the batch
    key_type: np.ndarray
    glen: np.ndarray          # group id length
    mpos: np.ndarray          # member id position (member-keyed types)
    mlen: np.ndarray
    member_keyed: np.ndarray
    tomb: np.ndarray          # tombstones of types 2-23
    epoch: np.ndarray         # types 3 and 6: Epoch / AssignmentEpoch int32, no tags
    t7: np.ndarray            # type 7: one topic, one-byte partition count, no tags
    k7: np.ndarray            # its partition count
    t8: np.ndarray            # type 8: epochs, state, two arrays of zero or one topic each
    counts8: list[np.ndarray]  # its assigned and pending-revocation partition counts


def _type8(byte: Callable[[np.ndarray | int], np.ndarray], ok8: np.ndarray, vl: np.ndarray
           ) -> tuple[np.ndarray, list[np.ndarray]]:
    p = np.full(len(vl), 11, dtype=np.int64)
    counts = []
    for _ in range(2):
        c = byte(p)
        one = c == 2
        k = np.where(one, byte(p + 17) - 1, 0)
        ok8 &= ((c == 1) | (one & (byte(p + 17) >= 1) & (byte(p + 17) < 0x80)))
        after = np.where(one, p + 18 + 4 * k, p + 1)
        ok8 &= np.where(one, (after < vl) & (byte(np.where(ok8, after, 0)) == 0), True)
        counts.append(np.where(one, k, 0))
        p = np.where(one, after + 1, after)
    ok8 &= (vl == p + 1) & (byte(np.where(ok8, p, 0)) == 0)
    return ok8, counts


def _layouts(view: BatchView) -> _Layouts | None:
    kt, kl = view.key_type, view.key_lengths
    known = (kt >= 2) & (kt <= 23) & (kt != 16) & (kt != 18)
    cand_rows = np.flatnonzero(view.base_ok & (kl >= 4) & known)
    if len(cand_rows) == 0:
        return None
    cand = np.ones(len(cand_rows), dtype=bool)
    kt, kl = kt[cand_rows], kl[cand_rows]
    ks, kd = view.key_starts[cand_rows], view.key_data
    member_keyed = _MEMBER_KEY[np.clip(kt, 0, 23)]
    glen = be(kd, ks + 2, 2, ">i2")
    cand &= (glen >= 0) & (4 + glen <= kl)
    mpos = ks + 4 + np.where(cand, glen, 0)
    mlen = np.where(member_keyed, be(kd, mpos, 2, ">i2"), 0)
    cand &= np.where(member_keyed, (mlen >= 0) & (kl == 4 + glen + 2 + mlen), kl == 4 + glen)
    vvalid = view.vvalid[cand_rows]
    vs, vl, vd = view.value_starts[cand_rows], view.value_lengths[cand_rows], view.value_data
    val = cand & vvalid & (vl >= 3) & (view.value_version[cand_rows] == 0)

    def byte(off: np.ndarray | int) -> np.ndarray:   # one byte at vs+off
        return vd[safe(vd, vs + off, 1)].astype(np.int64)

    k7 = byte(19) - 1
    t7 = val & (kt == 7) & (byte(2) == 2) & (k7 >= 0) & (byte(19) < 0x80) & (vl == 22 + 4 * k7)
    t7 &= (byte(20 + 4 * np.where(t7, k7, 0)) == 0) & (byte(21 + 4 * np.where(t7, k7, 0)) == 0)
    t8, counts = _type8(byte, val & (kt == 8) & (vl >= 14), vl)
    return _Layouts(rows=cand_rows, key_type=kt, glen=glen, mpos=mpos, mlen=mlen, member_keyed=member_keyed,
                    tomb=cand & ~vvalid, epoch=val & ((kt == 3) | (kt == 6)) & (vl == 7) & (byte(6) == 0),
                    t7=t7, k7=k7, t8=t8, counts8=counts)


def consumer_group_rows(view: BatchView) -> tuple[list[pa.RecordBatch], np.ndarray]:
    """The event batch of the rows this tier takes, and the mask of those rows in the batch."""
    taken = np.zeros(view.batch.num_rows, dtype=bool)
    lay = _layouts(view)
    if lay is None:
        return [], taken
    # Type 8 (a member's current assignment) is left to the next tier: its event names the
    # partitions the member owns (docs/impact.md), which this tier does not build.
    rows = np.flatnonzero(lay.tomb | lay.epoch | lay.t7)
    if len(rows) == 0:
        return [], taken
    took = lay.rows[rows]
    taken[took] = True
    kd, ks = view.key_data, view.key_starts[took]
    vd, vs = view.value_data, view.value_starts[took]
    mk = lay.member_keyed[rows]
    member = gather_strings(kd, np.where(mk, lay.mpos[rows] + 2, 0), np.where(mk, lay.mlen[rows], 0))
    ktr = pa.array(lay.key_type[rows])
    epoch_rows = lay.epoch[rows]
    s8 = be(vd, vs + 10, 1, ">i1")
    j8 = pc.binary_join_element_wise(
        '{"assigned":', pc.cast(pa.array(lay.counts8[0][rows]), pa.string()),
        ',"group_type":"consumer","member_epoch":', pc.cast(pa.array(be(vd, vs + 2, 4, ">i4")), pa.string()),
        ',"pending_revocation":', pc.cast(pa.array(lay.counts8[1][rows]), pa.string()),
        ',"previous_member_epoch":', pc.cast(pa.array(be(vd, vs + 6, 4, ">i4")), pa.string()),
        ',"state":', pc.cast(pa.array(s8), pa.string()),
        ',"state_name":"', _STATE_NAMES.take(pa.array(s8 + 128)), '","tombstone":false}', "")
    j7 = pc.binary_join_element_wise('{"group_type":"consumer","partitions":',
                                     pc.cast(pa.array(lay.k7[rows]), pa.string()), ',"tombstone":false}', "")
    data = pc.if_else(pa.array(lay.tomb[rows]), _TOMBSTONE_JSON.take(ktr),
                      pc.if_else(pa.array(epoch_rows), pa.scalar('{"group_type":"consumer","tombstone":false}'),
                                 pc.if_else(pa.array(lay.t7[rows]), j7, j8)))
    out = view.record_events(
        took, group=gather_strings(kd, ks + 4, lay.glen[rows]),
        kind=pa.array(_KIND_BY_TYPE, pa.string()).take(ktr),
        generation=pa.array(np.where(epoch_rows, be(vd, vs + 2, 4, ">i4"), 0).astype(np.int32), mask=~epoch_rows),
        member_id=pc.if_else(pa.array(mk), member, pa.nulls(len(rows), pa.string())), data_json=data)
    return [out], taken
