"""Adversarial: every file a run writes, aimed by a careless user at a file it must keep.

A report, or a file target (Parquet), that names the source's database file, the target's
database file or one of their side files, or the other report, however spelled (``./``, ``..``,
a symbolic link, a hard link), is refused before anything is written (exit 2), and the source is
byte-for-byte what it was, with no file added next to it. ``tclose demo`` and ``tclose init``
never replace a file they did not make, and a path they cannot use is a clear error, not a bug.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from pathlib import Path

import pytest
import yaml

from tclose.app.cli import main


def _state(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file of ``folder``: its SHA-256 and its mtime (ns)."""
    return {
        p.name: (hashlib.sha256(p.read_bytes()).hexdigest(), p.stat().st_mtime_ns)
        for p in sorted(folder.iterdir())
        if p.is_file() and not p.is_symlink()
    }


def _spellings(path: Path, tmp_path: Path, name: str) -> list[str]:
    """Paths of ``path`` by another spelling: ``./`` and ``..`` in it, a symlink to its folder,
    a hard link (``name``: the links' file name)."""
    folder = tmp_path / "linked"
    if not folder.exists():
        folder.symlink_to(path.parent, target_is_directory=True)
        (tmp_path / "sub").mkdir()
    hard = tmp_path / "hard" / name
    hard.parent.mkdir(exist_ok=True)
    if not hard.exists():
        os.link(path, hard)
    return [
        str(path),
        f"{path.parent}/./{path.name}",
        f"{tmp_path}/sub/../{path.relative_to(tmp_path)}",
        str(folder / path.name),
        str(hard),
    ]


#: The refusal of a Parquet target on an existing file that is not a Parquet file.
_REFUSED_TARGET = "exists and is not a Parquet file; tclose replaces a table, never another file"


@pytest.mark.duckdb
@pytest.mark.parametrize("spelling", range(5))
def test_a_parquet_target_that_is_the_source_database_file_is_refused(
    sqlite_run, tmp_path, duck, spelling, capsys
):
    """A Parquet target that is the SQLite source's file is refused: the file's identity is compared
    with the source database file's, not the source table's. (An existing file that is not a Parquet
    file is refused first; a side file that does not exist yet meets the file comparison, below.)"""
    path = _spellings(sqlite_run.db, tmp_path, "demo.db")[spelling]
    document = sqlite_run.config()
    document["target"] = {"url": f"parquet:///{path}", "table": "demo", "if_exists": "replace"}
    before = _state(sqlite_run.db.parent)
    assert main(["-q", "run", str(sqlite_run.write(document, "t.yaml"))]) == 2
    assert _REFUSED_TARGET in capsys.readouterr().err
    after = _state(sqlite_run.db.parent)
    assert after.pop("t.yaml") and after == before


@pytest.mark.duckdb
@pytest.mark.parametrize("side", ["-wal", "-journal"])
def test_a_parquet_target_on_a_side_file_of_the_source_is_refused(sqlite_run, duck, side, capsys):
    document = sqlite_run.config()
    target = f"{sqlite_run.db}{side}"
    document["target"] = {"url": f"parquet:///{target}", "table": "demo", "if_exists": "replace"}
    before = _state(sqlite_run.db.parent)
    assert main(["-q", "run", str(sqlite_run.write(document, "t.yaml"))]) == 2
    assert "is the source's database file" in capsys.readouterr().err
    after = _state(sqlite_run.db.parent)
    assert after.pop("t.yaml") and after == before


