"""Built-in plugin ``audit_table``: one row per run in an audit table of the target database.

Enabled by ``report.table`` in the YAML. After every run that reached verification (published,
dry run or failed verification) it appends a row to that table in the target's database, creating
the table on first use, so the history of releases can be queried with SQL::

    SELECT started_at, target_table, k, k_achieved, t, t_achieved, verified, published
    FROM tclose_audit ORDER BY started_at;

The row holds the run id, the start and end times (UTC), the configuration digest, the source and
target tables, row counts, k and t requested and achieved (``t_achieved`` is the largest EMD over
the confidential attributes), the algorithm, the verdict, and the whole audit report as JSON
(``JSONB`` on PostgreSQL). The report carries no secret and no individual value, so neither does
the table. A table name may be schema-qualified (``audit.tclose_runs``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, cast

from tclose.errors import ConfigError, DataError
from tclose.hookspecs import hookimpl

if TYPE_CHECKING:  # imported when used: registering the plugin does not need SQLAlchemy
    import sqlalchemy as sa

#: The audit table's columns, in order (a pre-existing table must have at least these).
COLUMNS = (
    "run_id",
    "started_at",
    "finished_at",
    "config_sha256",
    "source_table",
    "target_table",
    "rows_in",
    "rows_out",
    "rows_set_aside",
    "k",
    "k_achieved",
    "t",
    "t_achieved",
    "algorithm",
    "verified",
    "published",
    "dry_run",
    "tool_version",
    "report",
)


def audit_table(name: str, metadata: sa.MetaData | None = None) -> sa.Table:
    """The audit table's definition; ``name`` may be ``schema.table``."""
    import sqlalchemy as sa
    from sqlalchemy.dialects import mysql, postgresql

    schema, _, table = name.rpartition(".")
    report_type = (
        sa.JSON()
        .with_variant(postgresql.JSONB(), "postgresql")
        .with_variant(mysql.LONGTEXT(), "mysql", "mariadb")
    )
    return sa.Table(
        table,
        metadata or sa.MetaData(),
        sa.Column("run_id", sa.String(32), primary_key=True),
        sa.Column("started_at", sa.DateTime, nullable=False),
        sa.Column("finished_at", sa.DateTime),
        sa.Column("config_sha256", sa.String(64)),
        sa.Column("source_table", sa.String(255)),
        sa.Column("target_table", sa.String(255)),
        sa.Column("rows_in", sa.BigInteger),
        sa.Column("rows_out", sa.BigInteger),
        sa.Column("rows_set_aside", sa.BigInteger),
        sa.Column("k", sa.Integer),
        sa.Column("k_achieved", sa.Integer),
        sa.Column("t", sa.Float),
        sa.Column("t_achieved", sa.Float),
        sa.Column("algorithm", sa.String(100)),
        sa.Column("verified", sa.Boolean),
        sa.Column("published", sa.Boolean),
        sa.Column("dry_run", sa.Boolean),
        sa.Column("tool_version", sa.String(40)),
        sa.Column("report", report_type),
        schema=schema or None,
    )


def audit_row(report: dict[str, Any]) -> dict[str, Any]:
    """The audit table row of one report."""
    import json

    from tclose.base.jsonsafe import finite_report

    # Strict JSON whatever the report holds (PostgreSQL's jsonb refuses NaN, and inside the
    # publishing transaction the refusal would fail the publish): a report of a run is already
    # finite (build_report), one read back from a file by `tclose verify --report` may not be.
    report = finite_report(json.loads(json.dumps(report, default=str)))
    run = report.get("run", {})
    privacy = report.get("privacy", {})
    t_values = list((privacy.get("t_achieved") or {}).values())
    return {
        "run_id": run.get("id"),
        "started_at": _timestamp(run.get("started")),
        "finished_at": _timestamp(run.get("finished")),
        "config_sha256": report.get("config_sha256"),
        "source_table": report.get("source", {}).get("table"),
        "target_table": report.get("target", {}).get("table"),
        "rows_in": report.get("source", {}).get("rows"),
        "rows_out": report.get("target", {}).get("rows"),
        "rows_set_aside": report.get("source", {}).get("rows_set_aside", 0),
        "k": privacy.get("k"),
        "k_achieved": privacy.get("k_achieved"),
        "t": privacy.get("t"),
        # unknown (null) if any attribute's is: the largest known one may not be the worst
        "t_achieved": max(t_values) if t_values and None not in t_values else None,
        "algorithm": report.get("algorithm", {}).get("name"),
        "verified": bool(report.get("verification", {}).get("passed")),
        "published": bool(run.get("published")),
        "dry_run": bool(run.get("dry_run")),
        "tool_version": report.get("tool", {}).get("version"),
        "report": report,
    }


