"""Adversarial: the three MariaDB/MySQL drivers on values they convert differently.

MariaDB Connector/Python reads in the binary protocol, mysqlclient and PyMySQL in the text
protocol, and each converts values in its own way. Whatever driver a run or an auditor uses, the
values read (and so the published table and its content digest) must be the same, a table
changed after publication must fail ``tclose verify --report`` through every driver, and what a
driver cannot read must be a clear error, never an internal one (exit 4) or a silent change.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import importlib.util
import io

import numpy as np
import pytest
import sqlalchemy as sa

from tclose.app.cli import main
from tclose.connectors import mysql as connector
from tclose.errors import DataError
from tclose.naming import TableName
from tests.conftest import require_driver

DRIVERS = list(connector.DRIVERS)


_need = require_driver


def _url(maria, driver: str | None) -> str:
    """The test server's URL with ``driver`` (``None``: a bare ``mysql://``), which the test
    then needs."""
    if driver is not None:
        require_driver(driver)
    name = "mysql" if driver is None else f"mysql+{driver}"
    return sa.make_url(maria.url).set(drivername=name).render_as_string(hide_password=False)


def _only(monkeypatch, driver: str) -> None:
    """As if ``driver`` were the only one installed (a bare URL then chooses it)."""
    hidden = {connector.DRIVERS[d][0] for d in DRIVERS if d != driver}
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name, *a)
    )


def _cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["-q", *args])
    return code, out.getvalue() + err.getvalue()


def _read(maria, driver: str, table: str, columns: list[str], key: str = "id") -> list[tuple]:
    """Every row of ``columns`` as the connector's session reads them through ``driver``."""
    database = connector.MySQLDatabase(_url(maria, driver))
    try:
        with database.session(read_only=True) as session:
            chunks = session.read_rows(TableName(None, table), columns, key=key, with_key=False)
            return [tuple(row) for chunk in chunks for row in chunk]
    finally:
        database.engine.dispose()


#: Single-precision values the text protocol shows with 6 significant digits: 16777217 is
#: stored as 16777216 and shown as 16777200; the two 1.234567x are distinct floats, shown alike.
FLOATS = [16777217.0, 1.2345678, 1.2345679, 0.1, -3.4e38, 3.14159265]


@pytest.mark.mysql
def test_float_columns_read_exactly_and_alike_through_every_driver(maria):
    for driver in DRIVERS:
        _need(driver)
    name = maria.name("floats")
    maria.create(
        name,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("f", sa.Float(24)),
        ],
        [{"id": i, "f": v} for i, v in enumerate(FLOATS)] + [{"id": len(FLOATS), "f": None}],
    )
    assert maria.column_types(name)["f"] == "FLOAT"
    exact = [float(np.float32(v)) for v in FLOATS] + [None]
    for driver in DRIVERS:
        assert [r[0] for r in _read(maria, driver, name, ["f"])] == exact, driver


def _publish(
    maria, monkeypatch, driver: str, source: str, target: str, attributes: dict | None = None
) -> tuple[str, str]:
    """``tclose run`` of ``source`` into ``target`` with a bare ``mysql://`` URL while only
    ``driver`` is installed (``attributes``: of the added columns, by default ``extra``, passed
    through); the configuration's and the report's paths."""
    document = maria.config(source, target)
    document["source"]["url"] = _url(maria, None)
    document["attributes"].update(attributes or {"extra": {"role": "other"}})
    report = maria.tmp_path / f"{target}.json"
    document["report"] = {"json": str(report)}
    config = str(maria.write_config(document, f"{target}.yaml"))
    with monkeypatch.context() as patch:
        _only(patch, driver)
        code, out = _cli("run", config)
    assert code == 0, out
    return config, str(report)


def _verify(monkeypatch, driver: str, config: str, report: str) -> tuple[int, str]:
    with monkeypatch.context() as patch:
        _only(patch, driver)
        return _cli("verify", config, "--report", report)


