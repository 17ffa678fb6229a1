"""`tclose init` on every kind of source, then `tclose run` of what it wrote.

A newcomer runs `tclose init`, sets the roles (nothing else), and runs. Dates are proposed as
``date``/``datetime`` attributes (never ``ordinal``), a file or DuckDB source gets its key and a
target that can be published, and every refusal's advice, followed to the letter, gives a
configuration the next run does not refuse for that reason.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
import yaml

from tclose.app.cli import main

ROWS = 60
KINDS = [
    pytest.param("sqlite"),
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mysql", marks=pytest.mark.mysql),
    pytest.param("duckdb", marks=pytest.mark.duckdb),
    pytest.param("parquet", marks=pytest.mark.duckdb),
    pytest.param("csv", marks=pytest.mark.duckdb),
]


def _rows() -> list[dict]:
    return [
        {
            "id": i,
            "name": f"person {i}",
            "age": 20 + (i * 7) % 45,
            "born": dt.date(1950, 1, 1) + dt.timedelta(days=97 * i),
            "seen": dt.datetime(2020, 1, 1, 8, 0) + dt.timedelta(hours=5 * i, minutes=7 * i),
            "income": float((i * 37) % 101) * 10.0,
            "ward": ("north", "south", "east")[i % 3],
            "note": f"n{i:03d}",  # unique per row: a linking column until its role is changed
        }
        for i in range(1, ROWS + 1)
    ]


_COLUMNS = [
    ("name", sa.String(40)),
    ("age", sa.Integer),
    ("born", sa.Date),
    ("seen", sa.DateTime),
    ("income", sa.Float(53)),
    ("ward", sa.String(20)),
    ("note", sa.String(20)),
]


def _file_source(duck, path: Path, fmt: str) -> str:
    """A Parquet or CSV file of :func:`_rows` (no key constraint: files have none)."""
    connection = duck.connect()
    connection.execute(
        "CREATE TABLE people (id INTEGER, name VARCHAR, age INTEGER, born DATE, "
        "seen TIMESTAMP, income DOUBLE, ward VARCHAR, note VARCHAR)"
    )
    connection.executemany(
        "INSERT INTO people VALUES (?, ?, ?, ?, ?, ?, ?, ?)", [tuple(r.values()) for r in _rows()]
    )
    options = "(FORMAT parquet)" if fmt == "parquet" else "(HEADER)"
    connection.execute(f"COPY people TO '{path}' {options}")
    connection.close()
    return f"{fmt}:///{path}"


@pytest.fixture
def source(request, tmp_path):
    """``(url, table)`` of a people table of the kind ``request.param``."""
    from tests.conftest import make_database

    kind = request.param
    if kind in ("parquet", "csv"):
        from tests.conftest import duckdb_url

        duckdb_url(None)  # skips without the [duckdb] extra (fails in CI)
        import duckdb

        yield _file_source(duckdb, tmp_path / f"people.{kind}", kind), "people"
        return
    (tmp_path / "db").mkdir()
    database = make_database(kind, tmp_path / "db")
    name = database.name("people")
    columns = [sa.Column("id", sa.Integer, primary_key=True, autoincrement=False)]
    columns += [sa.Column(c, t) for c, t in _COLUMNS]
    database.create(name, columns, _rows())
    try:
        yield database.url, name
    finally:
        database.drop_all()


def _set(text: str, column: str, role: str) -> str:
    """The role on the column's own line, as a user edits the file."""
    pattern = re.compile(rf"^(  {re.escape(column)}:\s*\{{role: )\w+", re.MULTILINE)
    edited, count = pattern.subn(rf"\g<1>{role}", text)
    assert count == 1, f"no line for {column}:\n{text}"
    return edited


def _run(path: Path, capsys) -> tuple[int, str]:
    code = main(["-q", "run", str(path)])
    return code, capsys.readouterr().err