@pytest.mark.duckdb
def test_a_parquet_target_that_is_a_duckdb_source_file_is_refused(
    tmp_path, duck, duckdb_file, capsys
):
    path = tmp_path / "clinic.duckdb"
    url = duckdb_file(path)
    connection = duck.connect(str(path))
    connection.execute(
        "CREATE TABLE clinic AS SELECT i AS id, i % 40 AS age, (i * 7) % 13 AS charge "
        "FROM range(60) t(i)"
    )
    connection.close()
    document = {
        "source": {"url": url, "table": "clinic", "key": "id"},
        "target": {"url": f"parquet:///{path}", "table": "clinic", "if_exists": "replace"},
        "attributes": {
            "age": {"role": "quasi_identifier", "type": "numeric"},
            "charge": {"role": "confidential", "type": "numeric"},
        },
        "privacy": {"k": 3, "t": 0.5},
        "algorithm": {"name": "t-first"},
    }
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(document))
    before = _state(tmp_path)
    assert main(["-q", "run", str(config)]) == 2
    assert _REFUSED_TARGET in capsys.readouterr().err
    assert _state(tmp_path) == before


@pytest.mark.parametrize("spelling", range(5))
def test_a_report_on_the_target_database_file_is_refused(sqlite_run, tmp_path, spelling, capsys):
    """A report on the target database file is refused, even while that file is empty (0 bytes:
    ``touch out.db``): the report would replace the release."""
    target = tmp_path / "out" / "out.db"
    target.parent.mkdir()
    target.touch()
    path = _spellings(target, tmp_path, "out.db")[spelling]
    document = sqlite_run.config(report={"json": path})
    document["target"]["url"] = f"sqlite:///{target}"
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    assert "is a file of the target database" in capsys.readouterr().err
    assert target.stat().st_size == 0


@pytest.mark.parametrize(
    ("key", "side"), [("json", "-journal"), ("html", "-wal"), ("json", "-shm")]
)
def test_a_report_on_a_side_file_of_the_source_is_refused(sqlite_run, key, side, capsys):
    """A report written as ``demo.db-journal`` would sit beside the source as its rollback
    journal (or write-ahead log) for SQLite to find on the next open."""
    before = _state(sqlite_run.db.parent)
    document = sqlite_run.config(report={key: f"{sqlite_run.db}{side}"})
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    assert "is a file of the source database" in capsys.readouterr().err
    after = _state(sqlite_run.db.parent)
    assert after.pop("run.yaml") and after == before