def append_report(engine: sa.Engine, table_name: str, report: dict[str, Any]) -> None:
    """Create the audit table if needed and append the row of ``report``.

    Raises:
        DataError: the table exists without the audit columns.
    """
    with engine.begin() as connection:
        append_with(connection, table_name, report)


def append_with(connection: sa.Connection, table_name: str, report: dict[str, Any]) -> None:
    """Create the audit table if needed and append the row of ``report`` with ``connection``,
    in its current transaction.

    Raises:
        DataError: the table exists without the audit columns.
    """
    import sqlalchemy as sa

    table = audit_table(table_name)
    row = audit_row(report)
    if connection.dialect.name in ("mysql", "mariadb"):
        import json

        row["report"] = json.dumps(row["report"], allow_nan=False)
    table.create(connection, checkfirst=True)
    present = [
        c["name"] for c in sa.inspect(connection).get_columns(table.name, schema=table.schema)
    ]
    problem = shape_problem(table_name, present)
    if problem:
        raise DataError(f"{problem}; point report.table at a new table name.")
    connection.execute(table.insert(), [row])


def shape_problem(table_name: Any, present: Iterable[str]) -> str | None:
    """Why an existing table whose columns are ``present`` cannot be the audit table (it lacks
    some of :data:`COLUMNS`), or ``None``."""
    have = set(present)
    missing = [c for c in COLUMNS if c not in have]
    if not missing:
        return None
    return f"The audit table {table_name} exists but lacks the column(s) {', '.join(missing)}"


@hookimpl
def run_publishing(report: dict[str, Any], config: Any, connection: Any) -> None:
    """Append the run to ``report.table`` in the publishing transaction (SQLite, PostgreSQL),
    so that the release and its audit row commit together."""
    name = getattr(config, "report_table", None)
    if name:
        append_with(connection, name, report)


@hookimpl
def run_finished(report: dict[str, Any], config: Any) -> None:
    """Append the run to ``report.table`` in the target database, if configured."""
    name = getattr(config, "report_table", None)
    if not name or report.get("run", {}).get("audited_in_publish"):
        return
    import sqlalchemy as sa

    engine = _engine(config.target.url, config.target.password_file)
    try:
        append_report(engine, name, report)
    except sa.exc.IntegrityError:
        if not replace_rebuilt(engine, name, report):
            raise
    finally:
        engine.dispose()


def replace_rebuilt(engine: sa.Engine, table_name: str, report: dict[str, Any]) -> bool:
    """Replace the row of ``report``'s run by ``report``'s if ``tclose verify`` rebuilt it
    (``run.rebuilt_by``): on MariaDB/MySQL a verify between the publish (``RENAME TABLE``
    commits by itself) and the run's own audit row finds no row and rebuilds one; the run's
    record is the complete one. ``False`` (nothing changed) if the row is the run's own."""
    import json

    import sqlalchemy as sa

    table = audit_table(table_name)
    row = audit_row(report)
    if engine.dialect.name in ("mysql", "mariadb"):
        row["report"] = json.dumps(row["report"], allow_nan=False)
    with engine.begin() as connection:
        found = connection.execute(
            sa.select(table.c.report).where(table.c.run_id == row["run_id"]).with_for_update()
        ).first()
        recorded = found[0] if found else None
        if isinstance(recorded, str):
            recorded = json.loads(recorded)
        if not (recorded or {}).get("run", {}).get("rebuilt_by"):
            return False
        connection.execute(table.update().where(table.c.run_id == row["run_id"]).values(row))
    return True


def _engine(url: str, password_file: str | None) -> sa.Engine:
    """The SQLAlchemy engine of the target's registered connector (its driver and URL rules,
    e.g. ``postgresql://`` through psycopg 3: :class:`tclose.connector.SQLAlchemyEngine`);
    :class:`DataError` when the connector reaches its database otherwise."""
    from tclose.base.registry import dialect_of, load_registry
    from tclose.connector import SQLAlchemyEngine, capabilities_of

    database = load_registry().connector_for(dialect_of(url)).connect(url, password_file)
    if not capabilities_of(database).sqlalchemy_engine:
        raise DataError(
            f"The connector of {database.redacted_url} reaches it without a SQLAlchemy engine: "
            f"the audit table cannot be written there."
        )
    return cast(SQLAlchemyEngine, database).engine


