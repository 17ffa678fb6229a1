"""Adversarial: names and values an attacker controls, in SQL, HTML and terminal output."""

from __future__ import annotations

import warnings
from html.parser import HTMLParser

import pytest
import sqlalchemy as sa
import yaml

import tclose.app.compare
import tclose.core.runner
from tclose.app.cli import main

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
    _nasty_run(db, nasty, capsys)


@pytest.mark.mysql
@pytest.mark.parametrize("driver", ["mysqldb", "mariadbconnector"])
@pytest.mark.parametrize("nasty", ["a%b", "%s", "%(x)s", "a?b", ":name"])
def test_nasty_names_with_each_mariadb_driver(maria, driver, nasty, capsys):
    """The statements tclose writes itself doubled every ``%`` for the driver, which MariaDB
    Connector/Python (``?`` placeholders) did not undo: a target named ``a%b`` failed, blamed on
    the user's privileges ("may create tables ... but not alter or drop them: Table
    'test.ta%%b__tclose_s_...' doesn't exist"), and a table named ``a%%b`` would have been the
    one renamed or dropped."""
    maria.url = sa.make_url(maria.url).set(drivername=f"mysql+{driver}").render_as_string(False)
    _nasty_run(maria, nasty, capsys)


def _nasty_run(db, nasty: str, capsys) -> None:
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
    """SQLAlchemy parses ``SHOW CREATE TABLE`` line by line, so a column whose name holds a line
    break is left out of the reflected table: such a column is a data error naming it, never
    silently missing from the release."""
    source, target = maria.name("src"), maria.name("anon")
    maria.create_patients(source, n=40)
    with maria.engine.begin() as connection:
        connection.exec_driver_sql(
            f"ALTER TABLE {maria.quote(source)} ADD COLUMN `x\ny` INTEGER DEFAULT 1"
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["-q", "run", str(maria.write_config(maria.config(source, target)))])
    assert code == 3
    err = capsys.readouterr().err
    assert "'x\\ny'" in err and "line break" in err
    assert maria.tables() == {source}
    assert not [w for w in caught if issubclass(w.category, sa.exc.SAWarning)]  # raw pieces


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


# --- the HTML report -------------------------------------------------------------------------

MARKUP = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    '"><svg onload=alert(3)>',
    "' onmouseover='alert(4)",
    "</svg><script>alert(5)</script>",
    "]]><script>alert(6)</script>",
    "</title></textarea><iframe src=javascript:alert(7)>",
    "&lt;script&gt;alert(8)&lt;/script&gt;",
]

#: Every element the report's own markup uses.
_OWN_TAGS = {
    "html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h3", "small", "div",
    "p", "span", "table", "tr", "th", "td", "ul", "li", "pre", "svg", "rect", "line", "text",
    "circle",
}  # fmt: skip