def _patients_with(maria, column: str, sql_type: str, value: str, n: int = 40) -> str:
    """An ``n``-row :meth:`create_patients` table with ``column`` of ``sql_type`` added and set
    to the SQL expression ``value`` (of ``patient_id``) in every row; its name."""
    source = maria.name("patients")
    maria.create_patients(source, n=n)
    maria.execute(f"ALTER TABLE {maria.quote(source)} ADD COLUMN {column} {sql_type}")
    maria.execute(f"UPDATE {maria.quote(source)} SET {column} = {value}")
    return source


def _verify_through_every_driver(monkeypatch, config, report, passes: bool) -> None:
    """``tclose verify --report`` through each driver in turn: exit 0 with the content digest
    passing (``passes``), else exit 1 with it failing."""
    expected, said = (0, "PASS  content_digest") if passes else (1, "FAIL  content_digest")
    for auditor in DRIVERS:
        code, out = _verify(monkeypatch, auditor, config, report)
        assert code == expected and said in out, (auditor, out)


@pytest.mark.mysql
@pytest.mark.parametrize("publisher", DRIVERS)
def test_a_float_column_verifies_through_every_driver_and_a_change_fails_through_each(
    maria, monkeypatch, publisher
):
    """A report made through one driver verifies through the others (same configuration: a bare
    URL, another driver installed), and a FLOAT value changed to another that the text protocol
    shows alike (1.2345678 to 1.2345679) fails the content digest through every driver."""
    for driver in DRIVERS:
        _need(driver)
    value = "ELT(patient_id % 3 + 1, 1.2345678, 16777217, NULL)"
    source, target = _patients_with(maria, "extra", "FLOAT", value, n=60), maria.name("anon")
    config, report = _publish(maria, monkeypatch, publisher, source, target)
    _verify_through_every_driver(monkeypatch, config, report, passes=True)

    maria.execute(
        f"UPDATE {maria.quote(target)} SET extra = 1.2345679 WHERE extra < 2 "
        "ORDER BY tclose_row LIMIT 1"
    )
    _verify_through_every_driver(monkeypatch, config, report, passes=False)


@pytest.mark.mysql
@pytest.mark.parametrize("target_kind", ["pg", "lite"])
def test_a_float_streamed_into_another_database_keeps_its_value(
    maria, request, monkeypatch, target_kind
):
    """A ``FLOAT`` pass-through and confidential column streamed into another database
    through each driver arrives as the value MariaDB stores (16777217 is stored as 16777216),
    not as the text protocol's 6 significant digits (16777200)."""
    other = request.getfixturevalue(target_kind)
    other.execute("SELECT 1")  # a SQLite file must exist: tclose never creates one
    source = maria.name("patients")
    maria.create_patients(source, n=60)
    maria.execute(f"ALTER TABLE {maria.quote(source)} ADD COLUMN extra FLOAT, MODIFY charge FLOAT")
    maria.execute(
        f"UPDATE {maria.quote(source)} SET extra = ELT(patient_id % 3 + 1, 1.2345678, "
        "16777217, 0.1), charge = 16777217 + patient_id % 5"
    )
    stored = {float(np.float32(v)) for v in (1.2345678, 16777217, 0.1)}
    charges = sorted(float(np.float32(16777217 + i % 5)) for i in range(60))
    for driver in DRIVERS:
        _need(driver)
        target = other.name(f"anon_{driver[:5]}")
        document = maria.config(source, target)
        document["source"]["url"] = _url(maria, driver)
        document["target"] = {"url": other.url, "table": target}
        document["attributes"]["extra"] = {"role": "other"}
        code, out = _cli("run", str(maria.write_config(document, f"{driver}.yaml")))
        assert code == 0, out
        assert {r[0] for r in other.rows(target, "extra")} == stored, driver
        assert sorted(r[0] for r in other.rows(target, "charge")) == charges, driver