@pytest.mark.parametrize("source", KINDS, indirect=True)
def test_init_then_roles_then_run_publishes(source, tmp_path, monkeypatch, capsys):
    url, table = source
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "people.yaml"
    assert main(["init", url, table, "-o", str(path)]) == 0, capsys.readouterr().err
    capsys.readouterr()
    text = path.read_text(encoding="utf-8")
    document = yaml.safe_load(text)
    attributes = document["attributes"]
    assert attributes["born"]["type"] == "date", text
    assert attributes["seen"]["type"] == "datetime", text
    assert attributes["age"]["type"] == "numeric" and attributes["ward"]["type"] == "nominal"
    assert document["source"]["key"] == "id", text
    assert attributes["id"]["role"] == "identifier" and attributes["name"]["role"] == "identifier"
    base = table.rpartition(".")[2]
    if url.startswith(("parquet:", "csv:")):
        assert document["target"]["url"] == f"parquet:///{tmp_path / 'people_anon.parquet'}"
        assert document["target"]["table"] == "people_anon"
    else:
        assert "url" not in document["target"] and document["target"]["table"] == base + "_anon"

    # The user's one job: the roles.
    for column in ("age", "born", "seen"):
        text = _set(text, column, "quasi_identifier")
    text = _set(text, "income", "confidential")
    path.write_text(text, encoding="utf-8")

    code, err = _run(path, capsys)  # note is unique per row: a linking column
    assert code == 1 and "Linking columns" in err and "note" in err, err
    assert "role: identifier" in err
    path.write_text(_set(text, "note", "identifier"), encoding="utf-8")  # the advice, followed
    code, err = _run(path, capsys)
    assert code == 0, err
    assert main(["-q", "verify", str(path)]) == 0, capsys.readouterr()

    code, err = _run(path, capsys)  # published already: if_exists: fail refuses
    assert code == 3 and "if_exists: replace" in err, err
    path.write_text(
        path.read_text().replace("if_exists: fail", "if_exists: replace"), encoding="utf-8"
    )
    code, err = _run(path, capsys)
    assert code == 0, err


# --- the row key of a table without a primary key ---------------------------------------------


def _parquet(duck, path: Path, columns: str, rows: str) -> str:
    connection = duck.connect()
    connection.execute(f"COPY (SELECT {columns} FROM range(1, {rows} + 1) t(i)) TO '{path}'")
    connection.close()
    return f"parquet:///{path}"


@pytest.mark.duckdb
@pytest.mark.parametrize(
    ("file", "columns", "key"),
    [
        ("patients", "i AS patient_id, i % 9 AS age", "patient_id"),  # the table's name + id
        ("patients", "i % 9 AS age, 'r' || i AS record_id", "record_id"),
        ("patients", "i % 9 AS age, uuid() AS uuid", "uuid"),
        ("orders", "i % 7 AS customer_id, i % 9 AS age", None),  # another table's key
        ("patients", "i::DOUBLE AS id, i % 9 AS age", None),  # a float is no key
        ("patients", "i % 9 AS age, i AS code", None),  # nothing says it is a key
    ],
)
def test_a_file_gets_the_key_its_names_show(duck, tmp_path, capsys, file, columns, key):
    url = _parquet(duck, tmp_path / f"{file}.parquet", columns, "30")
    assert main(["init", url, file]) == 0
    text = capsys.readouterr().out
    document = yaml.safe_load(text)
    assert document["source"].get("key") == key, text
    if key is None:
        assert "# key: COLUMN  # name a unique, non-null column" in text
    else:
        assert document["attributes"][key]["role"] == "identifier"
        assert "proposed from its name" in text


def _advised(err: str) -> dict[str, str]:
    """The settings an error's advice names, ``section.key: value`` (the first of each)."""
    found = re.findall(
        r"\b(source|target)\.(url|table|key|if_exists): ([^\s;]+?)[.;]?(?:\s|$)", err
    )
    advice: dict[str, str] = {}
    for section, key, value in found:
        advice.setdefault(f"{section}.{key}", value)
    return advice


def _apply(path: Path, advice: dict[str, str]) -> None:
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    for setting, value in advice.items():
        section, key = setting.split(".")
        document[section][key] = value
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")


def _document(url: str, table: str, target: dict, key: str | None = "id") -> dict:
    source = {"url": url, "table": table} | ({"key": key} if key else {})
    return {
        "source": source,
        "target": target,
        "attributes": {
            "id": {"role": "identifier"},
            "name": {"role": "identifier"},
            "age": {"role": "quasi_identifier"},
            "born": {"role": "quasi_identifier", "type": "date"},
            "seen": {"role": "quasi_identifier", "type": "datetime"},
            "income": {"role": "confidential"},
            "ward": {"role": "other"},
            "note": {"role": "identifier"},
        },
        "privacy": {"k": 5, "t": 0.3},
    }


