"""``tclose init``: from a table's definition to a commented YAML skeleton of a run.

The skeleton lists every column on its own line with the column's SQL type, a proposed attribute
type and the role ``other`` (pass through unchanged), so that every column has a declared fate
and the user's only job is to choose the roles. A column the skeleton would be unsafe to publish
unchanged starts as ``identifier`` (never published) instead: the row key, a column declared
unique (a ``UNIQUE`` constraint or index: it links the release to the source), and a column whose
name looks like a direct identifier (:func:`looks_identifying`). Comments explain each choice.
Once at least one column is a ``quasi_identifier`` (and, with ``privacy.t``, one is
``confidential``), the file loads with :func:`tclose.base.config.load_config` as written, and runs:
its row key (:func:`proposed_key`) and target (:func:`proposed_target`: a Parquet file beside a
file source) are ones a run takes.

Only the table's definition is read: no row, no count, no data value.
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import sqlalchemy as sa
import yaml

from tclose.base.config import ATTRIBUTE_TYPES, criterion_keys
from tclose.connector import SQLAlchemyEngine, TablePerFile, capabilities_of, open_read_only
from tclose.core.entities import looks_like_entity
from tclose.errors import ConfigError
from tclose.naming import TableName

#: The comment of a proposed ``source.entity``.
ENTITY_HINT = (
    "proposed from its name: the person, household or firm of a row (its values may repeat); "
    "every class then holds rows of k distinct ones; never published. Remove it if each row "
    "is its own entity"
)

#: The environment variable written in place of a password found in the URL.
PASSWORD_VARIABLE = "TCLOSE_DB_PASSWORD"

_IDENTIFIER_HINTS = re.compile(
    r"(^|_)(name|first_?name|last_?name|surname|email|e_?mail|phone|mobile|ssn|passport|"
    r"address|street|iban|account|license|licence|ip|username|login|id|uuid|guid|mrn)($|_)"
)


def looks_identifying(name: str) -> bool:
    """Whether a column name looks like a direct identifier (``email``, ``last_name``,
    ``customer_id``): its words, split at non-letters and at camelCase humps (``emailAddress``,
    ``First Name``, ``E-Mail``), include one of :data:`_IDENTIFIER_HINTS`."""
    words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    words = re.sub(r"[^0-9a-zA-Z]+", "_", words).lower()
    return _IDENTIFIER_HINTS.search(words) is not None


@dataclass(frozen=True)
class ColumnInfo:
    """What ``tclose init`` knows of a column: its definition, never its values."""

    name: str
    sql_type: str
    attribute_type: str
    primary_key: bool = False
    nullable: bool = True
    #: declared unique on its own (a ``UNIQUE`` constraint or unique index of this column alone)
    unique: bool = False
    #: of a type a row key is usually of: an integer, a text or a UUID (not a float or a date)
    key_type: bool = False


def attribute_type_of(column_type: sa.types.TypeEngine) -> str:
    """The attribute type proposed for a SQL type: ``numeric`` for numbers, ``date`` for dates,
    ``datetime`` for dates with a time of day (``DATETIME``, ``TIMESTAMP``, with or without a
    time zone), ``ordinal`` for times of day and intervals, ``nominal`` for everything else
    (text, booleans, enumerations)."""
    if isinstance(column_type, sa.Boolean):
        return "nominal"
    if isinstance(column_type, (sa.Integer, sa.Numeric, sa.Float)):
        return "numeric"
    if isinstance(column_type, sa.DateTime):
        return "datetime"
    if isinstance(column_type, sa.Date):
        return "date"
    if isinstance(column_type, (sa.Time, sa.Interval)):
        return "ordinal"
    return "nominal"


def describe_columns(table: sa.Table, dialect: sa.Dialect | None = None) -> list[ColumnInfo]:
    """The :class:`ColumnInfo` of every column of a reflected table, in table order."""
    unique = {
        next(iter(c.columns)).name
        for c in table.constraints
        if isinstance(c, sa.UniqueConstraint) and len(c.columns) == 1
    }
    unique |= {
        next(iter(i.columns)).name for i in table.indexes if i.unique and len(i.columns) == 1
    }
    infos = []
    for column in table.columns:
        try:
            sql_type = column.type.compile(dialect=dialect)
        except Exception:  # a type the dialect cannot render: show SQLAlchemy's name
            sql_type = type(column.type).__name__.upper()
        infos.append(
            ColumnInfo(
                str(column.name),
                sql_type,
                attribute_type_of(column.type),
                bool(column.primary_key),
                bool(column.nullable),
                bool(column.unique) or column.name in unique,
                isinstance(column.type, (sa.Integer, sa.String, sa.Uuid))
                and not isinstance(column.type, sa.Boolean),
            )
        )
    return infos


@dataclass(frozen=True)
class SourceOutline:
    """What ``tclose init`` knows of a source table: its columns, whether its database
    identifies rows without a key, and where its release can be published."""

    columns: list[ColumnInfo]
    #: the database identifies rows without a key column (SQLite's ``rowid``)
    implied_key: bool = False
    #: the ``target.url`` to write (``None``: the source's database) and ``target.table``
    target: tuple[str | None, str] | None = None


def proposed_target(database: Any, table: str) -> tuple[str | None, str]:
    """``(target.url, target.table)`` for the release of ``table``: ``<table>_anon`` beside it,
    in the same schema of the same database (``target.url`` left out), or, for a database that
    is one file holding one table (:class:`tclose.connector.TablePerFile`: Parquet, CSV), the
    Parquet file ``<table>_anon.parquet`` beside the source file."""
    anon = str(TableName.parse(table).with_suffix("_anon"))
    if capabilities_of(database).table_per_file:
        url, name = cast(TablePerFile, database).target_beside(TableName.parse(anon).name)
        return url, name
    return None, anon


def inspect_table(
    url: str, table: str, password_file: str | None = None, registry: Any = None
) -> SourceOutline:
    """Reflect ``table`` (``schema.table`` allowed) through the registered connector of the URL.

    Raises:
        DataError: the database cannot be reached or the table does not exist.
        ConfigError: no connector serves the URL's dialect.
    """
    from tclose.base.registry import dialect_of, load_registry

    registry = registry or load_registry()
    database = open_read_only(registry.connector_for(dialect_of(url)).connect(url, password_file))
    reflected = database.table(TableName.parse(table))
    dialect = (
        cast(SQLAlchemyEngine, database).engine.dialect
        if capabilities_of(database).sqlalchemy_engine
        else None
    )
    columns = describe_columns(reflected, dialect)
    implied = False
    if not any(c.primary_key for c in columns):
        try:
            database.row_key(reflected, None)  # the dialect's row id, if it has one
            implied = True
        except ConfigError:  # none: a key must be named
            pass
    return SourceOutline(columns, implied, proposed_target(database, table))


def refuse_output_on_database(
    output: str | Path, url: str, password_file: str | None = None, registry: Any = None
) -> None:
    """:class:`ConfigError` (exit 2) if ``output`` (the config file ``tclose init`` would
    write) is a folder, or a file of the database at ``url`` however spelled (a DuckDB, Parquet
    or CSV file, a SQLite side file): ``--force`` replaces a config file, never a database."""
    from tclose.base.registry import dialect_of, load_registry
    from tclose.core.guards import database_files, same_file

    path = Path(output)
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path} exists and is not a file; choose another output file.")
    registry = registry or load_registry()
    database = open_read_only(registry.connector_for(dialect_of(url)).connect(url, password_file))
    for file in database_files(database):
        if same_file(path, file):
            raise ConfigError(
                f"{path} is a file of the database being read ({file}); it is never "
                f"overwritten. Choose another output file."
            )


def url_for_file(url: str) -> str:
    """The URL to write in the file: a password in it becomes ``${TCLOSE_DB_PASSWORD}``, and a
    credential query parameter ``name`` becomes ``${TCLOSE_DB_NAME}`` (see
    :mod:`tclose.base.redaction`)."""
    from sqlalchemy.engine import make_url

    from tclose.base.redaction import is_credential, redact_url, scrub

    try:
        parsed = make_url(url)
    except Exception:
        return redact_url(url)
    if parsed.password is None and not any(is_credential(k) for k in parsed.query):
        return url
    variables = {}
    if parsed.password is not None:
        variables["tclosepasswordplaceholder"] = PASSWORD_VARIABLE
        parsed = parsed.set(password="tclosepasswordplaceholder")
    query = dict(parsed.query)
    for index, name in enumerate(parsed.query):
        if is_credential(name):
            token = f"tcloseparameterplaceholder{index}"
            variables[token] = "TCLOSE_DB_" + re.sub(r"[^A-Za-z0-9]", "_", name).upper()
            query[name] = token
    text = parsed.set(query=query).render_as_string(hide_password=False)
    for token, variable in variables.items():
        text = text.replace(token, "${" + variable + "}")
    return scrub(text)


#: The longest mapping key YAML reads on one line (``name: value``) is 1024 characters; a
#: longer column name is written as an explicit key (``? name`` and ``: value`` below it).
_SIMPLE_KEY_MAX = 1000


def _key(name: str) -> str:
    """``name`` as a YAML mapping key on one line (quoted when YAML needs it)."""
    key = yaml.safe_dump({str(name): 0}, allow_unicode=True, width=10_000).rsplit(": 0", 1)[0]
    return _quoted(name) if key.startswith("? ") or not key.isprintable() else key


def _scalar(value: str) -> str:
    """``value`` as a YAML scalar on one line (quoted when YAML needs it)."""
    text = yaml.safe_dump(value, allow_unicode=True, width=10_000).split("\n...")[0].strip()
    return _quoted(value) if not text.isprintable() else text


def _quoted(value: str) -> str:
    """``value`` as a double-quoted YAML scalar: line breaks (YAML's are LF, CR, NEL, LS and
    PS) and other unprintable characters as escapes (``\\n``, ``\\L``, ``\\e``)."""
    return yaml.safe_dump(value, default_style='"', allow_unicode=True, width=10**9).strip()


def _comment(text: str) -> str:
    """``text`` for a YAML comment: unprintable characters, line breaks first, as Python
    escapes, so that nothing in it (a type name can hold data: the field names of a STRUCT) ends
    the comment and becomes YAML."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


