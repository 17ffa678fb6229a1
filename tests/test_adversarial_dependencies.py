"""Adversarial: the target is not the source, but holds rows the source reads.

A source may be a view, a partitioned table or a parent of inherited tables; replacing one of
the tables it reads (or a partitioned table that holds the source partition: dropping it drops
its partitions) destroys the source as surely as replacing the source itself (a partition or a
child on PostgreSQL, a view's table on MariaDB and DuckDB). Every such target is refused with
exit 2 before anything is written, and the source reads what it read before.
"""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from tclose.app.cli import main


def _view(db, name: str, select: str) -> None:
    db.execute(f"CREATE VIEW {db.quote(name)} AS {select}")


def _drop_views(db, *names: str) -> None:
    for name in names:
        db.execute(f"DROP VIEW IF EXISTS {db.quote(name)}")


def _refused(db, capsys, source: str, target: str, order: str = "patient_id", **report) -> str:
    """Run ``source`` into ``target`` (replace): exit 2, the source reads as before; the error."""
    before = db.rows(source, order=order)
    document = db.config(source, target)
    document["target"]["if_exists"] = "replace"
    if report:
        document["report"] = report
    code = main(["-q", "run", str(db.write_config(document))])
    err = capsys.readouterr().err
    assert code == 2, err
    assert db.rows(source, order=order) == before
    return err


def test_a_table_that_the_source_view_reads_is_refused_as_target(db, capsys):
    """Through an alias and a second view: ``v2`` reads ``v1``, which reads ``base AS a``."""
    base, v1, v2 = db.name("base"), db.name("v1"), db.name("v2")
    db.create_patients(base, n=40)
    try:
        _view(db, v1, f"SELECT a.* FROM {db.quote(base)} AS a")
        _view(db, v2, f"SELECT * FROM {db.quote(v1)}")
        for source in (v1, v2):
            err = _refused(db, capsys, source, base)
            assert f"The target table {base} holds rows that the source {source} reads" in err
        assert len(db.rows(base)) == 40
    finally:
        _drop_views(db, v2, v1)
    assert db.tables() == {base}


def test_the_table_under_the_source_view_is_refused_however_it_is_spelled(db, capsys):
    """The view's table named with its schema (and, where names fold, in capitals): the
    dependencies are compared by identity, as source and target are."""
    base, view = db.name("base"), db.name("v")
    db.create_patients(base, n=40)
    schema = {"sqlite": "MAIN", "duckdb": "MAIN", "postgresql": "public"}.get(
        db.dialect, db.engine.url.database
    )
    spelled = f"{schema}.{base.upper() if db.dialect in ('sqlite', 'duckdb') else base}"
    try:
        _view(db, view, f"SELECT * FROM {db.quote(base)}")
        err = _refused(db, capsys, view, spelled)
        assert f"holds rows that the source {view} reads" in err
    finally:
        _drop_views(db, view)
    assert db.tables() == {base}


def test_the_audit_table_may_not_be_a_table_the_source_view_reads(db, capsys):
    base, view = db.name("base"), db.name("v")
    db.create_patients(base, n=40)
    try:
        _view(db, view, f"SELECT * FROM {db.quote(base)}")
        err = _refused(db, capsys, view, db.name("anon"), table=base)
        assert f"The audit table {base} holds rows that the source {view} reads" in err
    finally:
        _drop_views(db, view)
    assert db.tables() == {base}


def test_a_view_source_publishes_into_a_table_it_does_not_read(db, capsys):
    """No false alarm: a view that reads ``base`` may be published into another table."""
    base, view, target = db.name("base"), db.name("v"), db.name("anon")
    db.create_patients(base, n=40)
    try:
        _view(db, view, f"SELECT * FROM {db.quote(base)}")
        assert main(["-q", "run", str(db.write_config(db.config(view, target)))]) == 0
        assert len(db.rows(target)) == 40
        assert len(db.rows(view)) == 40
    finally:
        _drop_views(db, view)


def _partitions(pg) -> tuple[str, str, str]:
    """A table partitioned by ``patient_id`` into two partitions, filled with 40 patients."""
    parent, low, high = pg.name("p"), pg.name("p_low"), pg.name("p_high")
    rows = pg.name("rows")
    pg.create_patients(rows, n=40)
    pg.execute(f"CREATE TABLE {parent} (LIKE {rows}) PARTITION BY RANGE (patient_id)")
    pg.execute(f"CREATE TABLE {low} PARTITION OF {parent} FOR VALUES FROM (MINVALUE) TO (20)")
    pg.execute(f"CREATE TABLE {high} PARTITION OF {parent} FOR VALUES FROM (20) TO (MAXVALUE)")
    pg.execute(f"INSERT INTO {parent} SELECT * FROM {rows}")
    pg.execute(f"DROP TABLE {rows}")
    return parent, low, high


@pytest.mark.postgres
def test_postgresql_a_partition_of_the_source_is_refused_as_target(pg, capsys):
    parent, low, high = _partitions(pg)
    try:
        err = _refused(pg, capsys, parent, high)
        assert f"The target table {high} holds rows that the source {parent} reads" in err
        assert len(pg.rows(parent)) == 40
    finally:
        pg.execute(f"DROP TABLE {parent}")  # and its partitions


