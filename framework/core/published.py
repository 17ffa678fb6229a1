"""What the verifier checks about the published content beyond k and t: its digest and links.

The content digest of the published rows (its definitions: :mod:`tclose.base.digests`) is
computed while the verifier reads them (:func:`scan_published`). Beside the digest (not hashed
into it), a scan records ``types``, each column's declared type (:func:`column_types`): a type changed after the run can
keep every hashed value (PostgreSQL's binary ``COPY`` of ``integer`` 3 and ``date``
``2000-01-04`` are the same bytes; an ``INTEGER`` made ``BIGINT`` reads as the same Python
``int``), and ``tclose verify --report`` compares them when the report has them. It also records
``relation`` when the name stands for a view (or, on PostgreSQL, a materialized view, a foreign
table, a table with row-level security): what such a relation shows may depend on the session,
so it never verifies (:class:`tclose.core.criteria.ContentDigest`).

Linkage check (:class:`tclose.core.criteria.Linkage`). The published pass-through columns
(``role: other``) are taken together: a row whose tuple of their values no other row holds maps
one-to-one onto its source row (whoever knows those values of a person finds the person's row,
and its confidential values). The check counts such rows and fails when there is one, naming
the columns and the count. A column whose attribute says ``allow_unique: true`` is left out of
the tuple (the report lists such columns); a column of the published table that no run writes
is in it. NULL is a value, equal to NULL (a reader compares what is shown); a table of one row
counts none (its row count alone links it). Confidential columns are published unchanged by
design and are not in the tuple; quasi-identifiers are covered by the k-anonymity check. On
PostgreSQL the database counts the rows (``unique_rows``: ``GROUP BY`` the columns, each
compared by value, text byte for byte); elsewhere the rows read back are hashed in Python
(:func:`tuple_hashes`).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pandas as pd

from tclose.base.digests import (
    COPY_DIGEST_ALGORITHM,
    ORDERED_DIGEST_ALGORITHM,
    ContentDigest,
    canonical_rows,
)
from tclose.connector import InDatabaseChecks, PublishedRecord, ReadHold, capabilities_of
from tclose.interfaces import Check, LinkageFacts


def tuple_hashes(tuples: Sequence[tuple]) -> np.ndarray:
    """A 64-bit hash (``int64``) of each tuple's values as the linkage check compares them: the
    ``repr`` of their :func:`~tclose.base.digests.canonical` values, so that NULL (``None``) is a value equal to
    NULL, NaN equals NaN, and ``1``, ``1.0``, ``True``, ``'1'``, ``0.0`` and ``-0.0`` differ.
    Python's string hash (random per process, the same within one): two different tuples
    share a hash with a chance of about n²/2^65, which can only make rows look less
    unique."""
    texts = map(repr, canonical_rows(tuples))
    return np.fromiter(map(hash, texts), dtype=np.int64, count=len(tuples))


def unique_count(hashes: np.ndarray, rows: int) -> int:
    """How many of ``rows`` rows hold a hash no other row holds (0 below two rows: a table of
    one row links to its source by its row count alone, whatever it holds)."""
    if rows < 2 or not len(hashes):
        return 0
    _values, counts = np.unique(hashes, return_counts=True)
    return int((counts == 1).sum())


def linkable_rows(frame: pd.DataFrame) -> int:
    """How many rows of ``frame`` hold a tuple of values (all its columns) that no other row
    holds (:func:`tuple_hashes`); 0 without columns or below two rows."""
    if not len(frame.columns):
        return 0
    tuples = list(frame.astype(object).itertuples(index=False, name=None))
    return unique_count(tuple_hashes(tuples), len(frame))


class TupleTracker:
    """Streamed :func:`linkable_rows` of the columns at ``positions`` of rows read in chunks:
    keeps a 64-bit hash per row."""

    def __init__(self, positions: Sequence[int]) -> None:
        self.positions = list(positions)
        self.hashes: list[np.ndarray] = []
        self.rows = 0

    def update(self, rows: Sequence[tuple]) -> None:
        self.rows += len(rows)
        if self.positions and rows:
            picked = [tuple(row[i] for i in self.positions) for row in rows]
            self.hashes.append(tuple_hashes(picked))

    def linkable_rows(self) -> int:
        if not self.positions or not self.hashes:
            return 0
        return unique_count(np.concatenate(self.hashes), self.rows)


def checked_columns(attributes: Mapping[str, Any], present: Iterable[str]) -> tuple[list, list]:
    """The pass-through columns whose values the linkage check takes together, and those left
    out of it (``allow_unique: true``)."""
    present = set(present)
    others = [a for a in attributes.values() if a.role == "other" and a.name in present]
    return (
        [a.name for a in others if not a.allow_unique],
        [a.name for a in others if a.allow_unique],
    )


def undeclared_columns(config: Any, present: Iterable[str]) -> list[str]:
    """The columns of a published table that no run writes: neither ``tclose_row``, nor a
    quasi-identifier, confidential or pass-through attribute, nor the kept source key. The
    linkage check covers them as pass-through columns without ``allow_unique`` (a column added
    after the run, e.g. the source key put back, links rows however it is named). With
    ``output.keep_key`` and no ``source.key`` (an implied key, known only from the source)
    every undeclared column may be the key and is left out."""
    published = {"quasi_identifier", "confidential", "other"}
    declared = {name for name, a in config.attributes.items() if a.role in published}
    if config.keep_key:
        if not config.source.key:
            return []
        declared.add(config.source.key)
    return [c for c in present if c != "tclose_row" and c not in declared]


def frame_linkage(data: pd.DataFrame, attributes: Mapping[str, Any]) -> LinkageFacts:
    """The linkage of a published DataFrame (the API's release): the pass-through columns
    taken together, the rows unique on them, and the pass-through columns left out
    (``allow_unique``)."""
    checked, allowed = checked_columns(attributes, data.columns)
    return LinkageFacts(tuple(checked), linkable_rows(data[checked]), tuple(allowed))


def linkage_advice(
    checks: Iterable[Check],
    drop: str = "role: identifier",
    allow: str = "set allow_unique: true on those whose values may single a row out",
) -> str:
    """A sentence naming the linking columns of a failed ``linkage`` check, the rows they
    single out and the fixes (``drop`` and ``allow``, as the caller spells them); "" if the
    check passed or is absent."""
    failed = next((c for c in checks if c.name == "linkage" and not c.passed), None)
    if failed is None:
        return ""
    columns = ", ".join(failed.details["linking_columns"])
    rows = failed.details.get("linkable_rows")
    return (
        f" Linking columns (taken together, their values single out {rows} row(s), each "
        f"linked to one source row): {columns}. Drop some with {drop}, or {allow} (a column "
        f"left out of the check is published as it is)."
    )


@dataclass
class PublishedScan:
    """One streamed read of a published (or staging) table."""

    frame: pd.DataFrame
    digest: dict[str, Any]
    #: the pass-through columns the linkage check takes together
    linkage_columns: list[str]
    #: the rows unique on them
    linkable_rows: int
    allowed_unique: list[str] = field(default_factory=list)

    @property
    def linkage(self) -> LinkageFacts:
        """The linkage the ``linkage`` criterion judges."""
        return LinkageFacts(
            tuple(self.linkage_columns), self.linkable_rows, tuple(self.allowed_unique)
        )


def scan_published(
    database: Any,
    table: Any,
    config: Any,
    progress: Callable[..., None] | None = None,
    line: str = "",
    total: int | None = None,
    extra_columns: Sequence[str] = (),
    algorithm: str | None = None,
    published_as: Any = None,
) -> PublishedScan:
    """Read a written table once, streamed: digest all rows, find the linking pass-through
    columns, and keep the QI and confidential columns (and ``extra_columns``, e.g. a kept
    source key).

    ``algorithm`` is the content digest to compute (a report's, for ``tclose verify
    --report``); by default :data:`COPY_DIGEST_ALGORITHM` where the session can compute it (its
    database digests the table and compares the pass-through columns; only the QI and
    confidential columns are read), else the session's own streamed digest,
    :data:`ORDERED_DIGEST_ALGORITHM` unless it names another (every column is read and digested
    here). A digest the session cannot compute has ``sha256`` ``None``.
    ``published_as`` is the name ``table`` will be published under (a staging table's
    target), for the digest's recorded statement.

    ``database`` is a session (:class:`tclose.connectors.sql.Session`, e.g. the one that wrote
    a staging table) or a database (a read-only session is opened; if it has ``hold(table)``,
    that is called first, to lock the table against a concurrent publish before the session's
    snapshot begins: a snapshot older than a publish sees the new table empty, or not at all).
    """
    wanted = config.quasi_identifiers + config.confidential
    wanted += [c for c in extra_columns if c not in wanted]
    if hasattr(database, "read_rows"):
        return _scan_session(
            database, table, config, wanted, progress, line, total, algorithm, published_as
        )
    with database.session(read_only=True) as session:
        if capabilities_of(database).read_hold:  # a publish under way ends first, or waits
            cast(ReadHold, session).hold(table)
        return _scan_session(
            session, table, config, wanted, progress, line, total, algorithm, published_as
        )


def column_types(session: Any, written: Any) -> dict[str, str]:
    """Column name → its type as the database declares it: the session's own
    ``column_types(written)`` where it has one (the catalog's text, e.g. PostgreSQL's
    ``format_type``, the same whatever SQLAlchemy's version), else ``written``'s reflected
    types compiled for the session's dialect (``VARCHAR(40)``; a type the dialect cannot
    compile as SQLAlchemy's ``repr`` of it).

    Recorded beside the content digest (``types``): the digests hash values, and a type
    changed after the run may keep every value's bytes or Python value (PostgreSQL's binary
    ``COPY`` of ``integer`` 3 and of ``date`` ``2000-01-04`` are the same four bytes, of
    ``timestamp with time zone`` and ``timestamp`` the same eight; a ``BIGINT`` reads as the
    ``INTEGER`` it was) while what the table says changes."""
    if capabilities_of(session).published_record:
        found = cast(PublishedRecord, session).column_types(written)
        if found:
            return dict(sorted(found.items()))
    types = {}
    for column in written.columns:
        try:
            types[column.name] = str(column.type.compile())
        except Exception:  # noqa: BLE001 - any type SQLAlchemy cannot compile: its repr
            types[column.name] = repr(column.type)
    return dict(sorted(types.items()))


def _record_types(session: Any, written: Any, digest: dict[str, Any]) -> None:
    """``digest["types"]``, unless the session says its types are not the published ones
    (``records_types`` false: a file's, whose format maps the staging table's types)."""
    if capabilities_of(session).records_types:
        digest["types"] = column_types(session, written)


def _scan_session(session, table, config, wanted, progress, line, total, algorithm, published_as):
    """The in-database checks when the session has them and ``algorithm`` allows, else
    :func:`_scan`; either records the columns' types (:func:`column_types`) with the digest."""
    capabilities = capabilities_of(session)
    in_database = capabilities.in_database_checks
    own = capabilities.digest_algorithm
    if algorithm is None:
        algorithm = COPY_DIGEST_ALGORITHM if in_database else own
    if algorithm == COPY_DIGEST_ALGORITHM and in_database:
        scan = _scan_in_database(
            session, table, config, wanted, progress, line, total, published_as
        )
        return _with_relation(session, table, scan)
    scan = _scan(session, table, config, wanted, progress, line, total, own)
    if algorithm != own:  # a report's digest this database cannot compute
        scan.digest = {
            "algorithm": algorithm,
            "sha256": None,
            "unavailable": (
                f"{type(session).__qualname__} cannot compute the digest that the report's "
                f"target.content_digest.algorithm names"
            ),
        }
    return _with_relation(session, table, scan)


def _with_relation(session: Any, table: Any, scan: PublishedScan) -> PublishedScan:
    """``scan`` with ``relation`` in its digest when ``table``'s name stands for something else
    than a table (``"view"``: the session's ``relation_kind``); a view shows what its query
    selects, maybe other rows to other sessions, so it never matches a report's digest."""
    if capabilities_of(session).published_record and scan.digest:
        kind = cast(PublishedRecord, session).relation_kind(session.table(table))
        if kind is not None:
            scan.digest["relation"] = kind
    return scan


def _scan_in_database(
    session, table, config, wanted, progress, line, total, published_as
) -> PublishedScan:
    """Read only the QI and confidential columns; the database digests the table and compares
    the pass-through columns' values (:data:`COPY_DIGEST_ALGORITHM`, ``unique_rows``):
    ``read_with_digest`` reads the columns and digests the table (PostgreSQL: in one binary
    ``COPY`` when the columns are fixed-width numbers, else a read and ``content_digest``)."""
    frames, done = [], 0
    digest: dict[str, Any] = {}
    checks = cast(InDatabaseChecks, session)
    read = checks.read_with_digest(
        table, wanted, digest, chunk_size=config.source.chunk_size, published_as=published_as
    )
    for frame in read:
        frames.append(frame)
        done += len(frame)
        if progress is not None:
            progress(line, done=done, total=total)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=wanted)
    written = session.table(table)
    checked, allowed = checked_columns(config.attributes, written.c.keys())
    checked += undeclared_columns(config, written.c.keys())
    linkable = checks.unique_rows(written, checked) if len(frame) >= 2 and checked else 0
    if not digest:
        digest = checks.content_digest(written, published_as)
    digest["rows"] = len(frame)
    _record_types(session, written, digest)
    return PublishedScan(frame, digest, checked, linkable, allowed)