def _timestamp(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def has_run(engine: sa.Engine, table_name: str, run_id: str) -> bool:
    """Whether the audit table ``table_name`` exists and holds a row of run ``run_id``."""
    import sqlalchemy as sa

    table = audit_table(table_name)
    with engine.connect() as connection:
        if not sa.inspect(connection).has_table(table.name, schema=table.schema):
            return False
        found = connection.execute(
            sa.select(table.c.run_id).where(table.c.run_id == run_id).limit(1)
        )
        return found.first() is not None


def rebuilt_report(
    config: Any, run_id: str, verification: Any, run_report: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The report of run ``run_id`` as ``tclose verify`` rebuilds it from what it measured.

    ``run_report`` is the run's own report (``--report``, same run id): then it is the base and
    keeps the run's times; otherwise ``started``/``finished`` are the time of the rebuild (the
    run's own times were lost with its report) and the row counts of the source are unknown.
    Either way ``verification`` (:class:`tclose.core.verify.Verification`) is today's verdict
    and ``run.rebuilt_by`` marks the row.
    """
    import copy
    import json

    from tclose.base.jsonsafe import finite_report, to_json
    from tclose.base.version import __version__

    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    passed, checks = bool(verification.passed), verification.checks
    rebuilt = {"rebuilt_by": "tclose verify", "rebuilt_at": now}
    if run_report is not None:
        report = copy.deepcopy(run_report)
        report["run"].update(rebuilt, published=True)
        report["verification"] = {
            **report.get("verification", {}),
            "passed": passed,
            "checks": checks,
            "at_run": run_report.get("verification", {}).get("passed"),
        }
        # the checks measured now may hold NaN (an EMD of a broken distance): strict JSON
        return json.loads(to_json(finite_report(report)))
    rebuilt["times"] = "started and finished are the time of the rebuild, not of the run"
    report = {
        "tool": {"name": "tclose", "version": __version__},
        "run": {"id": run_id, "started": now, "finished": now, "dry_run": False, "published": True}
        | rebuilt,
        "config_sha256": config.digest(),
        "source": {"table": config.source.table, "rows": None},
        "target": {
            "table": config.target.table,
            "rows": int(sum(verification.class_sizes)),
            "content_digest": verification.content_digest,
        },
        "algorithm": {"name": config.algorithm},
        "privacy": {
            "k": config.k,
            "t": config.t,
            "k_achieved": verification.k_achieved,
            "t_achieved": verification.t_achieved,
        },
        "verification": {"passed": passed, "checks": checks},
    }
    # NumPy numbers as JSON numbers, as in a run's report; a NaN EMD as null
    return json.loads(to_json(finite_report(report)))


@hookimpl
def rebuild_run_record(
    config: Any, run_id: str, verification: Any, report: dict[str, Any] | None
) -> bool:
    """``tclose verify``: the audit row of run ``run_id`` in ``report.table``, if configured
    and missing (:func:`rebuild_record`)."""
    if not getattr(config, "report_table", None):
        return False
    return rebuild_record(config, run_id, verification, report)


@hookimpl
def check_run(config: Any, target_database: Any, tables: dict[str, Any]) -> None:
    """Refuse a run whose ``report.table`` exists without the audit columns
    (:class:`~tclose.errors.ConfigError`, exit 2): its row could not be written, which stops a
    publish on SQLite and PostgreSQL after all the work and, on MariaDB/MySQL, where the row is
    written after the publish, leaves a release without its audit row."""
    name = tables.get("report.table")
    if name is None or not target_database.exists(name):
        return
    problem = shape_problem(name, target_database.table(name).columns.keys())
    if problem:
        raise ConfigError(
            f"{problem}; point report.table at a new table "
            f"name, or at an audit table of tclose. Nothing was written.",
            path=("report", "table"),
        )


def rebuild_record(
    config: Any, run_id: str, verification: Any, run_report: dict[str, Any] | None = None
) -> bool:
    """Append the audit row of run ``run_id`` to ``config.report_table`` if it has none (the run
    was killed between its publish and its report); ``True`` if a row was appended.

    Raises:
        DataError: the table exists without the audit columns.
        sqlalchemy.exc.SQLAlchemyError: the row could not be written (e.g. no write access).
    """
    import sqlalchemy as sa

    if run_report is not None and run_report.get("run", {}).get("id") != run_id:
        run_report = None  # another run's record: not this one's
    engine = _engine(config.target.url, config.target.password_file)
    try:
        if has_run(engine, config.report_table, run_id):
            return False
        report = rebuilt_report(config, run_id, verification, run_report)
        try:
            append_report(engine, config.report_table, report)
        except sa.exc.IntegrityError:
            if has_run(engine, config.report_table, run_id):
                return False  # another verify rebuilt it meanwhile
            raise
        return True
    finally:
        engine.dispose()
