"""PostgreSQL's binary ``COPY`` format: the frames of fixed-width number columns cut by NumPy
from ``COPY``'s bytes, and the content digest hashed in the same pass.
"""

from __future__ import annotations

import contextlib
import itertools
import struct
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tclose.errors import DataError

if TYPE_CHECKING:
    import pandas as pd


_COPY_SIGNATURE = b"PGCOPY\n\xff\r\n\x00"
_COPY_HEADER = _COPY_SIGNATURE + struct.pack(">ii", 0, 0)
_COPY_TRAILER = struct.pack(">h", -1)
#: NumPy formats of the fixed-width types in binary COPY, by type OID (int2, int4, int8,
#: float4, float8), and the struct that decodes each.
_FIXED_WIDTH = {21: ">i2", 23: ">i4", 20: ">i8", 700: ">f4", 701: ">f8"}


#: Zero bytes after a chunk's rows: a value gathered at a NULL field's position stays inside
#: the buffer (and is not used).
_PAD = bytes(8)


def _copy_frames(
    copy: Any,
    names: list[str],
    picks: Sequence[tuple[int, str]],
    count: int,
    chunk_size: int,
    sha256: Any = None,
) -> Iterator[pd.DataFrame]:
    """The DataFrames of a binary ``COPY ... TO STDOUT`` (psycopg's ``Copy``: one row per
    message) of rows of ``count`` fields: the fixed-width fields ``picks`` (``(position,
    NumPy format)``) as the columns ``names``, ``chunk_size`` rows a frame. Every byte is
    added to ``sha256`` if given. Each chunk is joined into one buffer and cut by NumPy
    (:func:`_copy_chunk`, :func:`_copy_fields`, :func:`_fields_frame`); a stream that does not
    end with the trailer, or goes on after it, is a :class:`DataError`. A reader that stops
    early drains the ``COPY`` instead of cancelling it (a cancel would abort the session's
    transaction)."""
    messages = iter(copy)
    try:
        rest = _copy_header(next(messages, b""), sha256)
        if rest:
            messages = itertools.chain([rest], messages)
        ended = False
        # Each message copied out of psycopg's buffer at once: ~2x faster than keeping its
        # buffers alive for the chunk.
        while chunk := list(map(bytes, itertools.islice(messages, chunk_size))):
            if ended:
                raise DataError("Unexpected binary COPY data from PostgreSQL (after the end).")
            rows, ended = _copy_chunk(chunk, sha256)
            if rows is not None:
                values = _copy_fields(*rows, count, picks)
                yield _fields_frame(values, names, [f for _, f in picks])
        if not ended:
            raise DataError("Unexpected binary COPY data from PostgreSQL (no trailer).")
    except GeneratorExit:
        with contextlib.suppress(Exception):
            for _ in copy:
                pass
        raise


def _copy_header(message: Any, sha256: Any) -> Any:
    """Check (and add to ``sha256``, unless ``None``) the header of a binary ``COPY ... TO
    STDOUT``, which starts its first message, and return what follows it in that message (the
    first row, the trailer, or nothing)."""
    head = bytes(message)
    if not head.startswith(_COPY_SIGNATURE) or len(head) < len(_COPY_HEADER):
        raise DataError("Unexpected binary COPY header from PostgreSQL.")
    flags, extension = struct.unpack_from(">ii", head, len(_COPY_SIGNATURE))
    size = len(_COPY_HEADER) + extension
    if flags & (1 << 16) or extension < 0 or len(head) < size:
        raise DataError("Unexpected binary COPY header from PostgreSQL (flags).")
    if sha256 is not None:
        sha256.update(head[:size])
    return head[size:]