def _with_zero_dates(maria, n: int = 60) -> str:
    """A :meth:`create_patients` table with ``zd`` (``DATETIME(6)``) and ``zdate`` (``DATE``):
    zero and invalid dates, as a permissive ``sql_mode`` lets them in, valid dates and NULLs."""
    source = maria.name("patients")
    maria.create_patients(source, n=n)
    table = maria.quote(source)
    with maria.engine.begin() as connection:
        connection.exec_driver_sql("SET SESSION sql_mode = ''")
        connection.exec_driver_sql(
            f"ALTER TABLE {table} ADD COLUMN zd DATETIME(6) NULL, ADD COLUMN zdate DATE NULL"
        )
        connection.exec_driver_sql(
            f"UPDATE {table} SET zd = ELT(patient_id %% 4 + 1, '0000-00-00 00:00:00', "
            "'2024-00-15 10:00:00', NULL, '2024-01-01 00:00:00.25'), "
            "zdate = ELT(patient_id %% 4 + 1, '0000-00-00', NULL, '2024-02-00', '2024-01-01')"
        )
    return source


@pytest.mark.mysql
@pytest.mark.parametrize("publisher", DRIVERS)
def test_zero_dates_publish_and_verify_through_every_driver(maria, monkeypatch, publisher):
    """Zero and invalid dates in pass-through columns: MariaDB Connector/Python failed on them
    (exit 4), mysqlclient read them as NULL (so a zero date set to NULL after publication
    passed). Through every driver the run publishes, every driver verifies, and that change
    fails."""
    for driver in DRIVERS:
        _need(driver)
    source, target = _with_zero_dates(maria), maria.name("anon")
    document_extra = {"zd": {"role": "other"}, "zdate": {"role": "other"}}
    config, report = _publish(maria, monkeypatch, publisher, source, target, document_extra)
    _verify_through_every_driver(monkeypatch, config, report, passes=True)
    with maria.engine.begin() as connection:
        connection.exec_driver_sql("SET SESSION sql_mode = ''")
        connection.exec_driver_sql(
            f"UPDATE {maria.quote(target)} SET zdate = NULL WHERE zdate = '0000-00-00' "
            "ORDER BY tclose_row LIMIT 1"
        )
    _verify_through_every_driver(monkeypatch, config, report, passes=False)


@pytest.mark.mysql
@pytest.mark.parametrize("target_kind", ["pg", "lite"])
def test_zero_dates_into_another_database_are_refused_by_column(maria, request, target_kind):
    """No other database stores a zero date: the run stops (exit 3) naming the columns and
    how many rows hold one, through every driver (mysqlclient published them as NULL)."""
    other = request.getfixturevalue(target_kind)
    other.execute("SELECT 1")  # a SQLite file must exist: tclose never creates one
    source = _with_zero_dates(maria, n=40)
    for driver in DRIVERS:
        _need(driver)
        target = other.name(f"anon_{driver[:5]}")
        document = maria.config(source, target)
        document["source"]["url"] = _url(maria, driver)
        document["target"] = {"url": other.url, "table": target}
        document["attributes"].update(zd={"role": "other"}, zdate={"role": "other"})
        code, out = _cli("run", str(maria.write_config(document, f"{driver}.yaml")))
        assert code == 3, (driver, out)
        assert "Columns 'zd' (20 rows), 'zdate' (20 rows) hold zero or invalid dates" in out, (
            driver,
            out,
        )
        assert "Nothing was published" in out and "0000" not in out, (driver, out)
        assert target not in {t.split(".")[-1] for t in other.tables()}


def test_the_notice_names_the_installed_version_of_each_driver():
    """PyMySQL's ``__version__`` is the MySQLdb version it imitates (2.2.x), mysqlclient has
    none: the notice names the version pip installed."""
    for driver, distribution in {
        "pymysql": "PyMySQL",
        "mysqldb": "mysqlclient",
        "mariadbconnector": "mariadb",
    }.items():
        _need(driver)
        line = connector.driver_description(sa.make_url(f"mysql+{driver}://u@h/db"))
        name = connector.DRIVERS[driver][1]
        version = importlib.metadata.version(distribution)
        assert line.startswith(f"mysql driver: {name} {version}"), line
        assert line.count(" ?") == 0, line


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_named_driver_that_is_not_installed_says_how_to_install_it(monkeypatch, driver):
    module, distribution = connector.DRIVERS[driver]
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == module else real(name, *a)
    )
    extra = {"mariadbconnector": "mariadb", "mysqldb": "mysqlclient", "pymysql": "mysql"}[driver]
    with pytest.raises(DataError) as caught:
        connector.MySQLDatabase(f"mysql+{driver}://root@127.0.0.1:3306/test")
    message = str(caught.value)
    assert f"+{driver}" in message and distribution in message, message
    assert f"pip install 'tclose[{extra}]'" in message and "mysql://" in message, message


