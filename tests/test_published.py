"""tclose.core.published: the content digest and the streamed linkage tracker."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from tclose.base.digests import ContentDigest
from tclose.core.published import TupleTracker, linkable_rows

ROWS = [(1, 2.5, "a", None), (2, 3.5, "b", None), (3, 2.5, "a", None)]


def _digest(rows, columns=("w", "x", "y", "z"), chunks=1):
    digest = ContentDigest(columns)
    size = max(1, len(rows) // chunks)
    for start in range(0, len(rows), size):
        digest.update(rows[start : start + size])
    return digest.as_dict()["sha256"]


def test_digest_ignores_row_order_and_chunking_but_sees_every_change():
    base = _digest(ROWS)
    assert _digest(ROWS[::-1]) == base and _digest(ROWS, chunks=3) == base
    assert _digest([*ROWS, ROWS[0]]) != base  # a duplicated row
    assert _digest(ROWS[:2]) != base  # a removed row
    assert _digest([(1, 2.5, "a", None), (2, 3.5, "b", None), (3, 2.5, "b", None)]) != base
    assert _digest([(1, 2.5, "a", None), (2, 3.5, "b", None), (3, 2.5, "a", 0)]) != base
    assert _digest(ROWS, columns=("w", "x", "y", "q")) != base  # a renamed column


def test_digest_reads_aware_datetimes_in_utc():
    utc = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc)
    plus2 = utc.astimezone(dt.timezone(dt.timedelta(hours=2)))
    assert _digest([(1, utc)], ("a", "b")) == _digest([(1, plus2)], ("a", "b"))


def test_digest_canonicalizes_only_the_columns_that_need_it_with_the_same_result():
    """Only columns of a type that needs it go through the canonical form; the digest is the
    one of canonicalizing every value (the definition), NULLs first in a column included."""
    import hashlib

    import numpy as np

    from tclose.base.digests import _MODULUS, canonical

    tz = dt.timezone(dt.timedelta(hours=-5))
    rows = [
        (
            i,
            None if i == 0 else dt.datetime(2024, 1, 1, i % 24, tzinfo=tz),
            np.float64(i / 3),
            memoryview(bytes([i])),
            f"t{i}",
            dt.date(2024, 1, 1 + i % 28),
            i * 0.5,
        )
        for i in range(40)
    ]
    columns = ("a", "b", "c", "d", "e", "f", "g")
    total = 0
    for row in rows:
        text = repr(tuple(canonical(v) for v in row))
        total += int.from_bytes(
            hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest(), "big"
        )
    summary = repr((list(columns), len(rows), f"{total % _MODULUS:064x}")).encode()
    assert _digest(rows, columns, chunks=4) == hashlib.sha256(summary).hexdigest()


def test_linkage_tracker_across_chunks_takes_the_columns_together():
    tracker = TupleTracker([0, 2])
    for chunk in ([0, 1, 2], [3, 4, 5]):
        tracker.update(
            [(i // 2, "ignored", None if i < 2 else memoryview(bytes([i % 4]))) for i in chunk]
        )
    # (0, None) twice; (1, b"\x02"), (1, b"\x03"), (2, b"\x00"), (2, b"\x01") once each
    assert tracker.linkable_rows() == 4


def test_linkable_rows_rule():
    frame = pd.DataFrame({"a": ["x", "x", "y", None, None], "b": [1, 1, 1, 2, 2]})
    assert linkable_rows(frame) == 1  # (y, 1); NULL equals NULL
    assert linkable_rows(frame[["b"]]) == 0
    assert linkable_rows(pd.DataFrame({"a": ["only row"]})) == 0
    assert linkable_rows(frame[[]]) == 0