class _Markup(HTMLParser):
    """The elements, attributes and text of a page, as a browser's tokenizer sees them."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data):
        self.text.append(data)

    def unknown_decl(self, data):  # <![CDATA[ ... ]]>
        self.tags.append(("<![" + data, {}))


def _assert_inert(page: str, shown: list[str]) -> None:
    """No element or attribute of ``page`` comes from the data, and every string of ``shown``
    appears as text."""
    parser = _Markup()
    parser.feed(page)
    parser.close()
    for tag, attributes in parser.tags:
        assert tag in _OWN_TAGS, tag
        for name, value in attributes.items():
            assert not name.startswith("on") and name not in ("src", "href"), (tag, name)
            assert "javascript:" not in (value or "").lower(), (tag, name, value)
    text = "".join(parser.text)
    for string in shown:
        assert string in text, string


def test_the_html_report_shows_markup_in_names_and_values_as_text(lite, monkeypatch, capsys):
    """Markup in the source table's name, column names, category labels of a nominal
    quasi-identifier and of a nominal confidential attribute, and the algorithm's name: the
    auditor's browser shows it as text."""
    from tests.test_adversarial_plugins import _honest, _registry

    source, target = lite.name(MARKUP[0]), lite.name(MARKUP[1])
    numeric, nominal, secret = MARKUP[2], MARKUP[3], MARKUP[4]
    rows = [
        {
            "id": i,
            numeric: i % 13,
            nominal: MARKUP[5 + i % 3],
            secret: MARKUP[i % 3],
        }
        for i in range(60)
    ]
    lite.create(
        source,
        [
            sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
            sa.Column(numeric, sa.Integer),
            sa.Column(nominal, sa.Text),
            sa.Column(secret, sa.Text),
        ],
        rows,
    )
    registry = _registry(lambda x, d, k: _honest(x, d, k))
    algorithm = registry.algorithms.pop("rogue")
    algorithm.obj.name = "<script>alert('plugin')</script>"
    registry.algorithms[algorithm.obj.name] = algorithm
    monkeypatch.setattr(tclose.core.runner, "load_registry", lambda: registry)
    html = lite.tmp_path / "r.html"
    document = {
        "source": {"url": lite.url, "table": source, "key": "id"},
        "target": {"table": target},
        "attributes": {
            numeric: {"role": "quasi_identifier", "type": "numeric"},
            nominal: {"role": "quasi_identifier", "type": "nominal"},
            secret: {"role": "confidential", "type": "nominal"},
        },
        "privacy": {"k": 3, "t": 1.0},
        "algorithm": {"name": algorithm.obj.name, "options": {}},
        "report": {"json": str(lite.tmp_path / "r.json"), "html": str(html)},
    }
    assert main(["-q", "run", str(lite.write_config(document))]) == 0, capsys.readouterr().err
    page = html.read_text(encoding="utf-8")
    _assert_inert(page, [source, target, numeric, nominal, secret, *MARKUP[5:8]])
    assert "alert('plugin')" in page.replace("&#x27;", "'")
    # tclose compare: the algorithm's name is a point's label, the table's in the title
    monkeypatch.setattr(tclose.app.compare, "load_registry", lambda: registry)
    config, out = str(lite.write_config(document)), str(lite.tmp_path / "map.html")
    arguments = ["-q", "compare", config, "--algorithms", algorithm.obj.name, "--html", out]
    assert main(arguments) == 0, capsys.readouterr().err
    page = (lite.tmp_path / "map.html").read_text(encoding="utf-8")
    _assert_inert(page, [source, algorithm.obj.name])


# --- the terminal ----------------------------------------------------------------------------

#: Set the window title, clear the screen, turn the text red; C1 CSI; a right-to-left override.
TERMINAL = "\x1b]0;owned\x07\x1b[2J\x1b[31m\x9b1m\u202e"


def test_control_characters_in_names_are_not_sent_to_the_terminal(lite, capsys):
    """A table or column name from the data with ANSI escape sequences could clear the auditor's
    screen, recolour or hide the lines after it, or set the window title: ``tclose run`` (progress
    lines, the published summary), ``tclose verify`` and error messages (the table's name, the YAML
    path of a column) print every control character but tab and line feed, and the bidirectional
    overrides, as Python escapes (``\x1b``)."""
    source, target = lite.name("s" + TERMINAL), lite.name("t" + TERMINAL)
    lite.create_patients(source, n=40)
    with lite.engine.begin() as connection:
        connection.exec_driver_sql(
            f"ALTER TABLE {lite.quote(source)} ADD COLUMN {lite.quote('w' + TERMINAL)} INT"
        )
    document = lite.config(source, target)
    document["attributes"]["w" + TERMINAL] = {"role": "other"}
    path = str(lite.write_config(document))
    outputs = []
    for arguments, code in ((["run", path], 0), (["verify", path], 0), (["run", path], 3)):
        assert main(arguments) == code
        outputs.append(capsys.readouterr())
    document["attributes"]["q" + TERMINAL] = {"role": "other"}
    assert main(["run", str(lite.write_config(document))]) == 3  # no such column
    outputs.append(capsys.readouterr())
    shown = repr(TERMINAL)[1:-1]
    assert shown == "\\x1b]0;owned\\x07\\x1b[2J\\x1b[31m\\x9b1m\\u202e"
    for output in outputs:
        for text in (output.out, output.err):
            assert not set(text) & {"\x1b", "\x07", "\x9b", "\u202e"}, text
    assert f"published: table {lite.name('t')}{shown}: 40 rows" in outputs[0].out
    assert f"reading {lite.name('s')}{shown}" in outputs[0].err
    assert f"table {lite.name('t')}{shown}: 40 rows" in outputs[1].out
    assert f"The target table {lite.name('t')}{shown} already exists" in outputs[2].err
    assert f"(attributes.q{shown})" in outputs[3].err


