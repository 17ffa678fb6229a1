"""Cost of the published-content digest and of the linkage tracker, per million rows.

Usage: python bench/bench_digest.py [ROWS]   (default 200000; prints medians of 3 runs)
"""

from __future__ import annotations

import datetime as dt
import statistics
import sys
import time
from decimal import Decimal

from tclose.base.digests import ContentDigest
from tclose.core.published import UniqueTracker


def rows(n: int) -> list[tuple]:
    day = dt.date(2020, 1, 1)
    return [
        (
            i,
            30.5 + i % 50,
            1000 + i % 97,
            Decimal(i % 1000) / 4,
            f"ward {i % 6}",
            day + dt.timedelta(days=i % 365),
            None if i % 7 else "note",
            float(i) * 1.25,
            i % 3,
            "x",
        )
        for i in range(n)
    ]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    data = rows(n)
    columns = [f"c{i}" for i in range(10)]
    digest_times, tracker_times = [], []
    for _ in range(3):
        start = time.perf_counter()
        digest = ContentDigest(columns)
        for chunk in range(0, n, 50_000):
            digest.update(data[chunk : chunk + 50_000])
        digest_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        tracker = UniqueTracker(["c4", "c7"])
        tracker.rows = n
        for chunk in range(0, n, 50_000):
            part = data[chunk : chunk + 50_000]
            tracker.update("c4", [r[4] for r in part])
            tracker.update("c7", [r[7] for r in part])
        tracker.linking()
        tracker_times.append(time.perf_counter() - start)
    per_million = 1e6 / n
    print(f"rows: {n}, columns: 10")
    print(
        f"digest:  median {statistics.median(digest_times):.3f} s "
        f"({statistics.median(digest_times) * per_million:.2f} s per million rows)"
    )
    print(
        f"linkage: median {statistics.median(tracker_times):.3f} s for 2 columns "
        f"({statistics.median(tracker_times) * per_million:.2f} s per million rows)"
    )


if __name__ == "__main__":
    main()
