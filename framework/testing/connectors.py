"""The conformance suite of connectors: :func:`check_connector` (exported by :mod:`tclose.testing`).

It drives a connector through the contract of :mod:`tclose.connector` exactly as a run does, on
tables it creates in the database at ``url`` and drops afterwards:

1. **members**: the connector, its database and its sessions have every required member;
2. **writing a table**: a fixture table of 23 rows with awkward values (64-bit integers near
   2**62, doubles such as 0.1 + 0.2 and 1/3, decimals with ``decimal_digits`` significant
   digits, timestamps with microseconds, dates, text with quotes, ``%``, backslashes and
   non-ASCII letters, NULLs, booleans, a column named ``Odd col %``) goes through
   ``staging_table`` → ``session(staging)`` → ``fill_streamed`` → ``publish``: every row once,
   ``tclose_row`` numbering them ``1..n``, and the same numbering when the rows arrive in
   reverse (the content order, not the order of arrival);
3. **reads**: streamed in chunks of at most ``chunk_size`` rows, ordered by the key, every value
   as written (same value; the representation may be the driver's: a date as text on SQLite),
   with and without the key, in a read-only session too; a missing table or column is a
   ``DataError``;
4. **a run**: a staging table with a aggregated column, filled in the database
   (``fill_joined``, when the database ``joins_in_snapshot``) or streamed, read back inside the
   session (verification), published: pass-through values and column types identical to the
   source's, aggregated doubles bit-exact, the staging table gone;
5. **refusals and failures leave nothing**: publishing over an existing target with
   ``replace=False`` fails and changes nothing; an exception while filling, or after filling
   and before publishing, leaves no staging table and the target unchanged;
6. **replace**: ``replace=True`` swaps the target's rows for the new ones.
"""

from __future__ import annotations

import datetime as dt
import math
import secrets
import uuid
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from typing import Any, cast

from tclose.connector import Connector as ConnectorProtocol
from tclose.connector import (
    Database,
    InDatabaseJoin,
    Session,
    SQLAlchemyEngine,
    capabilities_of,
    protocol_members,
    unkept_promises,
)
from tclose.errors import DataError

#: The fixture's columns (name, SQLAlchemy generic type name) in table order, after the key.
FIXTURE_COLUMNS = ("qi", "big", "dbl", "dec", "ts", "day", "txt", "Odd col %", "flag")
ROWS = 23


def _fixture_definition(decimal_digits: int) -> Any:
    import sqlalchemy as sa

    types: dict[str, sa.types.TypeEngine[Any]] = {
        "qi": sa.Double(),
        "big": sa.BigInteger(),
        "dbl": sa.Double(),
        "dec": sa.Numeric(decimal_digits, 6),
        "ts": sa.DateTime(),
        "day": sa.Date(),
        "txt": sa.Text(),
        "Odd col %": sa.String(40),
        "flag": sa.Boolean(),
    }
    columns = [sa.Column(c, types[c]) for c in FIXTURE_COLUMNS]
    return sa.Table("tclose_check_fixture", sa.MetaData(), *columns)


def fixture_rows(decimal_digits: int = 18) -> list[tuple]:
    """The fixture's rows (without the key), as Python values."""
    rows = []
    whole = "9" * (decimal_digits - 6)
    for i in range(ROWS):
        rows.append(
            (
                i / 3 + 0.1,
                2**62 + i,
                [0.1 + 0.2, 1 / 3, 1e300, -2.5e-300, 2.0**53 + 1][i % 5] * (i + 1),
                Decimal(f"{'-' if i % 2 else ''}{whole[: decimal_digits - 6 - i % 3]}.{i:06d}"),
                dt.datetime(2024, 2, 29, 13, 45, 7, 123456)
                + dt.timedelta(seconds=i, microseconds=i),
                dt.date(1999, 12, 31) + dt.timedelta(days=i),
                None if i % 5 == 4 else f"naïve 'q' \"d\" 100% \\ ü€ {i}",
                f"v{i}%",
                i % 2 == 0,
            )
        )
    return rows


def same_value(expected: Any, got: Any) -> bool:
    """Whether ``got`` (a driver's value) is ``expected``: equal, or the same value in the
    driver's representation (text for dates and decimals, 0/1 for booleans); floats bit-exact."""
    if expected is None or got is None:
        return expected is got
    if isinstance(expected, float):
        return isinstance(got, (float, Decimal)) and float(got) == expected
    if isinstance(expected, bool):
        return got in (0, 1) and bool(got) == expected
    if isinstance(expected, Decimal):
        try:
            return Decimal(str(got)) == expected
        except ArithmeticError:
            return False
    if isinstance(expected, dt.datetime) and isinstance(got, str):
        return dt.datetime.fromisoformat(got) == expected
    if isinstance(expected, dt.date) and isinstance(got, str):
        return dt.date.fromisoformat(got) == expected
    return type(got) is type(expected) and got == expected