def _scan(
    session, table, config, wanted, progress, line, total, algorithm=ORDERED_DIGEST_ALGORITHM
) -> PublishedScan:
    written = session.table(table)
    columns = sorted(written.c.keys())
    digest = ContentDigest(columns, algorithm)
    checked, allowed = checked_columns(config.attributes, columns)
    checked += undeclared_columns(config, columns)
    position = {c: i for i, c in enumerate(columns)}
    tracker = TupleTracker([position[c] for c in checked])
    getter = operator.itemgetter(*[position[c] for c in wanted])
    pick = getter if len(wanted) > 1 else (lambda row: (getter(row),))
    frames, done = [], 0
    for rows in session.read_rows(
        table, columns, key="tclose_row", chunk_size=config.source.chunk_size, with_key=False
    ):
        if rows and type(rows[0]) is not tuple:  # psycopg gives tuples, others may not
            rows = [tuple(r) for r in rows]
        digest.update(rows)
        tracker.update(rows)
        frames.append(pd.DataFrame.from_records(list(map(pick, rows)), columns=wanted))
        done += len(rows)
        if progress is not None:
            progress(line, done=done, total=total)
    frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=wanted)
    summary = digest.as_dict()
    _record_types(session, written, summary)
    return PublishedScan(frame, summary, checked, tracker.linkable_rows(), allowed)
