"""Checks made before a run writes anything: the source is never a table the run writes, and no
output file overwrites something that is not an output of tclose.

- :func:`refuse_same_table`: source, target and audit table are compared by the identity the
  database itself gives them (server, database, schema, folded name, real file, catalog object
  id; see :meth:`tclose.connectors.sql.SQLDatabase.table_identity`), never by spelling; nor may
  the target or the audit table be a table the source reads (a view's, a partition, an
  inheriting table: :class:`tclose.connector.TableDependencies`).
- :func:`refuse_reserved`: no source, target or audit table bears a name tclose keeps for
  itself (:func:`tclose.naming.reserved`).
- :func:`refuse_foreign_target`: ``if_exists: replace`` replaces only a release tclose
  published, still the table it published (:class:`tclose.connector.Releases`).
- :func:`refuse_unknown_reads`: nor one the source may read where the catalog cannot tell (a
  function, a macro, a foreign table).
- :func:`refuse_unreplaceable_target`: an existing target must be a table (not a view, ...)
  that the database will replace (no view or foreign key depends on it).
- :func:`refuse_foreign_file`: a report path that exists must be a report of tclose (JSON with
  tclose's keys, or tclose's HTML page); a database file (SQLite's header) is always refused.
- :func:`refuse_unwritable`: an output file's folder is a folder, and its name fits it.
- :func:`refuse_output_paths`: no report path, and no file target, is a file of the source's or
  the target's database (compared as files, not as spellings), and the two reports are two files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, cast

import numpy as np

from tclose.base.atomic import ATOMIC_NAME_EXTRA, name_max
from tclose.connector import (
    DatabaseFiles,
    PublishedRecord,
    Releases,
    TableDependencies,
    TablePerFile,
    capabilities_of,
    reads_unknown,
)
from tclose.errors import ConfigError, DataError
from tclose.naming import reserved

#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def refuse_same_table(
    source_db: Any, source: Any, target_db: Any, target: Any, audit: Any = None
) -> None:
    """:class:`ConfigError` (exit 2) when the target (or the audit table, ``report.table``)
    is the source table under another name or URL, or the audit table is the target; or when
    the target (or a partition dropped with it), or the audit table, is a table whose rows the
    source reads: a table the source view reads, a partition or an inheriting table of the
    source."""
    if not all(capabilities_of(db).table_identity for db in (source_db, target_db)):
        # A connector that cannot say what its tables are: compare what is known.
        def identify(db: Any, name: Any) -> tuple | None:
            return (id(db), name.schema, name.name)

    else:

        def identify(db: Any, name: Any) -> tuple | None:
            return db.table_identity(name)

    source_id = identify(source_db, source)
    if source_id is None:
        return  # no source table: reading it fails with its own message
    target_id = identify(target_db, target)
    if target_id == source_id:
        raise ConfigError(
            f"The target table {target} is the source table "
            f"{source} (the same table in the same database, named another way); tclose never "
            f"modifies its source. {another_target(target_db, str(target.with_suffix('_anon')))}",
            path=("target", "table"),
        )
    read = _related(source_db, "tables_read", source, source_id)
    if target_id is not None and read & _related(target_db, "tables_dropped", target, target_id):
        raise ConfigError(
            f"The target table {target} holds rows that the "
            f"source {source} reads (through a view, a partition or an inherited table); "
            f"replacing it would change the source, and tclose never modifies its source. "
            f"{another_target(target_db, str(target.with_suffix('_anon')))}",
            path=("target", "table"),
        )
    if audit is not None:
        audit_id = identify(target_db, audit)
        if audit_id is not None and audit_id in (source_id, target_id):
            which = "source" if audit_id == source_id else "target"
            raise ConfigError(
                f"The audit table {audit} is the {which} "
                f"table. Choose another name for report.table.",
                path=("report", "table"),
            )
        if audit_id is not None and audit_id in read:
            raise ConfigError(
                f"The audit table {audit} holds rows that the "
                f"source {source} reads (through a view, a partition or an inherited table); "
                f"a row appended to it would change the source. Choose another name for "
                f"report.table.",
                path=("report", "table"),
            )


def refuse_unknown_reads(source_db: Any, source: Any, target_db: Any, target: Any) -> None:
    """:class:`ConfigError` (exit 2) when the existing target is to be replaced and the source's
    database cannot list every table a read of the source reads (``tables_read`` unknown,
    :class:`tclose.connector.TablesRead`): a function, a macro or a foreign table may read the
    target, from this database or through another, and replacing it would change or break the
    source, or leave the run waiting on its own lock. The check is made whatever database the
    target is in: a foreign table or a function reaches other databases too."""
    if not capabilities_of(source_db).table_dependencies:
        return
    why = reads_unknown(cast(TableDependencies, source_db).tables_read(source))
    if why is None:
        return
    elsewhere = another_target(target_db, str(target.with_suffix("_2")))
    raise ConfigError(
        f"The target table {target} exists and cannot be "
        f"replaced: the source {source} may read it, and the database cannot tell, because "
        f"{why}. Replacing a table the source reads would change the source, which tclose "
        f"never does. Publish under a new name (a table that does not exist yet), or read "
        f"the tables the function reads through a view of tables only. {elsewhere} "
        f"Nothing was written.",
        path=("target", "table"),
    )


def refuse_reserved(source: Any, target: Any, audit: Any = None) -> None:
    """:class:`ConfigError` (exit 2) when the source, the target or the audit table bears a
    name tclose keeps for itself (:func:`tclose.naming.reserved`): its registries, the names
    it gives the tables a run creates, its staging schema."""
    for key, name in (("source", source), ("target", target), ("report", audit)):
        why = None if name is None else reserved(name)
        if why is not None:
            raise ConfigError(
                f"The table {name} cannot be used: {why}. "
                f"tclose reads and writes no table under such a name; choose another.",
                path=(key, "table"),
            )


def refuse_foreign_target(db: Any, name: Any) -> None:
    """:class:`ConfigError` (exit 2) when the existing target ``name`` is not a release tclose
    published, still the table it published (``release_problem``,
    :class:`tclose.connector.Releases`): ``if_exists: replace`` replaces nothing else, and a
    connector that cannot tell its releases replaces nothing."""
    capabilities = capabilities_of(db)
    problem = (
        cast(Releases, db).release_problem(name)
        if capabilities.releases
        else "its connector cannot tell the releases tclose published"
    )
    if problem is None:
        return
    if capabilities.table_per_file:  # a database that is one file (Parquet)
        file = cast(TablePerFile, db).path
        what, remedy = f"file {file}", f"delete it yourself ({file})"
    else:
        what, remedy = f"table {name}", f"drop it yourself (DROP TABLE {name})"
    elsewhere = another_target(db, str(name.with_suffix("_2")))
    raise ConfigError(
        f"The target {what} exists and is not a release "
        f"tclose published: {problem}. if_exists: replace replaces only tclose's own releases. "
        f"If it may go, {remedy} and run again; otherwise publish elsewhere. {elsewhere} "
        f"Nothing was written.",
        path=("target", "table"),
    )


def another_target(db: Any, table: str) -> str:
    """The advice to publish elsewhere, as a sentence: another table (``table``, say), or, in a
    database that is one file holding one table (:class:`tclose.connector.TablePerFile`), the
    file beside it to name in ``target.url`` with its table (another table name alone would be
    refused: the file's table is named after the file)."""
    if capabilities_of(db).table_per_file:
        url, name = cast(TablePerFile, db).target_beside(table)
        return f"Publish into another file: target.url: {url} and target.table: {name}."
    return f"Choose another target table (e.g. {table})."


#: The kinds of relation (``relation_kind``) a run never replaces: it swaps one table for another.
NOT_TABLES = ("view", "materialized view", "foreign table", "index", "sequence", "type")


def refuse_unreplaceable_target(db: Any, name: Any) -> None:
    """:class:`ConfigError` (exit 2) when the existing target is not a table (a view, ...):
    the database refuses to drop it as a table at the publish, after all the work (PostgreSQL,
    SQLite, DuckDB), or the release replaced a user's view (MariaDB); or when the database's
    own catalog binds something else to the table (``replace_blockers``: on PostgreSQL anything
    ``pg_depend`` or ``pg_inherits`` records — a view, a foreign key, a trigger, a parent or
    child table; on SQLite a view reading it), which a replace would drop, detach or fail on."""
    import sqlalchemy as sa

    capabilities = capabilities_of(db)
    if not capabilities.published_record:
        return
    with db.session(read_only=True) as session:
        record = cast(PublishedRecord, session)
        kind = record.relation_kind(sa.Table(name.name, sa.MetaData(), schema=name.schema))
    if kind in NOT_TABLES:
        raise ConfigError(
            f"The target {name} is a {kind}, not a table; "
            f"publishing replaces a table (if_exists: replace), never a {kind}. Drop it, or "
            f"choose another target table.",
            path=("target", "table"),
        )
    dependencies = cast(TableDependencies, db)
    found = dependencies.replace_blockers(name) if capabilities.table_dependencies else []
    if found:
        raise ConfigError(
            f"The target table {name} cannot be replaced: "
            f"{'; '.join(found)}. The {db.dialect} catalog binds these "
            f"to it: replacing it would drop them with it, detach it from them or fail. "
            f"tclose replaces only a table bound to nothing else; drop or change them, or "
            f"choose another target table.",
            path=("target", "table"),
        )


def _related(db: Any, method: str, name: Any, identity: tuple) -> set[tuple]:
    """The identities ``db.<method>(name)`` gives (``tables_read`` or ``tables_dropped``, see
    :class:`tclose.connector.TableDependencies`); only ``identity`` for a connector without
    it."""
    if not capabilities_of(db).table_dependencies:
        return {identity}
    dependencies = cast(TableDependencies, db)
    related = dependencies.tables_read if method == "tables_read" else dependencies.tables_dropped
    return set(related(name)) | {identity}


#: Where a file path was given: its key path in the configuration, or the text that opens the
#: message when it is not in the configuration (a command-line option, ``"--html: "``).
Where = tuple[str, ...] | str


def refusal(where: Where, problem: str) -> ConfigError:
    """The :class:`ConfigError` of ``problem`` given at ``where``
    (:meth:`~tclose.errors.ConfigError.given_at`)."""
    return ConfigError.given_at(where, problem)


def refuse_foreign_file(
    path: str | None, key: str, where: Where | None = None, page: str = "report"
) -> None:
    """:class:`ConfigError` (exit 2) if ``path`` exists and is not a report tclose wrote
    (``key``: ``json`` or ``html``; ``where``: where the path was given, by default the
    config's ``report.<key>``; ``page``: the kind of page an ``html`` path may replace, a
    :data:`PAGE_TITLES` key: an audit page is never replaced by a map, nor a map by one)."""
    if not path:
        return
    where = ("report", key) if where is None else where
    if path.endswith(("/", os.sep)):  # Path() drops the slash: the report became a file
        raise refusal(
            where,
            f"The report path {path} names a folder; name the file to write in it "
            f"(e.g. {path}run.{key}).",
        )
    file = Path(path)
    if not file.exists():
        return
    if not file.is_file():
        raise refusal(where, f"The report path {path} exists and is not a file.")
    with file.open("rb") as handle:
        head = handle.read(4096)
    if head.startswith(SQLITE_HEADER):
        raise refusal(
            where,
            f"The report path {path} is a SQLite database file; tclose never overwrites "
            f"it. Choose another report path.",
        )
    if file.stat().st_size == 0:
        return  # an empty file holds nothing to lose
    other = _other_page(head, key, page)
    if other:
        raise refusal(
            where, f"The report path {path} is {other}; it is not overwritten. Choose another path."
        )
    if not _is_report(file, head, key):
        raise refusal(
            where,
            f"The report path {path} exists and is not a report of tclose; it is not "
            f"overwritten. Choose another path, or remove the file.",
        )


def refuse_unwritable(path: str | None, what: str, where: Where) -> None:
    """:class:`ConfigError` (exit 2), before any work, when the file ``path`` cannot be written:
    a file is in the way of its folder, or its name is too long for the folder once the
    temporary file's bytes (:data:`~tclose.base.atomic.ATOMIC_NAME_EXTRA`) are added. ``what``: the
    file in the message (``report.json file``); ``where``: where the path was given."""
    if not path:
        return
    probe = Path(path).parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise refusal(where, f"Cannot write the {what} {path}: {probe} is not a folder.")
    if not probe.is_dir():
        return
    name = os.fsencode(Path(path).name)
    longest = name_max(probe)
    if longest is not None and len(name) + ATOMIC_NAME_EXTRA > longest:  # its temporary file
        raise refusal(
            where,
            f"Cannot write the {what} {path}: its name is {len(name)} bytes long, and "
            f"the folder takes names of at most {longest} bytes ({ATOMIC_NAME_EXTRA} more for "
            f"its temporary file).",
        )


def database_files(db: Any) -> list[Path]:
    """The files that hold database ``db`` (its connector's ``files()``; none for a server or a
    connector that does not say)."""
    return list(cast(DatabaseFiles, db).files()) if capabilities_of(db).database_files else []


def same_file(one: str | Path, other: str | Path) -> bool:
    """Whether two paths name one file: the same real path (``./``, ``..``, symbolic links),
    or, both existing, the same device and inode (hard links)."""
    if os.path.realpath(one) == os.path.realpath(other):  # never raises on a symlink loop
        return True
    try:
        return os.path.samefile(one, other)
    except OSError:  # one of them does not exist (or cannot be reached)
        return False


def shares_a_file(one: Any, other: Any) -> bool:
    """Whether databases ``one`` and ``other`` are kept in a common file (:func:`same_file`,
    among their connectors' ``files()``)."""
    others = database_files(other)
    return any(same_file(mine, theirs) for mine in database_files(one) for theirs in others)


def refuse_output_paths(
    reports: dict[str, str | None], source_db: Any, target_db: Any, target_file: Path | None
) -> None:
    """:class:`ConfigError` (exit 2) when a file the run writes would replace another one it
    must keep, however spelled: a report path (``reports``: key → path) that is a file of the
    source's or the target's database (a SQLite or DuckDB file and its side files, a Parquet
    file: the report would replace the source, or the release just published), the other
    report (one would replace the other), or a file ``target_file`` (a file target, e.g. a
    Parquet file, which publishing replaces whole) that is a file of the source's database."""
    source_files, target_files = database_files(source_db), database_files(target_db)
    if target_file is not None:
        for file in source_files:
            if same_file(target_file, file):
                raise ConfigError(
                    f"The target file {target_file} is the "
                    f"source's database file {file}; publishing would replace the source, and "
                    f"tclose never modifies its source. Choose another target file.",
                    path=("target", "url"),
                )
    given = [(key, path) for key, path in reports.items() if path]
    for key, path in given:
        where = ("report", key)
        if target_file is not None and same_file(path, target_file):
            raise refusal(
                where,
                f"The report path {path} is the target file {target_file}; the report "
                f"would replace the release. Choose another report path.",
            )
        for which, files in (("source", source_files), ("target", target_files)):
            for file in files:
                if same_file(path, file):
                    raise refusal(
                        where,
                        f"The report path {path} is a file of the {which} database "
                        f"({file}); the report would replace it. Choose another report path.",
                    )
    if len(given) == 2 and same_file(given[0][1], given[1][1]):
        raise ConfigError(
            f"The report paths report.json and report.html "
            f"name one file ({given[1][1]}); the HTML page would replace the JSON report. "
            f"Choose two paths.",
            path=("report", "html"),
        )


#: The title that opens each kind of tclose's pages: the audit report (``tclose run --html``,
#: ``tclose report``) and the risk-utility map (``tclose compare --html``).
PAGE_TITLES = {"report": "<title>tclose audit report: ", "map": "<title>tclose compare: "}

#: What each kind of page is, in a message.
_PAGE_NAMES = {"report": "the audit page of a run", "map": "a risk-utility map of tclose compare"}


def _other_page(head: bytes, key: str, page: str) -> str | None:
    """What the page ``head`` opens is when it is tclose's page of a kind other than ``page``
    (a run's audit page that ``compare --html`` must not replace, say); ``None`` otherwise."""
    if key != "html":
        return None
    text = head.decode("utf-8", "replace")
    if not text.startswith("<!DOCTYPE html>"):
        return None
    others = [kind for kind, title in PAGE_TITLES.items() if kind != page and title in text]
    return _PAGE_NAMES[others[0]] if others else None


def _is_report(file: Path, head: bytes, key: str) -> bool:
    """Whether ``file`` is a page or an audit report tclose wrote: a page of tclose's title (a
    user's page that merely mentions tclose is not one), or JSON whose ``tool.name`` is
    ``tclose`` with a ``verification``."""
    if key == "html":
        text = head.decode("utf-8", "replace")
        return text.startswith("<!DOCTYPE html>") and any(t in text for t in PAGE_TITLES.values())
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if not isinstance(document, dict) or "verification" not in document:
        return False
    tool = document.get("tool")
    return isinstance(tool, dict) and tool.get("name") == "tclose"


#: The range of a 64-bit signed integer column, as floats: a rounded value must lie in
#: ``[-2**63, 2**63)`` (``2**63`` itself is a float64 that no BIGINT holds).
_INT64 = (-(2.0**63), 2.0**63)


def refuse_overflow(values: dict[str, np.ndarray], attributes: Any, keys: np.ndarray) -> None:
    """:class:`DataError` (exit 3) naming the column and rows whose published value does not
    fit the column it is written to: a rounded QI must be a finite 64-bit integer, any other
    replaced value finite. Such a value is never written (a cast would wrap it around)."""
    for column, column_values in values.items():
        spec = attributes[column]
        if column_values.dtype.kind != "f":
            continue
        bad = ~np.isfinite(column_values)
        if spec.round:
            rounded = np.rint(np.where(bad, 0.0, column_values))
            bad |= (rounded < _INT64[0]) | (rounded >= _INT64[1])
        if bad.any():
            shown = ", ".join(str(k) for k in keys[bad][:5]) + (", ..." if bad.sum() > 5 else "")
            raise DataError(
                f"The quasi-identifier {column!r} would be published out of range in "
                f"{int(bad.sum())} row(s) (rows {shown}): its cluster values do not fit "
                f"{'a 64-bit integer column' if spec.round else 'a double precision column'}. "
                f"Nothing was written; use round: false, or rescale the column."
            )