class _Check:
    """One check_connector run: names, the database, and the problems found."""

    def __init__(self, connector: Any, url: str, password_file: str | None, schema: str | None):
        from tclose.naming import TableName

        self.problems: list[str] = []
        self.connector = connector
        self.database: Database = connector.connect(url, password_file)
        prefix = f"tclose_check_{secrets.token_hex(3)}"
        self.source = TableName(schema, f"{prefix}_src")
        self.target = TableName(schema, f"{prefix}_tgt")
        #: Whether the registry of releases was there before the check published anything.
        self.registry_existed = False

    def expect(self, condition: bool, problem: str) -> bool:
        if not condition:
            self.problems.append(problem)
        return condition

    def staging(self, source: Any, target: Any, aggregated: Sequence[str], dialect: str) -> Any:
        """A staging table for ``target`` with every column of ``source`` but its key."""
        from tclose.naming import ROW_COLUMN, STAGING_MARK

        run_id = uuid.uuid4().hex
        name = self.database.owned_name(target, STAGING_MARK, run_id)
        columns = [c.name for c in source.columns if c.name != ROW_COLUMN]
        table = self.database.staging_table(name, source, columns, aggregated, (), dialect)
        table.info.update(target=target, run_id=run_id)
        table.comment = f"tclose run {run_id}"  # the run's mark, as a run's plan gives it
        return table

    def name_of(self, table: Any) -> Any:
        from tclose.naming import TableName

        return TableName(table.schema, table.name)

    def left_nothing(self, staging: Any, when: str) -> None:
        self.expect(
            not self.database.exists(self.name_of(staging)),
            f"{when}: the staging table {staging.name} still exists",
        )


def _check_members(check: _Check) -> None:
    connector = check.connector
    check.expect(
        isinstance(connector, ConnectorProtocol), "the connector lacks name/dialects/connect"
    )
    for member in protocol_members(Database):
        check.expect(hasattr(check.database, member), f"the database has no {member!r}")
    with check.database.session(read_only=True) as session:
        for member in protocol_members(Session):
            check.expect(hasattr(session, member), f"the session has no {member!r}")
        capabilities = capabilities_of(check.database)
        for promise in unkept_promises(capabilities, check.database, session):
            check.problems.append(f"the capabilities declare {promise}, which is missing")


def _write_fixture(check: _Check, decimal_digits: int) -> list[tuple]:
    """Create the source table through the write path; return its rows (key first) as the
    connector numbered them, once it is checked that they are the fixture's, numbered ``1..n``,
    and numbered alike when the rows arrive in another order."""
    definition = _fixture_definition(decimal_digits)
    fixture = fixture_rows(decimal_digits)
    staging = check.staging(definition, check.source, (), "tclose-check")
    with check.database.session(staging) as session:
        written = session.fill_streamed(staging, [fixture[:10], fixture[10:]])
        check.expect(written == len(fixture), f"fill_streamed returned {written}, not {ROWS}")
        session.publish(check.name_of(staging), check.source, replace=False)
    check.expect(check.database.exists(check.source), "the published table does not exist")
    check.left_nothing(staging, "after publish")
    rows = _all_rows(check.database, check.source)
    _check_numbered(check, "the published fixture", fixture, rows)
    staging = check.staging(definition, check.source, (), "tclose-check")
    with check.database.session(staging) as session:
        session.fill_streamed(staging, [fixture[::-1][:7], fixture[::-1][7:]])
        chunks = session.read_rows(check.name_of(staging), list(FIXTURE_COLUMNS))
        again = [tuple(r) for chunk in chunks for r in chunk]
    check.expect(
        again == rows,
        "fill_streamed numbers the rows by the order they arrive in, not by their content "
        "(the same rows in reverse got other tclose_row values)",
    )
    check.left_nothing(staging, "after a session left without publish")
    return rows


def _check_numbered(
    check: _Check, what: str, expected: Sequence[tuple], got: Sequence[Sequence]
) -> None:
    """``got`` (key first, in key order) holds the rows of ``expected`` (without a key), each
    once, in some order, under the keys ``1..n``."""
    if not check.expect(len(got) == len(expected), f"{what}: {len(got)} rows, not {len(expected)}"):
        return
    check.expect(
        [row[0] for row in got] == list(range(1, len(got) + 1)),
        f"{what}: tclose_row is not 1..{len(got)} in key order",
    )
    unmatched = list(expected)
    for row in got:
        match = next((w for w in unmatched if all(map(same_value, w, row[1:]))), None)
        if match is None:
            check.problems.append(f"{what}: a row holds values no row written held: {row!r}")
            return
        unmatched.remove(match)


