"""Adversarial: names and values an attacker controls, in SQL, HTML and terminal output."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from tclose.cli import main

NASTY = [
    'a"b',
    "a`b",
    "a``b",
    "a'b",
    "a%b",
    "%s",
    "%(x)s",
    ":name",
    "x:y",
    'x"; DROP TABLE "{victim}"; --',
    "x`; DROP TABLE `{victim}`; --",
    "x'); DROP TABLE {victim}; --",
    "a\nb",
    "a\\b",
    "Zähler ✓",
    "a?b",
    "$1",
    "a]b[",
]


def _values(db, table: str, column, *group_by: str) -> list:
    """Sorted values of ``column`` (a name or an expression) in ``table``, by SQLAlchemy's own
    quoting and without reflection (which misreads some MySQL names)."""
    selected = sa.column(column) if isinstance(column, str) else column
    statement = sa.select(selected).select_from(sa.table(table))
    if group_by:
        statement = statement.group_by(*(sa.column(c) for c in group_by))
    with db.engine.connect() as connection:
        return sorted(v for (v,) in connection.execute(statement))


@pytest.mark.parametrize("nasty", NASTY)
def test_nasty_names_everywhere(db, nasty, capsys):
    """Quotes, backticks, ``%``, bind-parameter syntax, statement breaks and line breaks in the
    names of the source, the target and every kind of column: the run publishes exactly the
    source's values under those names, or refuses the name (exit 3) naming it; no other table
    is touched."""
    victim = db.name("victim")
    nasty = nasty.replace("{victim}", victim)
    source, target = db.name("s" + nasty), db.name("t" + nasty)
    db.create(victim, [sa.Column("v", sa.Integer)], [{"v": 1}])
    qi, conf, other = "q" + nasty, "c" + nasty, "o" + nasty
    rows = [{"id": i, qi: i % 11, conf: float(i % 5), other: i % 2, "n": i % 3} for i in range(40)]
    db.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column(qi, sa.Integer),
            sa.Column(conf, sa.Double),
            sa.Column(other, sa.Integer),
            sa.Column("n", sa.Integer),
        ],
        rows,
    )
    document = {
        "source": {"url": db.url, "table": source, "key": "id"},
        "target": {"table": target, "if_exists": "replace"},
        "attributes": {
            qi: {"role": "quasi_identifier", "type": "numeric"},
            "n": {"role": "quasi_identifier", "type": "nominal"},
            conf: {"role": "confidential", "type": "numeric"},
            other: {"role": "other"},
        },
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first", "options": {}},
        "output": {"seed": 7},
        "report": {"json": str(db.tmp_path / "r.json"), "html": str(db.tmp_path / "r.html")},
    }
    path = str(db.write_config(document))
    code = main(["-q", "run", path])
    err = capsys.readouterr().err
    refused = db.dialect == "mysql" and "\n" in nasty  # see the test below
    assert code == (3 if refused else 0), err
    assert db.tables() >= {source, victim}
    assert _values(db, source, other) == sorted(r[other] for r in rows)
    if code == 0:
        assert main(["-q", "run", path]) == 0
        assert main(["-q", "verify", path]) == 0
        assert db.tables() == {source, target, victim}
        assert _values(db, target, other) == sorted(r[other] for r in rows)
        assert _values(db, target, conf) == sorted(r[conf] for r in rows)
        assert min(_values(db, target, sa.func.count(), qi, "n")) >= 3
    else:
        assert repr(nasty)[1:-1] in err
        assert "internal error" not in err and "Database error" not in err
    assert db.rows(victim) == [(1,)]


@pytest.mark.mysql
def test_mariadb_reflects_column_names_with_backticks_as_the_server_has_them(maria):
    """SQLAlchemy reflects MySQL column names without undoing the doubling of backticks."""
    from tclose.connectors.mysql import MySQLDatabase
    from tclose.naming import TableName

    table = maria.name("ticks")
    names = ["x`y", "x``y", "`", "k`"]
    maria.create(
        table,
        [sa.Column(n, sa.Integer, primary_key=n == "k`", autoincrement=False) for n in names],
        [],
    )
    catalog = [
        n
        for (n,) in maria.execute(
            "SELECT column_name FROM information_schema.columns WHERE table_schema = DATABASE() "
            "AND table_name = :t ORDER BY ordinal_position",
            {"t": table},
        )
    ]
    database = MySQLDatabase(maria.url)
    try:
        reflected = database.table(TableName(None, table))
    finally:
        database.engine.dispose()
    assert catalog == names
    assert [c.name for c in reflected.columns] == names
    assert [c.name for c in reflected.primary_key.columns] == ["k`"]


@pytest.mark.mysql
def test_mariadb_column_with_a_line_break_is_refused_not_left_out(maria, capsys):
    """SQLAlchemy parses ``SHOW CREATE TABLE`` line by line: a column whose name holds a line
    break was left out of the reflected table, so a pass-through column the config does not
    name vanished from the release of a run that exited 0. A data error naming the column."""
    source, target = maria.name("src"), maria.name("anon")
    maria.create_patients(source, n=40)
    with maria.engine.begin() as connection:
        connection.exec_driver_sql(
            f"ALTER TABLE {maria.quote(source)} ADD COLUMN `x\ny` INTEGER DEFAULT 1"
        )
    assert main(["-q", "run", str(maria.write_config(maria.config(source, target)))]) == 3
    err = capsys.readouterr().err
    assert "'x\\ny'" in err and "line break" in err
    assert maria.tables() == {source}


@pytest.mark.postgres
@pytest.mark.mysql
def test_a_column_with_a_line_break_into_mariadb_is_refused_before_any_work(pg, maria, capsys):
    """PostgreSQL holds a column ``x<LF>y``; MariaDB would hold it too, but SQLAlchemy cannot
    read its name back (see above): a configuration error before any work, naming the column
    and the remedy."""
    source, target = pg.name("src"), maria.name("anon")
    pg.create_patients(source, n=40)
    pg.execute(f"ALTER TABLE {pg.quote(source)} ADD COLUMN {pg.quote('x' + chr(10) + 'y')} INT")
    document = pg.config(source, target)
    document["target"]["url"] = maria.url
    document["attributes"]["x\ny"] = {"role": "other"}
    assert main(["-q", "run", str(pg.write_config(document))]) == 2
    err = capsys.readouterr().err
    assert "Column 'x\\ny'" in err and "line break" in err and "role: identifier" in err
    assert maria.tables() == set()
    document["attributes"]["x\ny"] = {"role": "identifier"}
    assert main(["-q", "run", str(pg.write_config(document))]) == 0