@pytest.mark.mysql
@pytest.mark.parametrize("driver", DRIVERS)
def test_an_unknown_charset_is_a_clear_error_through_every_driver(maria, driver):
    _need(driver)
    url = _url(maria, driver) + "?charset=klingon"
    with pytest.raises(DataError, match="charset=klingon") as caught:
        database = connector.MySQLDatabase(url)
        try:
            database.table(TableName(None, "tclose_owned"))
        finally:
            database.engine.dispose()
    assert "Traceback" not in str(caught.value)


@pytest.mark.mysql
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_password_with_url_characters_and_accents_connects_through_every_driver(
    maria, maria_login, driver, tmp_path
):
    """``@ : / % # ? & +``, a space and an accent, percent-encoded in the URL or in
    ``password_file``: every driver logs in (PyMySQL sent a non-ASCII password as Latin-1,
    which the server refused as "Access denied", while the C drivers send UTF-8)."""
    from urllib.parse import quote

    _need(driver)
    user, password = maria_login
    password = f"{password}@:/%#?&+ é"
    maria.execute(f"SET PASSWORD FOR '{user}'@'%' = PASSWORD(:p)", {"p": password})
    bare = sa.make_url(maria.url).set(drivername=f"mysql+{driver}", username=user)
    in_url = bare.render_as_string(hide_password=False).replace(
        f"{user}@", f"{user}:{quote(password, safe='')}@", 1
    )
    password_file = tmp_path / "password"
    password_file.write_text(password, encoding="utf-8")
    for database in (
        connector.MySQLDatabase(in_url),
        connector.MySQLDatabase(bare.render_as_string(), str(password_file)),
    ):
        try:
            assert database.exists(TableName(None, maria.name("nothing"))) is False
        finally:
            database.engine.dispose()


def _with_unsigned(maria, n: int = 40) -> tuple[str, dict[str, set[int]]]:
    """A :meth:`create_patients` table with unsigned integer columns at the top of their range
    (beyond the signed type of the same width), and the values of each."""
    source = maria.name("patients")
    maria.create_patients(source, n=n)
    tops = {"tu": ("TINYINT", 255), "su": ("SMALLINT", 65535), "mu": ("MEDIUMINT", 16777215)}
    tops.update(iu=("INT", 4294967295), bu=("BIGINT", 18446744073709551615))
    table = maria.quote(source)
    maria.execute(
        f"ALTER TABLE {table} "
        + ", ".join(f"ADD COLUMN {c} {t} UNSIGNED" for c, (t, _top) in tops.items())
    )
    maria.execute(
        f"UPDATE {table} SET "
        + ", ".join(f"{c} = {top} - patient_id % 3" for c, (_t, top) in tops.items())
    )
    return source, {c: {top - i for i in range(3)} for c, (_t, top) in tops.items()}


def _run_into(maria, source: str, other, driver: str, columns) -> tuple[int, str, str]:
    target = other.name(f"anon_{driver[:5]}")
    document = maria.config(source, target)
    document["source"]["url"] = _url(maria, driver)
    document["target"] = {"url": other.url, "table": target}
    document["attributes"].update({c: {"role": "other"} for c in columns})
    code, out = _cli("run", str(maria.write_config(document, f"{driver}.yaml")))
    return code, out, target


@pytest.mark.mysql
@pytest.mark.parametrize("target_kind", ["pg", "duckdb_db"])
def test_unsigned_integers_into_another_database_keep_their_values(maria, request, target_kind):
    """An unsigned column becomes a signed type wide enough for its range (``INT UNSIGNED``
    ``BIGINT``, ``BIGINT UNSIGNED`` ``NUMERIC(20, 0)``): the largest values arrive on PostgreSQL and
    DuckDB."""
    other = request.getfixturevalue(target_kind)
    source, values = _with_unsigned(maria)
    for driver in DRIVERS:
        _need(driver)
        code, out, target = _run_into(maria, source, other, driver, values)
        assert code == 0, (driver, out)
        for column, expected in values.items():
            assert {int(r[0]) for r in other.rows(target, column)} == expected, (driver, column)