def test_the_json_and_html_report_on_one_file_are_refused(
    sqlite_run, tmp_path, monkeypatch, capsys
):
    """The JSON and the HTML report on one file are refused: the page would replace the audit
    record."""
    (tmp_path / "reports").mkdir()
    (tmp_path / "alias").symlink_to(tmp_path / "reports", target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    for html in ("reports/r.out", "./reports/r.out", str(tmp_path / "alias" / "r.out")):
        document = sqlite_run.config(report={"json": str(tmp_path / "reports/r.out"), "html": html})
        assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
        assert "name one file" in capsys.readouterr().err
        assert not (tmp_path / "reports" / "r.out").exists()
    assert sqlite_run.tables() == {"discharges"}


@pytest.mark.parametrize(
    "url",
    [
        "sqlite:///file:{db}?mode=ro&uri=true",
        "sqlite:///file:{db}?uri=true",
        "sqlite:///file:{db}?mode=rw&cache=shared&uri=true",
    ],
)
def test_a_sqlite_uri_target_naming_the_source_is_refused(sqlite_run, url, capsys):
    before = _state(sqlite_run.db.parent)
    document = sqlite_run.config()
    document["target"].update(url=url.format(db=sqlite_run.db), table="DISCHARGES")
    document["target"]["if_exists"] = "replace"
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    assert "is the source table" in capsys.readouterr().err
    after = _state(sqlite_run.db.parent)
    assert after.pop("run.yaml") and after == before


def test_a_read_only_source_uri_is_read_and_left_alone(sqlite_run, tmp_path):
    """A source opened with ``?mode=ro`` is read; the run publishes into another file and
    creates nothing next to the source (no journal)."""
    source = tmp_path / "ro" / "source.db"
    source.parent.mkdir()
    sqlite_run.db.rename(source)
    target = tmp_path / "target.db"
    sqlite3.connect(target).close()
    before = _state(source.parent)
    document = sqlite_run.config()
    document["source"]["url"] = f"sqlite:///file:{source}?mode=ro&uri=true"
    document["target"]["url"] = f"sqlite:///{target}"
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 0
    assert _state(source.parent) == before
    with sqlite3.connect(target) as connection:
        assert connection.execute("SELECT count(*) FROM discharges_anon").fetchone() == (400,)


def test_a_report_on_the_config_file_is_refused(sqlite_run, monkeypatch, capsys):
    config = sqlite_run.tmp_path / "run.yaml"
    document = sqlite_run.config(report={"json": f"./{config.name}"})
    monkeypatch.chdir(sqlite_run.tmp_path)
    text = sqlite_run.write(document).read_text()
    assert main(["-q", "run", str(config)]) == 2
    assert "is not a report of tclose" in capsys.readouterr().err
    assert config.read_text() == text and sqlite_run.tables() == {"discharges"}


def test_demo_never_replaces_a_database_it_did_not_make(tmp_path, capsys):
    """``tclose demo`` replaces only a ``demo.db`` it made (never a user's own database, also when a
    foreign report file stops it), and a folder in the way is a clear error (exit 2)."""
    folder = tmp_path / "d"
    folder.mkdir()
    with sqlite3.connect(folder / "demo.db") as connection:
        connection.execute("CREATE TABLE mine (a)")
    before = _state(folder)
    assert main(["-q", "demo", "--rows", "300", "--dir", str(folder)]) == 2
    assert "is not a database made by tclose demo" in capsys.readouterr().err
    assert _state(folder) == before
    (folder / "demo.db").unlink()
    (folder / "report.json").write_text('{"mine": 1}')
    assert main(["-q", "demo", "--rows", "300", "--dir", str(folder)]) == 2
    assert "is not a report of tclose" in capsys.readouterr().err
    assert sorted(os.listdir(folder)) == ["report.json"]
    (folder / "report.json").unlink()
    (folder / "demo.db").mkdir()
    assert main(["-q", "demo", "--rows", "300", "--dir", str(folder)]) == 2
    assert "exists and is not a file" in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["-q", "demo", "--rows", "300", "--dir", str(tmp_path / "file")]) == 2
    assert "a file is in the way" in capsys.readouterr().err
    assert (tmp_path / "file").read_text() == "x"


def test_demo_replaces_its_own_database(tmp_path):
    folder = tmp_path / "d"
    for _ in range(2):
        assert main(["-q", "demo", "--rows", "300", "--dir", str(folder)]) == 0
    with sqlite3.connect(folder / "demo.db") as connection:
        assert connection.execute("SELECT count(*) FROM discharges_anon").fetchone() == (300,)


@pytest.mark.duckdb
def test_init_force_never_overwrites_the_database_it_reads(tmp_path, duck, capsys):
    """``tclose init URL TABLE -o FILE --force`` never writes over the DuckDB, CSV, Parquet or
    SQLite source it reads, and an output folder is a clear error (exit 2)."""
    csv = tmp_path / "people.csv"
    csv.write_text("id,age\n1,30\n2,40\n")
    parquet = tmp_path / "people.parquet"
    duck.connect().execute(f"COPY (SELECT 1 AS id, 30 AS age) TO '{parquet}' (FORMAT parquet)")
    (tmp_path / "sub").mkdir()
    (tmp_path / "alias.csv").symlink_to(csv)
    before = _state(tmp_path)
    for url, table, output in [
        (f"csv:///{csv}", "people", str(csv)),
        (f"csv:///{csv}", "people", str(tmp_path / "alias.csv")),
        (f"csv:///{tmp_path}/sub/../people.csv", "people", f"{tmp_path}/./people.csv"),
        (f"parquet:///{parquet}", "people", str(parquet)),
    ]:
        assert main(["-q", "init", url, table, "-o", output, "--force"]) == 2, output
        assert "is a file of the database being read" in capsys.readouterr().err
    assert (
        main(["-q", "init", f"csv:///{csv}", "people", "-o", str(tmp_path / "sub"), "--force"]) == 2
    )
    assert "exists and is not a file" in capsys.readouterr().err
    assert _state(tmp_path) == before