@pytest.mark.parametrize("nasty", ['s"q', "s%s", "s:x", "s'; --", "s\nt"])
def test_nasty_schema_names(db, nasty, capsys):
    """Source and target in a schema whose name holds a quote, ``%``, bind syntax or a line
    break (PostgreSQL and DuckDB schemas)."""
    if db.dialect not in ("postgresql", "duckdb"):
        pytest.skip("a schema here is an attached database (SQLite) or a database (MariaDB)")
    schema = f"{db.prefix}{nasty}"
    with db.engine.begin() as connection:
        connection.execute(sa.schema.CreateSchema(schema))
    db.schemas.append(schema)
    try:
        source, target = db.name("src"), db.name("anon")
        db.create(
            source,
            [
                sa.Column("patient_id", sa.Integer, primary_key=True, autoincrement=False),
                sa.Column("age", sa.Integer),
                sa.Column("charge", sa.Double),
            ],
            [{"patient_id": i, "age": i % 17, "charge": float(i % 5)} for i in range(40)],
            schema=schema,
        )
        document = db.config(f"{schema}.{source}", f"{schema}.{target}")
        document["attributes"] = {
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "charge": {"role": "confidential", "type": "numeric"},
        }
        document["target"]["if_exists"] = "replace"
        path = str(db.write_config(document))
        for _ in range(2):
            assert main(["-q", "run", path]) == 0, capsys.readouterr().err
        assert main(["-q", "verify", path]) == 0, capsys.readouterr().err
        tables = sa.inspect(db.engine).get_table_names(schema=schema)
        assert sorted(tables) == sorted([source, target, "tclose_releases"])
        assert len(db.rows(target, schema=schema)) == 40
    finally:
        with db.engine.begin() as connection:
            connection.execute(sa.schema.DropSchema(schema, cascade=True))
        db.schemas.remove(schema)


@pytest.mark.duckdb
def test_nasty_names_in_a_csv_header_and_file_names(duck, tmp_path, capsys):
    """A CSV file from elsewhere: its header names the columns, its file name the table. Quotes
    in the file names, quotes, ``%``, bind syntax and statement breaks in the header: published
    exactly into a Parquet file."""
    import yaml

    folder = tmp_path / 'it\'s "here"'
    folder.mkdir()
    source, target = folder / "src'x.csv", folder / 'anon"y.parquet'
    qi, conf, other = 'q"; DROP TABLE x; --', "c'%s", "o:name`"
    lines = ["id," + ",".join('"' + n.replace('"', '""') + '"' for n in (qi, conf, other))]
    lines += [f"{i},{i % 11},{i % 5}.5,{i % 2}" for i in range(40)]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    document = {
        "source": {"url": f"csv:///{source}", "table": "src'x", "key": "id"},
        "target": {"url": f"parquet:///{target}", "table": 'anon"y'},
        "attributes": {
            qi: {"role": "quasi_identifier", "type": "numeric"},
            conf: {"role": "confidential", "type": "numeric"},
            other: {"role": "other"},
        },
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first", "options": {}},
    }
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main(["-q", "run", str(path)]) == 0, capsys.readouterr().err
    assert main(["-q", "verify", str(path)]) == 0, capsys.readouterr().err
    connection = duck.connect()
    relation = "read_parquet(" + "'" + str(target).replace("'", "''") + "')"
    names = [r[0] for r in connection.execute(f"DESCRIBE SELECT * FROM {relation}").fetchall()]
    assert set(names) == {"tclose_row", qi, conf, other}
    quoted = '"' + conf.replace('"', '""') + '"'
    rows = connection.execute(f"SELECT {quoted} FROM {relation}").fetchall()
    published = sorted(v for (v,) in rows)
    assert published == sorted(i % 5 + 0.5 for i in range(40))
    assert sorted(p.name for p in folder.iterdir()) == sorted([source.name, target.name])


# --- tclose init: the YAML skeleton ------------------------------------------------------------

_SKELETON_KEYS = ["source", "target", "attributes", "privacy", "algorithm", "report"]
_YAML_BREAKERS = [
    "a\nb",
    "a\rb",
    "a\u2028b",
    "a\x85b",
    "x\n  output: {keep_key: true}\n#",
    "é\x1b[2J",
    "x: y",
    "#c",
    "&a",
    "? q",
    "- d",
    "{e",
    "null",
    "<<",
    "'\"",
]


def _skeleton(url: str, table: str, tmp_path, capsys) -> dict:
    """The document ``tclose init`` writes for ``table``, parsed as ``tclose run`` parses it."""
    from tclose.base.config import _UniqueKeyLoader

    output = tmp_path / "init.yaml"
    assert main(["-q", "init", url, table, "-o", str(output)]) == 0, capsys.readouterr().err
    return yaml.load(output.read_text(encoding="utf-8"), Loader=_UniqueKeyLoader)  # noqa: S506