#: Names of a column that is a table's own row key: ``id``, ``uuid``, ``row_id``, ...
_KEY_NAMES = {("id",), ("uuid",), ("guid",), ("rowid",), ("row", "id"), ("record", "id")}


def _words(name: str) -> list[str]:
    """``name`` split into lower-case words (at non-letters and camelCase humps)."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return [w for w in re.sub(r"[^0-9a-zA-Z]+", "_", spaced).lower().split("_") if w]


def proposed_key(
    columns: list[ColumnInfo], table: str, implied_key: bool = False
) -> tuple[str | None, str]:
    """The ``source.key`` the skeleton proposes and its comment: the single-column primary key;
    else, where the database identifies rows by itself (``implied_key``), none; else a column
    declared ``UNIQUE NOT NULL``; else a column named as a table's own key (``id``, ``uuid``,
    ``row_id``, or the table's name and ``id``: ``patient_id`` in ``patients``) of an integer,
    text or UUID type, which files (Parquet, CSV) and tables without constraints have; the run
    checks that its values are unique and non-null. ``None`` when nothing fits."""
    primary = [c for c in columns if c.primary_key]
    if len(primary) == 1:
        return primary[0].name, "identifies rows while tclose works; not published"
    if implied_key:
        return None, (
            "name a unique, non-null column, or leave it out: the database's row id "
            "identifies rows (there is no single-column primary key)"
        )
    declared = [c for c in columns if c.unique and not c.nullable]
    if declared:
        return declared[0].name, "declared UNIQUE NOT NULL: identifies rows; not published"
    base = "".join(_words(TableName.parse(table).name))
    named = [c for c in columns if c.key_type and tuple(_words(c.name)) in _KEY_NAMES]
    named += [
        c
        for c in columns
        if c.key_type
        and len(_words(c.name)) > 1
        and _words(c.name)[-1] == "id"
        and base.startswith("".join(_words(c.name)[:-1]))
    ]
    if named:
        return named[0].name, (
            "proposed from its name (no primary key is declared): the run checks that its "
            "values are unique and non-null; not published"
        )
    return None, (
        "name a unique, non-null column: the table has no single-column primary key, and a "
        "run needs one to identify rows"
    )


def proposed_entity(columns: list[ColumnInfo], key: str | None) -> str | None:
    """The ``source.entity`` the skeleton proposes: the first column of an integer or text type,
    neither the row key nor declared unique (so its values may repeat), whose name looks like an
    entity's (:func:`tclose.core.entities.looks_like_entity`); ``None`` when none fits. Only the
    definition is read, so whether the values do repeat is the user's to check (a run warns of
    a repeated id without ``source.entity``)."""
    for column in columns:
        if not column.key_type or column.unique or column.name == key:
            continue
        if looks_like_entity(column.name):
            return column.name
    return None


def _role_and_hint(
    column: ColumnInfo, key: str | None, entity: str | None = None
) -> tuple[str, str]:
    """The role the skeleton proposes for ``column`` and the comment that says why."""
    sql_type = _comment(column.sql_type)
    typed = f"{sql_type}; " if sql_type else ""  # a view's computed column may have no type
    if column.name == key:
        return "identifier", f"{typed}the row key: never published (output.keep_key)"
    if column.name == entity:
        return "identifier", f"{typed}the entity (source.entity): never published"
    if column.unique:
        return "identifier", f"{typed}UNIQUE: would link the release to the source"
    if looks_identifying(column.name):
        return "identifier", f"{typed}looks like a direct identifier: not published"
    return "other", sql_type


def skeleton(
    url: str,
    table: str,
    columns: list[ColumnInfo],
    *,
    implied_key: bool = False,
    target: tuple[str | None, str] | None = None,
) -> str:
    """The YAML text of a configuration skeleton for ``table`` with ``columns``: its row key
    (:func:`proposed_key`; ``implied_key``: the database identifies rows without one) and its
    ``target`` (``(target.url or None, target.table)``, default ``<table>_anon`` in the source's
    database; see :func:`proposed_target`)."""
    key, key_hint = proposed_key(columns, table, implied_key)
    target_url, target_table = target or (None, str(TableName.parse(table).with_suffix("_anon")))
    entity = proposed_entity(columns, key) if "source.entity" in criterion_keys() else None
    lines = [
        *_header_lines(table),
        *_source_lines(url, table, key, key_hint),
        *_entity_lines(entity),
        *_target_lines(target_url, target_table),
        *_attribute_lines(columns, key, entity),
        *_closing_lines(table.rpartition(".")[2]),
    ]
    return "\n".join(lines)


#: The steps a skeleton's header asks of its reader, under its first line.
_TO_DO = (
    "#",
    "# To do before `tclose run THIS_FILE`:",
    "#  1. Give every column under `attributes` a role. All start as `other`, except the",
    "#     row key, UNIQUE columns and names that look like direct identifiers (e-mail,",
    "#     name, ..._id): these start as `identifier`, not published. Check them all:",
    "#       identifier        a direct identifier (name, e-mail, ...): dropped from the output",
    "#       quasi_identifier  could identify someone in combination (age, zip, dates, ...):",
    "#                         replaced by its cluster's mean, so that k rows look alike",
    "#       confidential      the sensitive value to protect (diagnosis, salary, ...): kept",
    "#                         as is; its distribution in every cluster stays t-close to the",
    "#                         whole table's",
    "#       other             passes through unchanged; rows that the other columns",
    "#                         single out together link the release to the source and",
    "#                         fail verification (`allow_unique: true` leaves one out)",
    "#     Every column needs a role: an unlisted column is an error. The row key's role is",
    "#     identifier (not published; output.keep_key: true publishes it).",
    "#     At least one quasi_identifier is required; privacy.t needs a confidential column.",
    "#     A NULL in a quasi-identifier or confidential column stops the run unless its",
    "#     `missing` is `category` (ordinal, nominal) or `exclude-rows`.",
    f"#  2. Check each `type` (supported for quasi-identifiers and confidential attributes: "
    f"{', '.join(ATTRIBUTE_TYPES)}).",
    "#  3. Choose k and t under `privacy`, and the algorithm.",
    "#  Run `tclose run --dry-run THIS_FILE` to try it without publishing anything.",
    "",
)


def _header_lines(table: str) -> list[str]:
    """The skeleton's comment: what wrote it, when, and what to do before a run."""
    today = dt.date.today().isoformat()
    first = (
        f"# tclose configuration for table {_comment(table)}, written by `tclose init` on {today}."
    )
    return [first, *_TO_DO]


