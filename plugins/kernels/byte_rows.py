"""Rows of bytes cut out of one buffer and put together into another, compiled.

Kernels of the PostgreSQL pass-through write (``tclose.connectors.pg_carried``): the bytes of
the pass-through fields of each binary ``COPY`` row read are kept as they came, and each row
written is a fixed-width record (field count, new key, aggregated values) followed by the
kept bytes of its source row. NumPy in, NumPy out; every length is in bytes.
"""

from __future__ import annotations

import numpy as np

from tclose.jit import njit


def gather_segments(
    buffer: np.ndarray, starts: np.ndarray, ends: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The segments ``buffer[starts[i]:ends[i]]`` one after another, and their lengths.

    Args:
        buffer: ``uint8`` bytes.
        starts: ``int64`` start of each segment, shape ``(n,)``.
        ends: ``int64`` end of each segment (``>= starts``, ``<= len(buffer)``), shape ``(n,)``.

    Returns:
        ``(joined, lengths)``: ``uint8`` of ``sum(lengths)`` bytes, ``int64`` lengths.
    """
    lengths = (ends - starts).astype(np.int64)
    if len(lengths) and (lengths.min() < 0 or ends.max() > len(buffer) or starts.min() < 0):
        raise ValueError("segments outside the buffer")
    joined = np.empty(int(lengths.sum()), dtype=np.uint8)
    _gather(buffer, starts.astype(np.int64), lengths, joined)
    return joined, lengths


def assemble_rows(
    records: np.ndarray,
    segments: np.ndarray,
    offsets: np.ndarray,
    lengths: np.ndarray,
    rows: np.ndarray,
) -> np.ndarray:
    """Output row ``j`` is ``records[j]`` then segment ``rows[j]``, all rows one after another.

    Args:
        records: ``uint8`` of shape ``(m, width)``: the fixed-width head of each output row.
        segments: ``uint8``: the segments one after another (:func:`gather_segments`).
        offsets: ``int64`` start of each segment in ``segments``, shape ``(n,)``.
        lengths: ``int64`` length of each segment, shape ``(n,)``.
        rows: ``int64`` segment of each output row (any of ``0..n-1``), shape ``(m,)``.

    Returns:
        ``uint8`` of ``m * width + lengths[rows].sum()`` bytes.
    """
    if records.ndim != 2 or len(records) != len(rows):
        raise ValueError("one record per output row is needed")
    if len(rows) and (rows.min() < 0 or rows.max() >= len(lengths)):
        raise ValueError("a row names no segment")
    rows = rows.astype(np.int64)
    out = np.empty(records.size + int(lengths[rows].sum()), dtype=np.uint8)
    _assemble(np.ascontiguousarray(records), segments, offsets, lengths, rows, out)
    return out


@njit(cache=True, nogil=True)
def _gather(buffer, starts, lengths, joined):
    position = 0
    for i in range(len(starts)):
        start = starts[i]
        for b in range(lengths[i]):
            joined[position + b] = buffer[start + b]
        position += lengths[i]


@njit(cache=True, nogil=True)
def _assemble(records, segments, offsets, lengths, rows, out):
    width = records.shape[1]
    position = 0
    for j in range(len(rows)):
        for b in range(width):
            out[position + b] = records[j, b]
        position += width
        start = offsets[rows[j]]
        for b in range(lengths[rows[j]]):
            out[position + b] = segments[start + b]
        position += lengths[rows[j]]