@pytest.mark.duckdb
def test_a_parquet_target_replaces_only_a_parquet_file(sqlite_run, duck, capsys):
    """``if_exists: replace`` replaces only a Parquet file, never another file of the target's name
    (the configuration file itself: ``parquet:///run.yaml``, table ``run``)."""
    config = sqlite_run.tmp_path / "run.yaml"
    notes = sqlite_run.tmp_path / "notes.parquet"
    notes.write_text("my notes\n")
    for path, table in ((config, "run"), (notes, "notes")):
        document = sqlite_run.config()
        document["target"] = {"url": f"parquet:///{path}", "table": table, "if_exists": "replace"}
        text = sqlite_run.write(document).read_text()
        assert main(["-q", "run", str(config)]) == 2
        assert _REFUSED_TARGET in capsys.readouterr().err
        assert config.read_text() == text and notes.read_text() == "my notes\n"
    notes.write_bytes(b"")  # an empty file holds nothing to lose
    assert main(["-q", "run", str(config)]) == 0
    assert main(["-q", "run", str(config)]) == 0  # and a Parquet file is replaced
    assert duck.connect().execute(f"SELECT count(*) FROM '{notes}'").fetchone() == (400,)


def test_init_writes_its_file_whole_or_not_at_all(sqlite_run, tmp_path, monkeypatch, capsys):
    """``init -o`` writes its file whole or not at all (a full disk or a kill leaves the old file),
    and a file in the way of its folder is a clear error (exit 2)."""
    import errno

    import tclose.base.atomic

    url = f"sqlite:///{sqlite_run.db}"
    output = tmp_path / "init.yaml"
    assert main(["-q", "init", url, "discharges", "-o", str(output)]) == 0
    previous = output.read_text()

    def full(_descriptor: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tclose.base.atomic.os, "fsync", full)
    assert main(["-q", "init", url, "discharges", "-o", str(output), "--force"]) == 2
    assert "No space left on device" in capsys.readouterr().err
    assert output.read_text() == previous
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".init")) == []
    monkeypatch.undo()
    (tmp_path / "a_file").write_text("x")
    for inside in ("a_file/init.yaml", "a_file/sub/init.yaml"):
        assert main(["-q", "init", url, "discharges", "-o", str(tmp_path / inside)]) == 2
        assert "Cannot write" in capsys.readouterr().err


@pytest.mark.parametrize("option", ["--report", "--html"])
def test_a_report_path_ending_in_a_slash_is_refused(sqlite_run, tmp_path, option, capsys):
    """``--report reports/`` (a folder) is refused, never written as a file named ``reports``."""
    config = str(sqlite_run.write(sqlite_run.config()))
    assert main(["-q", "run", config, option, f"{tmp_path}/reports/"]) == 2
    assert "names a folder" in capsys.readouterr().err
    assert not (tmp_path / "reports").exists() and sqlite_run.tables() == {"discharges"}


@pytest.mark.duckdb
@pytest.mark.parametrize("kind", ["parquet", "sqlite"])
def test_a_duckdb_target_on_a_file_of_another_kind_is_refused(sqlite_run, duck, kind, capsys):
    """``duckdb:///x.parquet`` is refused: DuckDB would open the Parquet file as views in a database
    in memory, and the published table would vanish with the run. With DuckDB's ``sqlite``
    extension, ``duckdb:///source.db`` would write into the SQLite source outside the source =
    target guard."""
    folder = sqlite_run.tmp_path
    path = sqlite_run.db
    if kind == "parquet":
        path = folder / "discharges.parquet"
        duck.connect().execute(f"COPY (SELECT 1 AS id) TO '{path}' (FORMAT parquet)")
    document = sqlite_run.config()
    document["target"] = {"url": f"duckdb:///{path}", "table": "anon", "if_exists": "replace"}
    before = _state(folder)
    assert main(["-q", "run", str(sqlite_run.write(document, "t.yaml"))]) == 2
    assert "is not a DuckDB database" in capsys.readouterr().err
    after = _state(folder)
    assert after.pop("t.yaml") and after == before