@pytest.mark.mysql
def test_an_unsigned_bigint_into_sqlite_keeps_every_value_as_text(maria, lite):
    """SQLite integers are signed 64-bit and its NUMERIC affinity keeps 15 digits: a ``BIGINT
    UNSIGNED`` (``NUMERIC(20, 0)``) becomes ``TEXT``, each value exact, 2^63 and above included."""
    lite.execute("SELECT 1")  # a SQLite file must exist: tclose never creates one
    source, values = _with_unsigned(maria)
    # Small values too, so that a batch fails after some rows were inserted.
    maria.execute(f"UPDATE {maria.quote(source)} SET bu = patient_id WHERE patient_id % 2 = 0")
    values["bu"] = values["bu"] | set(range(2, 41, 2))
    for driver in DRIVERS:
        _need(driver)
        code, out, target = _run_into(maria, source, lite, driver, values)
        assert code == 0, (driver, out)
        for column, expected in values.items():
            got = {int(r[0]) for r in lite.rows(target, column)}
            assert got == expected, (driver, column, got ^ expected)
        assert {r[0] for r in lite.rows(target, "typeof(bu)")} == {"text"}


def test_an_integer_beyond_64_bits_into_a_sqlite_number_column_is_refused_by_column(lite):
    """Where the column is not text, SQLite cannot hold such an integer: a clear error naming
    the column and how many rows, not an internal error. In a text column it is its text, and
    the rows of the batch inserted before it are not inserted twice."""
    from tclose.connectors.sqlite import SQLiteDatabase

    name = lite.name("wide")
    lite.execute(f"CREATE TABLE {lite.quote(name)} (k INTEGER PRIMARY KEY, n INTEGER, t TEXT)")
    database = SQLiteDatabase(lite.url)
    try:
        with database.session() as session:
            table = session.table(TableName(None, name))
            session.insert_rows(table, ["k", "t"], [(1, 1), (2, 2**64), (3, -(2**63) - 1)])
            assert session.execute(f"SELECT k, t FROM {lite.quote(name)} ORDER BY k") == [
                (1, "1"),
                (2, str(2**64)),
                (3, str(-(2**63) - 1)),
            ]
            with pytest.raises(
                DataError,
                match=r"Column 'n' holds integers beyond SQLite's "
                r"signed 64-bit range \(2 of the 3 rows",
            ):
                session.insert_rows(table, ["k", "n"], [(4, 2**63), (5, 1), (6, -(2**63) - 1)])
    finally:
        database.engine.dispose()


@pytest.mark.mysql
def test_a_value_duckdb_refuses_is_named_not_hidden_behind_an_aborted_transaction(maria, duckdb_db):
    """A ``TIME`` of more than 24 hours has no DuckDB ``TIME``: the run stops (exit 3) naming the
    column, before DuckDB sees the value (``tclose.connectors.mysql.streams.times_of_day``), so no "Current
    transaction is aborted" hides the reason."""
    source = _patients_with(maria, "tm", "TIME", "ELT(patient_id % 2 + 1, '100:00:00', '-1:00:00')")
    code, out, target = _run_into(maria, source, duckdb_db, "pymysql", ["tm"])
    assert code == 3 and "Nothing was published" in out, out
    assert "transaction is aborted" not in out, out
    assert "Column 'tm' (40 rows) holds TIME values outside 00:00:00" in out, out


@pytest.mark.mysql
def test_a_set_column_into_postgresql_keeps_every_combination(maria, pg):
    """A ``SET`` value may hold several members (``x,y,zz``): its text type must be long
    enough for all of them, not for the longest member (``VARCHAR(2)`` refused ``x,y,zz``)."""
    source = _patients_with(
        maria, "st", "SET('x', 'y', 'zz')", "ELT(patient_id % 3 + 1, 'x,y,zz', '', 'zz')"
    )
    code, out, target = _run_into(maria, source, pg, "pymysql", ["st"])
    assert code == 0, out
    assert {r[0] for r in pg.rows(target, "st")} == {"x,y,zz", "", "zz"}


