"""PostgreSQL's pass-through write: source fields carried from the read to the staging table.

In a run whose source and target are the same PostgreSQL database, the join write
(:meth:`tclose.connectors.sql.Session.fill_joined`) has the server join the source with two
helper tables and sort 1M rows by their new key; that join and sort cost 1.5-1.9x a bare
``COPY`` of the table (``docs/databases.md``). Instead, pass 1 can read the columns the staging
table takes unchanged (the *carried* columns: confidential and pass-through columns) in the same
binary ``COPY`` as the key, quasi-identifier and confidential columns it parses, and keep their
bytes per row as they came, unparsed (:class:`CarriedCollector`). The write is then one binary
``COPY ... FROM STDIN`` of the staging table (:func:`write_carried`): each row is its field
count, its new key, its aggregated values (from NumPy) and the kept bytes of its source row,
rows in the order of their new keys — the server parses and stores, as in a bare ``COPY``.

The bytes go back unchanged into columns of the same types (checked by type OID,
:func:`carried_positions`), over the same connection (so in the same client encoding); binary
``COPY`` is then lossless for every type that has binary send and receive functions, which the
read checks first (:func:`unsendable_columns`). Anything else — a quasi-identifier column that is
not a fixed-width number, an aggregated column that is not ``double precision`` or an integer
(a categorical one, say), a type without binary I/O — uses the join, and the log says which
write is used and why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tclose.plugins.kernels.byte_rows import assemble_rows, gather_segments

from .sql import ROW_COLUMN

#: Binary ``COPY`` formats of the staging column types an aggregated value can be written into,
#: by type OID (``double precision``, ``bigint``, ``integer``, ``smallint``).
AGGREGATED_FORMATS = {701: ">f8", 20: ">i8", 23: ">i4", 21: ">i2"}
#: Output rows assembled and sent per ``COPY`` message group: bounds the write's extra memory.
WRITE_ROWS = 65_536


@dataclass
class CarriedRows:
    """The carried fields of every row read by pass 1.

    Attributes:
        columns: the carried columns, in the staging table's order.
        type_oids: their type OIDs as the server described the read.
        keys: the row key of every row read, in read order.
        segments: the carried fields' binary ``COPY`` bytes (length and value of each field) of
            every row, one row after another.
        offsets: where each row's bytes start in ``segments``.
        lengths: how many bytes each row has there.
    """

    columns: list[str]
    type_oids: list[int]
    keys: np.ndarray
    segments: np.ndarray
    offsets: np.ndarray
    lengths: np.ndarray


@dataclass
class CarriedCollector:
    """Collects the carried bytes of a binary ``COPY`` read chunk by chunk
    (:meth:`add`), and their rows' keys (:meth:`add_keys`)."""

    columns: list[str]
    type_oids: list[int]
    _segments: list[np.ndarray] = field(default_factory=list)
    _lengths: list[np.ndarray] = field(default_factory=list)
    _keys: list[np.ndarray] = field(default_factory=list)

    def add(self, buffer: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> None:
        """Keep ``buffer[starts[i]:ends[i]]`` of every row of a chunk."""
        segments, lengths = gather_segments(buffer, starts, ends)
        self._segments.append(segments)
        self._lengths.append(lengths)

    def add_keys(self, keys: np.ndarray) -> None:
        """The row keys of the chunk last added."""
        self._keys.append(np.asarray(keys))

    def finish(self) -> CarriedRows:
        """The rows collected (the chunks' buffers are released)."""
        lengths = np.concatenate(self._lengths) if self._lengths else np.empty(0, np.int64)
        segments = np.concatenate(self._segments) if self._segments else np.empty(0, np.uint8)
        keys = np.concatenate(self._keys) if self._keys else np.empty(0, np.int64)
        self._segments, self._lengths, self._keys = [], [], []
        offsets = np.zeros(len(lengths), dtype=np.int64)
        np.cumsum(lengths[:-1], out=offsets[1:])
        return CarriedRows(self.columns, self.type_oids, keys, segments, offsets, lengths)


def unsendable_columns(types: Mapping[str, tuple[int, int]]) -> list[str]:
    """The columns (name → ``(send function OID, receive function OID)`` of their type) whose
    type cannot go through binary ``COPY`` both ways."""
    return [name for name, (send, receive) in types.items() if not send or not receive]


def carried_positions(
    carried: CarriedRows,
    output_columns: Sequence[str],
    staging_oids: Mapping[str, int],
    keys: np.ndarray,
    aggregated: Mapping[str, np.ndarray],
) -> np.ndarray | str:
    """For each row to write (``keys``: the kept rows' keys, a subsequence of the rows read),
    its position among the rows read; or, if the carried write cannot be used, why not.

    Args:
        carried: what pass 1 kept.
        output_columns: the staging table's columns after ``tclose_row``, in order.
        staging_oids: the type OID of every staging column (``tclose_row`` included).
        keys: the source key of every row to write, in read order.
        aggregated: column → the value written in every row to write.
    """
    expected = [c for c in output_columns if c not in aggregated]
    if carried.columns != expected:
        return "the columns read to carry are not the staging table's pass-through columns"
    if [staging_oids[c] for c in expected] != carried.type_oids:
        return "a pass-through column of the staging table has another type than its source"
    if staging_oids.get(ROW_COLUMN) != 20:
        return "the staging table's new key is not a bigint"
    for column, values in aggregated.items():
        fmt = AGGREGATED_FORMATS.get(staging_oids[column])
        if fmt is None or values.dtype.kind not in ("f" if fmt[1] == "f" else "iu"):
            return f"the aggregated column {column!r} is not written as a number"
        if fmt[1] == "i" and len(values):
            limits = np.iinfo(np.dtype(fmt))
            if values.min() < limits.min or values.max() > limits.max:
                return f"an aggregated value of {column!r} does not fit its integer type"
    if len(keys) == len(carried.keys):
        positions = np.arange(len(keys), dtype=np.int64)
    else:
        positions = np.flatnonzero(np.isin(carried.keys, keys))
    if len(positions) != len(keys) or not np.array_equal(carried.keys[positions], keys):
        return "the rows to write are not the rows read"
    return positions


def write_carried(
    copy: Any,
    carried: CarriedRows,
    positions: np.ndarray,
    new_rows: np.ndarray,
    aggregated: Mapping[str, np.ndarray],
    staging_oids: Mapping[str, int],
    header: bytes,
    trailer: bytes,
) -> None:
    """Write the staging rows through ``copy`` (psycopg's binary ``COPY ... FROM STDIN`` of
    ``tclose_row``, the ``aggregated`` columns in their order, then ``carried.columns``), in
    the order of ``new_rows``.

    Args:
        copy: the open ``COPY``.
        carried: the rows read, with their carried bytes.
        positions: for each row to write, its position among the rows read.
        new_rows: the new key of each row to write (a permutation of ``1..n``).
        aggregated: column → the value of each row to write.
        staging_oids: the type OID of every aggregated staging column.
        header, trailer: the binary ``COPY`` header and trailer.
    """
    order = np.argsort(new_rows, kind="stable")
    fields = 1 + len(aggregated) + len(carried.columns)
    layout: list[tuple[str, str]] = [("fields", ">i2"), ("size_row", ">i4"), ("row", ">i8")]
    for i, column in enumerate(aggregated):
        layout += [(f"size{i}", ">i4"), (f"value{i}", AGGREGATED_FORMATS[staging_oids[column]])]
    copy.write(header)
    for start in range(0, len(order), WRITE_ROWS):
        chosen = order[start : start + WRITE_ROWS]
        records = np.empty(len(chosen), dtype=layout)
        records["fields"] = fields
        records["size_row"] = 8
        records["row"] = new_rows[chosen]
        for i, values in enumerate(aggregated.values()):
            records[f"size{i}"] = records.dtype[f"value{i}"].itemsize
            records[f"value{i}"] = values[chosen]
        heads = records.view(np.uint8).reshape(len(chosen), records.dtype.itemsize)
        rows = assemble_rows(
            heads, carried.segments, carried.offsets, carried.lengths, positions[chosen]
        )
        copy.write(memoryview(rows))
    copy.write(trailer)