@pytest.mark.postgres
def test_postgresql_the_table_that_holds_the_source_partition_is_refused_as_target(pg, capsys):
    """Dropping a partitioned table drops its partitions: the source partition with it."""
    parent, low, high = _partitions(pg)
    try:
        err = _refused(pg, capsys, low, parent)
        assert f"The target table {parent} holds rows that the source {low} reads" in err
        assert len(pg.rows(parent)) == 40  # the other partition too
    finally:
        pg.execute(f"DROP TABLE {parent}")


@pytest.mark.postgres
def test_postgresql_a_table_that_inherits_from_the_source_is_refused_as_target(pg, capsys):
    parent, child = pg.name("parent"), pg.name("child")
    pg.create_patients(parent, n=40)
    pg.execute(f"CREATE TABLE {child} () INHERITS ({parent})")
    pg.execute(f"INSERT INTO {child} SELECT * FROM ONLY {parent} WHERE patient_id >= 20")
    pg.execute(f"DELETE FROM ONLY {parent} WHERE patient_id >= 20")
    try:
        err = _refused(pg, capsys, parent, child)
        assert f"The target table {child} holds rows that the source {parent} reads" in err
        assert len(pg.rows(parent)) == 40
    finally:
        pg.execute(f"DROP TABLE {child}")


@pytest.mark.parametrize(
    ("select", "problem"),
    [
        (
            "SELECT * FROM {base} UNION ALL SELECT * FROM {base} WHERE patient_id <= 3",
            "3 value(s) held by more than one row (6 rows): 1, 2, 3",
        ),
        (
            "SELECT * FROM {base} WHERE patient_id > 2 UNION ALL SELECT * FROM {base} WHERE patient_id <= 2",
            None,
        ),
    ],
)
def test_a_view_source_whose_key_repeats_is_refused_naming_the_rows(db, capsys, select, problem):
    """A view has no primary key to vouch for ``source.key``: a key a join or a union repeats
    is refused (exit 3), the message naming the key column, the problem and the rows."""
    base, view, target = db.name("base"), db.name("v"), db.name("anon")
    db.create_patients(base, n=40)
    try:
        _view(db, view, select.format(base=db.quote(base)))
        document = db.config(view, target)
        document["source"]["key"] = "patient_id"
        code = main(["-q", "run", str(db.write_config(document))])
        err = capsys.readouterr().err
        if problem is None:
            assert code == 0, err
        else:
            assert code == 3, err
            assert (
                f"The row key 'patient_id' of {view} is not unique and non-null: {problem}" in err
            )
            assert db.tables() == {base}
    finally:
        _drop_views(db, view)


def test_the_key_message_counts_nulls_and_repeated_values():
    from tclose.base.config import parse_config
    from tclose.core.pipeline import _key_problem

    config = parse_config(
        {
            "source": {"url": "sqlite:///x.db", "table": "src", "key": "id"},
            "target": {"table": "out"},
            "attributes": {"a": {"role": "quasi_identifier"}, "c": {"role": "confidential"}},
            "privacy": {"k": 2, "t": 0.5},
        }
    )
    keys = pd.Series([1, None, 2, 2, None, 3, *range(4, 10), *range(4, 10)], dtype="Int64")
    assert _key_problem(config, keys) == (
        "The row key 'id' of src is not unique and non-null: 2 row(s) with NULL; 7 value(s) "
        "held by more than one row (14 rows): 2, 4, 5, 6, 7, .... Name a unique, non-null "
        "column as source.key."
    )


@pytest.mark.duckdb
@pytest.mark.parametrize(
    "reads", ["read_parquet(['{file}'])", "'{file}'", "read_parquet('{glob}')"]
)
def test_duckdb_a_file_that_the_source_view_reads_is_refused_as_target(
    tmp_path, duckdb_file, duck, capsys, reads
):
    """A DuckDB view over a Parquet file, published into that file (``parquet:///``), is refused:
    replacing the file would make the source view read the release."""
    url = duckdb_file(tmp_path / "views.duckdb")
    data = tmp_path / "data" / "patients.parquet"
    data.parent.mkdir()
    connection = duck.connect(str(tmp_path / "views.duckdb"))
    connection.execute(
        f"COPY (SELECT range AS id, 20 + range % 50 AS age, range % 7 AS ward, "
        f"(range * 37) % 1000 AS charge FROM range(60)) TO '{data}' (FORMAT parquet)"
    )
    select = reads.format(file=data, glob=data.parent / "*.parquet")
    connection.execute(f"CREATE VIEW v AS SELECT * FROM {select}")
    connection.close()
    before = data.read_bytes()
    document = {
        "source": {"url": url, "table": "v", "key": "id"},
        "target": {"url": f"parquet:///{data}", "table": "patients", "if_exists": "replace"},
        "attributes": {
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "ward": {"role": "quasi_identifier", "type": "numeric"},
            "charge": {"role": "confidential", "type": "numeric"},
        },
        "privacy": {"k": 5, "t": 0.5},
        "algorithm": {"name": "t-first"},
    }
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main(["-q", "run", str(config)]) == 2
    assert "holds rows that the source v reads" in capsys.readouterr().err
    assert data.read_bytes() == before