@pytest.mark.mysql
def test_a_wide_decimal_into_sqlite_keeps_every_digit(maria, lite):
    """SQLite's ``NUMERIC`` affinity turns a decimal's text into a 64-bit float or integer: a
    ``DECIMAL(30, 10)`` lost its last digits (two distinct values became one). A decimal of
    more than 15 digits is stored as its text; a narrower one stays a number."""
    from decimal import Decimal

    lite.execute("SELECT 1")  # a SQLite file must exist: tclose never creates one
    source = maria.name("patients")
    maria.create_patients(source, n=40)
    table = maria.quote(source)
    maria.execute(f"ALTER TABLE {table} ADD COLUMN wide DECIMAL(30, 10), ADD narrow DECIMAL(12, 2)")
    wide = ["1234567890123456789.0123456710", "1234567890123456789.0123456711", "-0.0000000001"]
    maria.execute(
        f"UPDATE {table} SET wide = ELT(patient_id % 3 + 1, {', '.join(wide)}), "
        "narrow = ELT(patient_id % 2 + 1, 1234.5, -0.01)"
    )
    code, out, target = _run_into(maria, source, lite, "pymysql", ["wide", "narrow"])
    assert code == 0, out
    assert {Decimal(str(r[0])) for r in lite.rows(target, "wide")} == {Decimal(w) for w in wide}
    assert {r[0] for r in lite.rows(target, "typeof(narrow)")} == {"real"}
    assert {r[0] for r in lite.rows(target, "narrow")} == {1234.5, -0.01}


@pytest.mark.mysql
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_bit_column_is_read_as_its_number(maria, driver):
    """Every driver returns a ``BIT(8)`` value as bytes (``b'0'`` for 48), which a numeric
    quasi-identifier read as the digit it spells (0) or refused as non-numeric: it is read as
    its integer, so the published means lie among the stored values."""
    _need(driver)
    source, target = maria.name("patients"), maria.name("anon")
    maria.create_patients(source, n=60)
    maria.execute(f"ALTER TABLE {maria.quote(source)} ADD COLUMN flags BIT(8)")
    maria.execute(f"UPDATE {maria.quote(source)} SET flags = 48 + patient_id % 10")
    document = maria.config(source, target)
    document["source"]["url"] = _url(maria, driver)
    document["attributes"]["flags"] = {"role": "quasi_identifier", "type": "numeric"}
    code, out = _cli("run", str(maria.write_config(document)))
    assert code == 0, out
    published = {r[0] for r in maria.rows(target, "flags")}
    assert all(48 <= v <= 57 for v in published), published


@pytest.mark.mysql
def test_an_auditor_may_name_another_driver_in_the_url(maria, monkeypatch):
    """The configuration digest ties the report to its k and t, not to a driver: the same
    configuration with ``+mysqldb`` where the run named ``+pymysql`` (or no driver), or with
    ``mariadb://`` for ``mysql://``, verifies; another k still does not."""
    for driver in DRIVERS:
        _need(driver)
    source, target = maria.name("patients"), maria.name("anon")
    maria.create_patients(source, n=60)
    document = maria.config(source, target)
    document["source"]["url"] = _url(maria, "pymysql")
    report = maria.tmp_path / "report.json"
    document["report"] = {"json": str(report)}
    code, out = _cli("run", str(maria.write_config(document)))
    assert code == 0, out
    for driver in [*DRIVERS, None]:
        for dialect in ("mysql", "mariadb"):
            url = _url(maria, driver)
            document["source"]["url"] = dialect + url.removeprefix("mysql")
            config = str(maria.write_config(document, "auditor.yaml"))
            code, out = _cli("verify", config, "--report", str(report))
            assert code == 0 and "PASS  config_sha256" in out, (driver, dialect, out)
    document["privacy"]["k"] = 2
    code, out = _cli(
        "verify", str(maria.write_config(document, "other.yaml")), "--report", str(report)
    )
    assert code == 1 and "FAIL  config_sha256" in out, out


