"""tclose.core.published: the content digest and the streamed linkage tracker."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from tclose.base.digests import ContentDigest
from tclose.core.published import TupleTracker, linkable_rows


def _digest(rows, columns=("w", "x", "y", "z"), chunks=1):
    digest = ContentDigest(columns)
    size = max(1, len(rows) // chunks)
    for start in range(0, len(rows), size):
        digest.update(rows[start : start + size])
    return digest.as_dict()["sha256"]


def test_digest_reads_aware_datetimes_in_utc():
    utc = dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone.utc)
    plus2 = utc.astimezone(dt.timezone(dt.timedelta(hours=2)))
    assert _digest([(1, utc)], ("a", "b")) == _digest([(1, plus2)], ("a", "b"))


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