def test_init_keeps_column_names_from_the_data_in_their_keys(lite, tmp_path, capsys):
    """Column names with line breaks (a YAML line break is also CR, NEL, LS or PS) became
    complex keys (``? 'a ...'``) that broke the skeleton's lines: each column is one key of
    ``attributes``, spelled exactly, and adds nothing else."""
    table = lite.name("src")
    columns = [f"c{i} {name}" for i, name in enumerate(_YAML_BREAKERS)]
    lite.create(
        table,
        [sa.Column("id", sa.Integer, primary_key=True, autoincrement=False)]
        + [sa.Column(c, sa.Integer) for c in columns],
        [],
    )
    document = _skeleton(lite.url, table, tmp_path, capsys)
    assert list(document) == _SKELETON_KEYS
    assert list(document["attributes"]) == ["id", *columns]
    assert document["source"]["key"] == "id"
    assert all(spec["role"] in ("identifier", "other") for spec in document["attributes"].values())


@pytest.mark.duckdb
def test_init_keeps_type_names_from_the_data_in_their_comments(duckdb_file, tmp_path, capsys):
    """A column's type is its comment in the skeleton, and a type can hold data: the field
    names of a DuckDB (or Parquet) STRUCT. A field name ``x<LF>output: {keep_key: true}<LF>#``
    wrote the line ``output: {keep_key: true}`` into the skeleton, which then published the
    row key once the user had given the columns their roles."""
    import duckdb

    url = duckdb_file(tmp_path / "s.duckdb")
    connection = duckdb.connect(str(tmp_path / "s.duckdb"))
    fields = ", ".join('"' + name.replace('"', '""') + '" INTEGER' for name in _YAML_BREAKERS)
    connection.execute(f"CREATE TABLE t (id INTEGER PRIMARY KEY, s STRUCT({fields}))")
    connection.close()
    document = _skeleton(url, "t", tmp_path, capsys)
    assert list(document) == _SKELETON_KEYS
    assert list(document["attributes"]) == ["id", "s"]
    text = (tmp_path / "init.yaml").read_text(encoding="utf-8")
    (line,) = [line for line in text.splitlines() if line.startswith("  s:")]
    assert "STRUCT(" in line and "keep_key" in line  # the whole type, on its line


# --- run attribution -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "column",
    [
        "tclose_run_" + "f" * 32,
        "x CONSTRAINT tclose_run_" + "e" * 32 + " CHECK (1)",
    ],
)
def test_a_column_named_like_the_sqlite_run_mark_does_not_spoof_the_run(lite, capsys, column):
    """SQLite keeps no table comment: a run marks its table with a constraint named
    ``tclose_run_<id>``, found in the table's definition. A pass-through column named like it
    came first in the definition: ``tclose verify`` said a run that never happened published
    the table, and appended a made-up audit record of that run to the audit table."""
    source, target = lite.name("src"), lite.name("anon")
    lite.create_patients(source, n=40)
    with lite.engine.begin() as connection:
        connection.exec_driver_sql(
            f"ALTER TABLE {lite.quote(source)} ADD COLUMN {lite.quote(column)} INT DEFAULT 1"
        )
    document = lite.config(source, target)
    document["attributes"][column] = {"role": "other"}
    document["report"] = {"table": "audit"}
    path = str(lite.write_config(document))
    assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    ((run_id,),) = lite.execute("SELECT run_id FROM audit")
    assert main(["verify", path]) == 0
    out = capsys.readouterr().out
    assert f"published by tclose run {run_id} " in out
    assert "audit rebuilt" not in out
    assert lite.execute("SELECT run_id FROM audit") == [(run_id,)]


def test_the_html_report_of_a_failed_verification_shows_markup_as_text(lite, capsys):
    """A pass-through column unique per row fails the linkage check, whose details and the
    advice name the column: its markup is text in the report of the failed run."""
    source, target = lite.name("src"), lite.name("anon")
    lite.create_patients(source, n=40)
    column = MARKUP[1]
    with lite.engine.begin() as connection:
        connection.exec_driver_sql(
            f"ALTER TABLE {lite.quote(source)} ADD COLUMN {lite.quote(column)} INT"
        )
        connection.exec_driver_sql(f"UPDATE {lite.quote(source)} SET {lite.quote(column)} = rowid")
    document = lite.config(source, target)
    document["attributes"][column] = {"role": "other"}
    html = lite.tmp_path / "r.html"
    document["report"] = {"json": str(lite.tmp_path / "r.json"), "html": str(html)}
    assert main(["-q", "run", str(lite.write_config(document))]) == 1
    assert column in capsys.readouterr().err
    page = html.read_text(encoding="utf-8")
    assert "Verification FAILED" in page
    _assert_inert(page, [column])