def test_compare_html_never_replaces_a_file_it_did_not_write(sqlite_run, tmp_path, capsys):
    """``tclose compare CONFIG --html FILE`` never writes over the source database or any file that
    is not its own map."""
    config = str(sqlite_run.write(sqlite_run.config()))
    before = _state(tmp_path)
    for path in (str(sqlite_run.db), config, f"{tmp_path}/maps/"):
        assert main(["-q", "compare", config, "--k", "3", "--html", path]) == 2, path
        assert "--html: The report path" in capsys.readouterr().err
    assert _state(tmp_path) == before and not (tmp_path / "maps").exists()
    page = tmp_path / "map.html"
    for _ in range(2):  # its own page is replaced
        assert main(["-q", "compare", config, "--k", "3", "--html", str(page)]) == 0
    assert "tclose compare" in page.read_text()


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("notes.html", "<html><body><h1>My notes on tclose</h1><p>precious</p></body></html>"),
        ("notes.json", '{"tool": "my tool", "verification": "by hand", "notes": "precious"}'),
    ],
)
def test_a_file_that_only_mentions_tclose_is_not_replaced(sqlite_run, name, text, capsys):
    """An HTML file holding ``<html`` and the word ``tclose``, or a JSON object with keys ``tool``
    and ``verification``, is not taken for tclose's own and is not replaced."""
    notes = sqlite_run.tmp_path / name
    notes.write_text(text)
    document = sqlite_run.config(report={name.split(".")[1]: str(notes)})
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    assert "is not a report of tclose" in capsys.readouterr().err
    assert notes.read_text() == text


def test_a_report_name_too_long_for_its_temporary_file_is_refused_before_the_run(
    sqlite_run, tmp_path, capsys
):
    """A report name the folder takes but its temporary file (14 bytes longer) does not is refused
    before the run: never a published table without its report."""
    longest = os.pathconf(tmp_path, "PC_NAME_MAX")
    config = str(sqlite_run.write(sqlite_run.config()))
    name = "r" * (longest - 14 - len(".json"))
    assert main(["-q", "run", config, "--report", str(tmp_path / f"{name}x.json")]) == 2
    assert "its temporary file" in capsys.readouterr().err
    assert sqlite_run.tables() == {"discharges"}
    assert main(["-q", "run", config, "--report", str(tmp_path / f"{name}.json")]) == 0
    assert (tmp_path / f"{name}.json").is_file()


@pytest.mark.duckdb
def test_a_parquet_target_name_too_long_for_its_temporary_file_is_refused(
    sqlite_run, tmp_path, duck, capsys
):
    """A Parquet target name too long for its hidden temporary file (25 bytes longer than the
    target's name) is refused before any work, naming the limit."""
    stem = "t" * (os.pathconf(tmp_path, "PC_NAME_MAX") - len(".parquet") - 10)
    document = sqlite_run.config()
    document["target"] = {"url": f"parquet:///{tmp_path / stem}.parquet", "table": stem}
    before = _state(tmp_path)
    assert main(["-q", "run", str(sqlite_run.write(document, "t.yaml"))]) == 2
    assert "too long for its folder" in capsys.readouterr().err
    after = _state(tmp_path)
    assert after.pop("t.yaml") and after == before


def test_a_report_path_that_is_a_symlink_loop_is_no_internal_error(sqlite_run, tmp_path):
    """Comparing paths as files must not fail on a link that points to itself (``resolve()``
    raised RuntimeError on Python 3.11: exit 4): the report replaces the dangling link."""
    loop = tmp_path / "loop.json"
    loop.symlink_to(loop)
    config = str(sqlite_run.write(sqlite_run.config()))
    assert main(["-q", "run", config, "--report", str(loop)]) == 0
    assert not loop.is_symlink() and '"tool"' in loop.read_text()