def _compare(check: _Check, what: str, expected: Sequence[tuple], got: Sequence[Sequence]) -> None:
    if not check.expect(len(got) == len(expected), f"{what}: {len(got)} rows, not {len(expected)}"):
        return
    for want, row in zip(expected, got, strict=True):
        for column, value, found in zip(("key", *FIXTURE_COLUMNS), want, row, strict=False):
            if not same_value(value, found):
                check.problems.append(f"{what}: column {column!r} holds {found!r}, not {value!r}")
                return


def _check_reads(check: _Check, rows: list[tuple]) -> None:
    database, columns = check.database, list(FIXTURE_COLUMNS)
    chunks = list(database.read(check.source, columns, chunk_size=7))
    check.expect(
        len(chunks) == math.ceil(ROWS / 7) and all(len(c) <= 7 for c in chunks),
        f"read(chunk_size=7) gave chunks of {[len(c) for c in chunks]} rows",
    )
    with database.session(read_only=True) as session:
        got = [r for chunk in session.read_rows(check.source, columns, chunk_size=5) for r in chunk]
        _compare(check, "read_rows", rows, got)
        plain = [
            r for chunk in session.read_rows(check.source, ["big"], with_key=False) for r in chunk
        ]
        check.expect(
            [tuple(r) for r in plain] == [(r[2],) for r in rows],
            "read_rows(with_key=False) does not give the column alone, in key order",
        )
        _expect_data_error(
            check, "a missing column", lambda: list(session.read(check.source, ["nope"]))
        )
    missing = check.source.with_suffix("_none")
    check.expect(not database.exists(missing), "exists() is true for a missing table")
    _expect_data_error(check, "a missing table", lambda: database.table(missing))


def _expect_data_error(check: _Check, what: str, action: Callable[[], Any]) -> None:
    try:
        action()
    except DataError:
        return
    except Exception as error:  # the wrong exception is a problem to report, not to raise
        check.problems.append(f"{what} raised {type(error).__name__}, not DataError: {error}")
        return
    check.problems.append(f"{what} raised no DataError")


def _run_rows(source_rows: list[tuple]) -> tuple[list[int], list[float]]:
    """Cluster labels and the aggregated ``qi`` of every source row."""
    labels = [i % 3 for i in range(len(source_rows))]
    return labels, [label / 3 + 0.1 for label in labels]


def _expected_target(source_rows: list[tuple]) -> list[tuple]:
    """The output rows (without ``tclose_row``) of a run over ``source_rows``."""
    _labels, qi = _run_rows(source_rows)
    return [(q, *row[2:]) for q, row in zip(qi, source_rows, strict=True)]


def _check_run(check: _Check, rows: list[tuple]) -> None:
    """A run into the target: fill (joined or streamed), verify inside the session, publish."""
    import numpy as np

    database = check.database
    source = database.table(check.source)
    staging = check.staging(source, check.target, ["qi"], database.dialect)
    with database.session(staging) as session:
        read = [tuple(r) for c in session.read_rows(check.source, list(FIXTURE_COLUMNS)) for r in c]
        labels, qi = _run_rows(read)
        if capabilities_of(database).joins_in_snapshot:
            cast(InDatabaseJoin, session).fill_joined(
                source,
                None,
                staging,
                np.array([r[0] for r in read]),
                np.array(labels, dtype=np.int64),
                {"qi": np.array(qi)},
            )
        else:
            out = _expected_target(read)
            session.fill_streamed(staging, [out[:7], out[7:]])
        columns = list(FIXTURE_COLUMNS)
        back = [tuple(r) for c in session.read_rows(check.name_of(staging), columns) for r in c]
        _check_numbered(
            check, "the staging table read back in its session", _expected_target(rows), back
        )
        session.publish(check.name_of(staging), check.target, replace=False)
    check.left_nothing(staging, "after publish")
    target = database.table(check.target)
    for column in FIXTURE_COLUMNS[1:]:
        check.expect(
            repr(target.c[column].type) == repr(source.c[column].type),
            f"column {column!r} has type {target.c[column].type!r} in the published table, "
            f"{source.c[column].type!r} in the source",
        )
    _check_numbered(
        check, "the published table", _expected_target(rows), _all_rows(database, check.target)
    )


def _all_rows(database: Database, name: Any) -> list[tuple]:
    """Every row of ``name`` (key first), in a read-only session of its own."""
    with database.session(read_only=True) as session:
        chunks = session.read_rows(name, list(FIXTURE_COLUMNS))
        return [tuple(r) for chunk in chunks for r in chunk]