@pytest.mark.postgres
@pytest.mark.parametrize("nasty", ["a\\'b", "a\\", "x\\'); SELECT 1; --"])
def test_postgresql_names_with_backslashes_without_standard_conforming_strings(pg, nasty, capsys):
    """tclose writes table names into string literals (``to_regclass('...')``). A server (or
    role, or URL) with ``standard_conforming_strings = off`` reads a backslash in a literal as
    an escape: a name with a backslash and a quote must still be one literal."""
    victim = pg.name("victim")
    pg.create(victim, [sa.Column("v", sa.Integer)], [{"v": 1}])
    source, target = pg.name("src"), pg.name("t" + nasty)
    pg.create_patients(source, n=40)
    document = pg.config(source, target)
    url = sa.make_url(pg.url).update_query_dict({"options": "-c standard_conforming_strings=off"})
    document["source"]["url"] = url.render_as_string(False)
    document["target"]["if_exists"] = "replace"
    path = str(pg.write_config(document))
    for _ in range(2):
        assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    assert main(["-q", "verify", path]) == 0, capsys.readouterr().err
    assert pg.tables() == {source, target, victim}
    assert len(_values(pg, target, "code")) == 40
    assert pg.rows(victim) == [(1,)]


@pytest.mark.mysql
@pytest.mark.parametrize("nasty", ["a\\b", "a\\'b"])
def test_mariadb_names_with_backslashes_with_no_backslash_escapes(maria, nasty, capsys):
    """MariaDB reads a backslash in a string literal as an escape unless ``sql_mode`` has
    ``NO_BACKSLASH_ESCAPES``; tclose writes the names of its staging tables into its registry
    (``tclose_owned``) as literals."""
    source, target = maria.name("src"), maria.name("t" + nasty)
    maria.create_patients(source, n=40)
    document = maria.config(source, target)
    mode = "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES')"
    url = sa.make_url(maria.url).update_query_dict({"init_command": mode})
    document["source"]["url"] = url.render_as_string(False)
    document["target"]["if_exists"] = "replace"
    path = str(maria.write_config(document))
    for _ in range(3):
        assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    assert maria.tables() == {source, target}
    left = maria.execute(
        "SELECT name FROM tclose_owned WHERE name LIKE :p", {"p": maria.prefix + "%"}
    )
    assert left == []


@pytest.mark.mysql
@pytest.mark.parametrize("mode", ["", ",NO_BACKSLASH_ESCAPES"])
def test_mariadb_registry_names_mean_the_same_in_every_sql_mode(maria, mode):
    """The registry of owned tables (``tclose_owned``) gets names as literals. Quoted with
    their backslashes doubled, they meant two backslashes under ``NO_BACKSLASH_ESCAPES``: the
    registry held another name than the staging table's, and the clean-up after a killed run
    (``drop_leftovers``) could not find its table. A leftover registered under either mode is
    found and dropped."""
    from tclose.connectors.mysql import MySQLDatabase
    from tclose.connectors.mysql.server import _literal
    from tclose.naming import TableName

    set_mode = f"SET SESSION sql_mode = CONCAT(@@sql_mode, '{mode}')"
    url = sa.make_url(maria.url).update_query_dict({"init_command": set_mode})
    database = MySQLDatabase(url.render_as_string(False))
    try:
        nasty = "a\\'b\\\\c\\"
        with database.engine.connect() as connection:
            assert connection.exec_driver_sql(f"SELECT {_literal(nasty)}").scalar() == nasty
        left = TableName(None, maria.name("t" + nasty))
        with database.session() as session:
            session.run_lock = f"tclose_test_{maria.prefix}"  # free once the session ends
            session.register(left)
            session.execute(f"CREATE TABLE {database.qualified(left)} (x INT)")
        assert left.name in maria.tables()
        with database.session() as session:
            assert session.drop_leftovers(None) == [left]
        assert left.name not in maria.tables()
    finally:
        database.engine.dispose()