@pytest.mark.mysql
@pytest.mark.parametrize("driver", DRIVERS)
def test_a_charset_that_loses_characters_is_refused_and_utf8_reads_them_all(maria, driver):
    """Through ``charset=latin1`` (or ``ascii``) the server replaces each character the charset
    lacks by ``?``: two distinct values read alike (a linking column looks repeated, a change
    goes unseen by the digest, a value is published changed). Such a charset is refused by
    name; ``utf8`` reads every character, 4-byte ones included."""
    _need(driver)
    name = maria.name("texts")
    values = ["héllo 😀", "héllo 😎", "𝔘"]
    maria.create(
        name,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column("t", sa.String(20)),
        ],
        [{"id": i, "t": v} for i, v in enumerate(values)],
    )
    for charset in ("latin1", "ascii"):
        with pytest.raises(DataError, match=f"charset={charset}.*utf8mb4"):
            connector.MySQLDatabase(_url(maria, driver) + f"?charset={charset}")
    url = _url(maria, driver) + "?charset=utf8"
    database = connector.MySQLDatabase(url)
    try:
        with database.session(read_only=True) as session:
            chunks = session.read_rows(TableName(None, name), ["t"], key="id", with_key=False)
            assert [r[0] for chunk in chunks for r in chunk] == values
    finally:
        database.engine.dispose()


@pytest.mark.mysql
@pytest.mark.parametrize("driver", DRIVERS)
def test_the_streamed_path_keeps_floats_and_zero_dates(maria, monkeypatch, driver):
    """On a server without snapshot isolation (MySQL, older MariaDB) the runner streams the
    source back into the same database: a ``FLOAT`` and a zero date must arrive as stored
    (the text protocol wrote 16777217 back as 16777200, mysqlclient wrote zero dates as NULL,
    MariaDB Connector/Python failed on them)."""
    _need(driver)
    monkeypatch.setattr(connector.MySQLDatabase, "joins_in_snapshot", property(lambda self: False))
    source, target = _with_zero_dates(maria), maria.name("anon")
    maria.execute(f"ALTER TABLE {maria.quote(source)} ADD COLUMN extra FLOAT")
    maria.execute(f"UPDATE {maria.quote(source)} SET extra = 16777217 + patient_id % 3")
    document = maria.config(source, target)
    document["source"]["url"] = _url(maria, driver)
    document["attributes"].update(
        extra={"role": "other"}, zd={"role": "other"}, zdate={"role": "other"}
    )
    code, out = _cli("run", str(maria.write_config(document)))
    assert code == 0, out
    columns = "CAST(extra AS DOUBLE), CAST(zd AS CHAR), CAST(zdate AS CHAR)"
    assert sorted(maria.rows(target, columns), key=repr) == sorted(
        maria.rows(source, columns), key=repr
    )


@pytest.mark.mysql
def test_mysql_and_mariadb_urls_are_one_kind_of_database(maria):
    """``mysql://`` and ``mariadb://`` name one kind of database (one connector): a target
    spelled ``mariadb://`` for a ``mysql://`` source keeps ``ENUM``, ``YEAR`` and zero dates
    instead of stopping with "no portable equivalent in mariadb. Publish into a database of the
    source's kind"."""
    source, target = _with_zero_dates(maria, n=40), maria.name("anon")
    table = maria.quote(source)
    maria.execute(f"ALTER TABLE {table} ADD COLUMN en ENUM('a', 'b'), ADD COLUMN yr YEAR")
    maria.execute(f"UPDATE {table} SET en = ELT(patient_id % 2 + 1, 'a', 'b'), yr = 2001")
    document = maria.config(source, target)
    document["target"] = {
        "url": sa.make_url(maria.url).set(drivername="mariadb").render_as_string(False),
        "table": target,
    }
    document["attributes"].update({c: {"role": "other"} for c in ("zd", "zdate", "en", "yr")})
    code, out = _cli("run", str(maria.write_config(document)))
    assert code == 0, out
    columns = "CAST(zd AS CHAR), CAST(zdate AS CHAR), en, yr"
    assert sorted(maria.rows(target, columns), key=repr) == sorted(
        maria.rows(source, columns), key=repr
    )
    assert maria.column_types(target)["en"] == maria.column_types(source)["en"]