def _source_lines(url: str, table: str, key: str | None, key_hint: str) -> list[str]:
    """The ``source`` section: URL, table and row key (commented out when none is proposed)."""
    lines = ["source:", f"  url: {_scalar(url_for_file(url))}", f"  table: {_scalar(table)}"]
    if key is not None:
        lines.append(f"  key: {_key(key)}  # {key_hint}")
    else:
        lines.append(f"  # key: COLUMN  # {key_hint}")
    return lines


def _entity_lines(entity: str | None) -> list[str]:
    """The proposed ``source.entity`` line of the ``source`` section (none without one)."""
    return [] if entity is None else [f"  entity: {_key(entity)}  # {ENTITY_HINT}"]


def _target_lines(target_url: str | None, target_table: str) -> list[str]:
    """The ``target`` section: URL (only when not the source's database), table, if_exists."""
    lines = ["target:"]
    if target_url is not None:
        lines.append(f"  url: {_scalar(url_for_file(target_url))}  # a new file beside the source")
    return [
        *lines,
        f"  table: {_scalar(target_table)}  # where the verified, anonymized table is published",
        "  if_exists: fail  # fail | replace (an existing target is only replaced when verified)",
    ]


def _attribute_lines(
    columns: list[ColumnInfo], key: str | None, entity: str | None = None
) -> list[str]:
    """The ``attributes`` section: every column with its proposed role and type (``entity``:
    the proposed ``source.entity``), aligned."""
    width = max([len(_key(c.name)) for c in columns if len(_key(c.name)) <= 60] + [4])
    lines = ["attributes:"]
    for column in columns:
        role, hint = _role_and_hint(column, key, entity)
        body = f"{{role: {role}, type: {column.attribute_type}}}"
        if len(_key(column.name)) > _SIMPLE_KEY_MAX:  # YAML reads no longer key on one line
            lines.append(f"  ? {_key(column.name)}")
            lines.append(f"  : {body:<31}  # {hint}")
            continue
        name = (_key(column.name) + ":").ljust(width + 1)
        lines.append(f"  {name} {body:<31}  # {hint}")
    return lines


def _closing_lines(base: str) -> list[str]:
    """The ``privacy``, ``algorithm`` and ``report`` sections (``base``: the table's name
    without its schema, naming the report files)."""
    return [
        "privacy:",
        "  k: 5     # every published row shares its quasi-identifier values with >= k-1 others",
        "  t: 0.15  # EMD between any cluster's confidential values and the table's, at most t",
        "           # (in (0, 1]; smaller is more private and loses more information)",
        "algorithm:",
        "  name: t-first  # t-first (fastest, the paper's best) | auto (least loss) | merge | "
        "k-first | mdav (k only)",
        "  options: {}    # `tclose plugins` lists the algorithms; unknown options are errors",
        "report:",
        f"  json: {_scalar('reports/' + base + '.json')}  # the audit report",
        f"  html: {_scalar('reports/' + base + '.html')}  # the same with plots, for people",
        "  # table: tclose_audit  # one row per run in the target database",
        "",
    ]