@pytest.mark.duckdb
@pytest.mark.parametrize(
    "target",
    [
        {"table": "people_anon"},  # no target.url: the source file's one table is 'people'
        {"table": "people"},  # the source itself
        {"url": "csv:///{dir}/out.csv", "table": "out"},  # a CSV file is no target
        {"url": "parquet:///{dir}/out.parquet", "table": "people_anon"},  # not the file's name
    ],
)
def test_each_refusal_of_a_file_target_advises_a_target_that_runs(duck, tmp_path, capsys, target):
    """Each refusal of a file target advises a target that the next run accepts, never the source's
    own name (``target.table: people`` for the first case would be refused as the source)."""
    url = _file_source(duck, tmp_path / "people.parquet", "parquet")
    target = {k: v.format(dir=tmp_path) for k, v in target.items()}
    path = tmp_path / "people.yaml"
    path.write_text(yaml.safe_dump(_document(url, "people", target)), encoding="utf-8")
    code, err = _run(path, capsys)
    assert code == 2, err
    advice = _advised(err)
    assert advice.get("target.url", "").startswith("parquet:///"), err
    _apply(path, {k: v for k, v in advice.items() if k in ("target.url", "target.table")})
    code, err = _run(path, capsys)
    assert code == 0, err


@pytest.mark.duckdb
def test_an_existing_file_target_advises_replace_or_a_file_that_runs(duck, tmp_path, capsys):
    url = _file_source(duck, tmp_path / "people.parquet", "parquet")
    target = {"url": f"parquet:///{tmp_path}/people_anon.parquet", "table": "people_anon"}
    path = tmp_path / "people.yaml"
    path.write_text(yaml.safe_dump(_document(url, "people", target)), encoding="utf-8")
    assert _run(path, capsys)[0] == 0
    code, err = _run(path, capsys)
    assert code == 3 and "if_exists: replace" in err, err
    advice = _advised(err)
    _apply(path, {k: v for k, v in advice.items() if k in ("target.url", "target.table")})
    assert _run(path, capsys)[0] == 0, "the other file"
    assert (tmp_path / "people_anon_2.parquet").is_file()


@pytest.mark.duckdb
def test_a_file_without_a_key_is_refused_naming_source_key_then_runs(duck, tmp_path, capsys):
    url = _file_source(duck, tmp_path / "people.parquet", "parquet")
    target = {"url": f"parquet:///{tmp_path}/people_anon.parquet", "table": "people_anon"}
    path = tmp_path / "people.yaml"
    path.write_text(yaml.safe_dump(_document(url, "people", target, key=None)), encoding="utf-8")
    code, err = _run(path, capsys)
    assert code == 2 and "At source ==> At key: key" in err and "source.key" in err, err
    _apply(path, {"source.key": "id"})
    assert _run(path, capsys)[0] == 0


@pytest.mark.postgres
def test_a_unique_not_null_column_is_the_key_of_a_table_without_primary_key(pg, tmp_path, capsys):
    table = pg.name("nopk")
    pg.execute(f"CREATE TABLE {table} (code TEXT NOT NULL UNIQUE, age INTEGER, id_card TEXT)")
    assert main(["init", pg.url, table]) == 0
    document = yaml.safe_load(capsys.readouterr().out)
    assert document["source"]["key"] == "code"
    assert document["target"] == {"table": f"{table}_anon", "if_exists": "fail"}


@pytest.mark.parametrize("first", ["keep t", "remove t"])
def test_k_anonymity_only_advice_runs(demo_db, tmp_path, monkeypatch, capsys, first):
    """Roles set, but no confidential column: the advice names a setting that runs
    (``algorithm.name: mdav``), not "leave t out", which t-first refuses."""
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "k.yaml"
    assert main(["-q", "init", f"sqlite:///{demo_db}", "discharges", "-o", str(path)]) == 0
    text = _set(path.read_text(encoding="utf-8"), "age", "quasi_identifier")
    if first == "remove t":
        text = re.sub(r"^  t: .*$", "", text, flags=re.MULTILINE)
    path.write_text(text, encoding="utf-8")
    code, err = _run(path, capsys)
    assert code == 2 and "algorithm.name: mdav" in err, err
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["privacy"].pop("t", None)  # "remove privacy.t"
    document["algorithm"]["name"] = "mdav"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    code, err = _run(path, capsys)  # the pass-through columns single out rows together
    linking = re.search(r"one source row\): (.+?)\. Drop", err)
    assert code == 1 and linking, err
    for column in linking.group(1).split(", "):  # the advice, followed: drop them
        document["attributes"][column]["role"] = "identifier"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    code, err = _run(path, capsys)
    assert code == 0, err