def _with_timestamps(maria, n: int = 40) -> str:
    source = maria.name("patients")
    maria.create_patients(source, n=n)
    table = maria.quote(source)
    maria.execute(f"ALTER TABLE {table} ADD COLUMN ts TIMESTAMP(6) NULL")
    with maria.engine.begin() as connection:
        connection.exec_driver_sql("SET time_zone = '+00:00'")
        connection.exec_driver_sql(
            f"UPDATE {table} SET ts = TIMESTAMPADD(HOUR, patient_id %% 3, "
            "'2024-10-27 00:30:00.000001')"
        )
    return source


def _in_zone(url: str, zone: str) -> str:
    """``url`` whose connections start in time zone ``zone`` (as on a server set to it)."""
    return (
        sa.make_url(url)
        .update_query_dict({"init_command": f"SET time_zone = '{zone}'"})
        .render_as_string(False)
    )


@pytest.mark.mysql
def test_timestamps_do_not_depend_on_the_session_time_zone(maria):
    """A ``TIMESTAMP`` is an instant that MariaDB shows in the session's time zone (the
    server's by default). Read in UTC, the content digest does not change with the server's
    time zone, and a ``TIMESTAMP`` streamed to a server in another time zone keeps its
    instant."""
    source, target = _with_timestamps(maria), maria.name("anon")
    document = maria.config(source, target)
    document["source"]["url"] = _url(maria, "pymysql")
    document["attributes"]["ts"] = {"role": "other"}
    report = maria.tmp_path / "report.json"
    document["report"] = {"json": str(report)}
    code, out = _cli("run", str(maria.write_config(document)))
    assert code == 0, out
    document["source"]["url"] = _in_zone(_url(maria, "pymysql"), "+02:00")
    code, out = _cli(
        "verify", str(maria.write_config(document, "zone.yaml")), "--report", str(report)
    )
    assert "PASS  content_digest" in out, out

    streamed = maria.name("zoned")
    document = maria.config(source, streamed)
    document["source"]["url"] = _url(maria, "pymysql")
    document["target"] = {"url": _in_zone(_url(maria, "mysqldb"), "-05:00"), "table": streamed}
    document["attributes"]["ts"] = {"role": "other"}
    code, out = _cli("run", str(maria.write_config(document, "streamed.yaml")))
    assert code == 0, out
    instants = "UNIX_TIMESTAMP(ts)"
    assert sorted(maria.rows(streamed, instants), key=repr) == sorted(
        maria.rows(source, instants), key=repr
    )


@pytest.mark.mysql
@pytest.mark.parametrize(
    ("sql_type", "value"),
    [
        ("DATE", "DATE_ADD('2020-01-01', INTERVAL patient_id DAY)"),
        ("DATETIME(6)", "TIMESTAMPADD(MICROSECOND, patient_id, '2020-01-01 10:00:00')"),
        ("FLOAT", "patient_id + 0.5"),
        ("BIT(16)", "patient_id"),
    ],
)
@pytest.mark.parametrize("target_kind", ["maria", "lite"])
def test_a_source_key_of_a_type_read_alike_through_every_driver(
    maria, lite, request, sql_type, value, target_kind
):
    """``source.key`` of a type that every driver reads through an expression (a date as its text,
    ``FLOAT`` as ``DOUBLE``, ``BIT`` as an integer): the run publishes every row, joined in the
    source's database and streamed into another one, the key read and parsed alike in both passes.
    """
    other = request.getfixturevalue(target_kind)
    other.execute("SELECT 1")  # a SQLite file must exist: tclose never creates one
    source = _patients_with(maria, "k", sql_type, value)
    for driver in DRIVERS:
        _need(driver)
        target = other.name(f"anon_{driver[:5]}")
        document = maria.config(source, target)
        document["source"].update(url=_url(maria, driver), key="k")
        document["target"] = {"url": other.url, "table": target}
        document["attributes"]["patient_id"] = {"role": "identifier"}
        code, out = _cli("run", str(maria.write_config(document, f"{driver}.yaml")))
        assert code == 0, (driver, out)
        assert sorted(other.rows(target, "code")) == sorted(maria.rows(source, "code")), driver