def _copy_chunk(
    messages: list[Any], sha256: Any
) -> tuple[tuple[np.ndarray, np.ndarray, np.ndarray] | None, bool]:
    """Hash (unless ``sha256`` is ``None``) a chunk of binary ``COPY`` messages (one row each,
    the last one perhaps the trailer) and join them: ``((buffer, starts, ends), ended)``, ``buffer`` the rows' bytes
    (then :data:`_PAD`) as ``uint8``, row ``i`` at ``starts[i]:ends[i]``; ``None`` for no row;
    ``ended`` if the trailer came."""
    data = b"".join([*messages, _PAD])
    size = len(data) - len(_PAD)
    if sha256 is not None:
        sha256.update(memoryview(data)[:size])
    ends = np.cumsum(np.fromiter(map(len, messages), dtype=np.int64, count=len(messages)))
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1]
    ended = len(messages[-1]) == len(_COPY_TRAILER)  # a row holds at least one field
    if ended:
        if data[size - len(_COPY_TRAILER) : size] != _COPY_TRAILER:
            raise DataError("Unexpected binary COPY trailer from PostgreSQL.")
        starts, ends = starts[:-1], ends[:-1]
    if not len(starts):
        return None, ended
    return (np.frombuffer(data, dtype=np.uint8), starts, ends), ended


def _view(buffer: np.ndarray, fmt: str) -> np.ndarray:
    """``buffer`` read as ``fmt`` at every byte offset: element ``i`` is the value whose bytes
    start at ``buffer[i]`` (overlapping, unaligned; a gather reads any field in one step)."""
    width = np.dtype(fmt).itemsize
    return np.ndarray(
        shape=(len(buffer) - width + 1,), dtype=fmt, buffer=buffer, offset=0, strides=(1,)
    )


def _copy_fields(
    buffer: np.ndarray,
    starts: np.ndarray,
    ends: np.ndarray,
    count: int,
    picks: Sequence[tuple[int, str]],
) -> list[tuple[np.ndarray, np.ndarray]]:
    """The values of fixed-width fields of binary ``COPY`` rows of ``count`` fields (row ``i``
    at ``buffer[starts[i]:ends[i]]``, ``buffer`` padded by :data:`_PAD`): for each ``(field
    position, NumPy format)`` of ``picks``, its values (in that format; meaningless where
    NULL) and where it is NULL. Every row is walked field by field, all rows at once: a
    field is its length (``int32``, ``-1`` for NULL) then that many bytes; a field count,
    length or row size that does not fit is a :class:`DataError`."""
    if (_view(buffer, ">i2")[starts] != count).any():
        raise DataError("Unexpected binary COPY row from PostgreSQL (field count).")
    lengths = _view(buffer, ">i4")
    wanted = dict(picks)
    found: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    position = starts + 2
    lowest = 0
    try:
        for field in range(count):
            length = lengths[position].astype(np.int64)
            fmt = wanted.get(field)
            position += 4
            if fmt is not None:
                null = length == -1
                if not (null | (length == np.dtype(fmt).itemsize)).all():
                    raise DataError("Unexpected binary COPY row from PostgreSQL (field size).")
                found[field] = (_view(buffer, fmt)[position], null)
            else:
                lowest = min(lowest, int(length.min()))
            position += np.maximum(length, 0, out=length)
    except IndexError:  # a length past the end of the buffer
        raise DataError("Unexpected binary COPY row from PostgreSQL (row size).") from None
    if lowest < -1:
        raise DataError("Unexpected binary COPY row from PostgreSQL (field size).")
    if (position != ends).any():  # a field past its row's end (or short of it)
        raise DataError("Unexpected binary COPY row from PostgreSQL (row size).")
    return [found[p] for p, _ in picks]


def _fields_frame(
    fields: list[tuple[np.ndarray, np.ndarray]], names: list[str], formats: list[str]
) -> pd.DataFrame:
    """The DataFrame of the fields of :func:`_copy_fields`: ``int64`` and ``float64`` columns
    when no value is NULL, else built from the tuples of Python values (``int``, ``float``,
    ``None`` for NULL) that psycopg's binary loaders give, as the generic path builds it."""
    import pandas as pd

    columns = [
        values.astype(np.float64 if fmt[1] == "f" else np.int64)
        for (values, _), fmt in zip(fields, formats, strict=True)
    ]
    if not any(null.any() for _, null in fields):
        frame = pd.DataFrame(dict(enumerate(columns)))  # by position: two names may be equal
        frame.columns = pd.Index(names)
        return frame
    python = []
    for column, (_, null) in zip(columns, fields, strict=True):
        values = column.tolist()
        for i in np.flatnonzero(null).tolist():
            values[i] = None
        python.append(values)
    return pd.DataFrame.from_records(list(zip(*python)), columns=names)