def _check_failures(check: _Check, rows: list[tuple]) -> None:
    """Refused and failed publishes leave the target as it was and no staging table."""
    database = check.database
    before = _all_rows(database, check.target)
    source = database.table(check.source)
    out = [tuple(r[1:]) for r in before]

    def broken_chunks() -> Iterator[list[tuple]]:
        yield out[:5]
        raise RuntimeError("tclose check: failure while filling")

    for when in ("publish refused", "failure while filling", "failure before publish"):
        staging = check.staging(source, check.target, ["qi"], database.dialect)
        try:
            with database.session(staging) as session:
                if when == "failure while filling":
                    session.fill_streamed(staging, broken_chunks())
                session.fill_streamed(staging, [out])
                if when == "failure before publish":
                    raise RuntimeError("tclose check: failure before publish")
                session.publish(check.name_of(staging), check.target, replace=False)
            check.problems.append(f"{when}: no error was raised")
        except DataError:
            check.expect(when == "publish refused", f"{when}: DataError instead of the failure")
        except RuntimeError:
            check.expect(when != "publish refused", f"{when}: RuntimeError instead of DataError")
        check.left_nothing(staging, when)
        check.expect(_all_rows(database, check.target) == before, f"{when}: the target changed")


def _check_replace(check: _Check) -> None:
    database = check.database
    before = _all_rows(database, check.target)
    staging = check.staging(database.table(check.target), check.target, ["qi"], database.dialect)
    newer = [(-qi, *rest) for _key, qi, *rest in before][:-1]
    with database.session(staging) as session:
        session.fill_streamed(staging, [newer])
        session.publish(check.name_of(staging), check.target, replace=True)
    check.left_nothing(staging, "after publish with replace")
    _check_numbered(check, "after replace=True", newer, _all_rows(database, check.target))


def _drop(check: _Check, drop: Callable[[Any], None] | None) -> None:
    """Drop the check's tables: with ``drop``, else through the database's SQLAlchemy engine;
    and their records in the registry of releases, which goes too if the check made it."""
    engine = _engine(check.database)
    for name in (check.source, check.target):
        if not check.database.exists(name):
            continue
        if drop is not None:
            drop(name)
        elif engine is not None:
            import sqlalchemy as sa

            sa.Table(name.name, sa.MetaData(), schema=name.schema).drop(engine)
        else:
            check.problems.append(f"cannot drop {name}: pass drop= to check_connector")
    if engine is not None:
        _forget_releases(check, engine)


def _engine(database: Database) -> Any:
    """The SQLAlchemy engine of ``database`` (:class:`tclose.connector.SQLAlchemyEngine`), or
    ``None``."""
    if not capabilities_of(database).sqlalchemy_engine:
        return None
    return cast(SQLAlchemyEngine, database).engine


def _registry_exists(engine: Any, schema: str | None) -> bool:
    """Whether the registry of releases (:data:`tclose.naming.RELEASES_TABLE`) is in ``schema``."""
    import sqlalchemy as sa

    from tclose.naming import RELEASES_TABLE

    with engine.connect() as connection:
        return bool(sa.inspect(connection).has_table(RELEASES_TABLE, schema=schema))


def _forget_releases(check: _Check, engine: Any) -> None:
    """Delete the check's rows from the registry of releases; drop the registry if the check
    made it and it is empty."""
    import sqlalchemy as sa

    from tclose.naming import RELEASES_TABLE

    schema = check.source.schema
    if not _registry_exists(engine, schema):
        return
    registry = sa.Table(RELEASES_TABLE, sa.MetaData(), sa.Column("name"), schema=schema)
    names = [check.source.name, check.target.name]
    with engine.begin() as connection:
        connection.execute(registry.delete().where(registry.c.name.in_(names)))
        empty = connection.execute(sa.select(sa.func.count()).select_from(registry)).scalar() == 0
    if empty and not check.registry_existed:
        registry.drop(engine)


def run_check(
    connector: Any,
    url: str,
    password_file: str | None = None,
    *,
    schema: str | None = None,
    decimal_digits: int = 18,
    drop: Callable[[Any], None] | None = None,
) -> list[str]:
    """Run every check (see the module docstring); return the problems found."""
    check = _Check(connector, url, password_file, schema)
    engine = _engine(check.database)
    check.registry_existed = engine is not None and _registry_exists(engine, schema)
    try:
        _check_members(check)
        rows = _write_fixture(check, decimal_digits)
        _check_reads(check, rows)
        _check_run(check, rows)
        if check.database.exists(check.target):
            _check_failures(check, rows)
            _check_replace(check)
    except Exception as error:  # a crash is the problem to report, after the cleanup
        check.problems.append(f"stopped by {type(error).__name__}: {error}")
    finally:
        _drop(check, drop)
    return check.problems
