"""The run plan: every decision a run makes before it reads a row, made once.

:func:`build_plan` takes the validated configuration and the plugin registry, resolves the
algorithm and distances, connects to the databases, reflects the source table and decides, in
this order (the first problem found is the error):

1. the plugins (:func:`resolve_plugins`): algorithm, its options, ``t`` asked of an algorithm
   that enforces it, one distance per confidential attribute (the registry's default for the
   attribute's type when none is named);
2. the tables: source, target, the run's staging table next to the target, the audit table,
   each resolved once by its database to a schema-qualified name (:func:`resolve_name`), which
   every later statement uses; a name in a temporary schema or an in-memory database, a name
   tclose keeps for itself, and a target (or audit table) that is the source named another way
   are refused;
3. the report files: an existing file that is not a report of tclose is refused;
4. the columns: every configured attribute exists, the row key (``source.key``, else the single
   column primary key, else the dialect's row id), every column has one fate, and the columns of
   the written table;
5. the target: an existing one with ``if_exists: fail`` is refused (unless a dry run), and
   with ``replace`` unless it is a release tclose published (a dry run too);
6. the write strategy: ``join`` (``INSERT ... SELECT`` inside the source's snapshot, same
   database) or ``stream`` (the source read again through the client into another database);
   and whether the ``run_publishing`` hooks record the run inside the publishing transaction.

The runner (:mod:`tclose.core.runner`) then only executes the plan, phase by phase.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from tclose.base.config import AttributeSpec, Config, Settings
from tclose.base.options import validate_options
from tclose.base.registry import Registry, dialect_of
from tclose.blocks.framed import options_schema
from tclose.connector import (
    NameResolution,
    RowSecurity,
    StagingReaders,
    TablePerFile,
    capabilities_of,
    open_read_only,
)
from tclose.core.columns import (
    check_column_fates,
    refuse_unknown_entity,
    resolve_key,
    with_key,
)
from tclose.core.guards import (
    another_target,
    refuse_foreign_file,
    refuse_foreign_target,
    refuse_output_paths,
    refuse_reserved,
    refuse_same_table,
    refuse_unknown_reads,
    refuse_unreplaceable_target,
    shares_a_file,
)
from tclose.errors import ConfigError, DataError
from tclose.interfaces import Algorithm, Distance
from tclose.naming import ROW_COLUMN, STAGING_MARK, TableName

#: Distance options set from the attribute's own keys (:func:`with_attribute_options`), never in
#: ``distance_options``.
ATTRIBUTE_OPTIONS = ("hierarchy", "categories")

#: Write strategies: build the staging table inside the source's database and snapshot, or stream
#: the source again through the client into the target's database.
JOIN, STREAM = "join", "stream"


@dataclass
class Resolved:
    """The plugins a configuration names, with their validated options."""

    algorithm: Algorithm
    algorithm_options: dict[str, Any]
    distances: dict[str, tuple[Distance, dict[str, Any]]]
    #: name → plugin of every registered algorithm, for :meth:`tclose.interfaces.Problem.solve`.
    algorithms: dict[str, Algorithm] = field(default_factory=dict)


def resolve_plugins(settings: Settings | Config, registry: Registry) -> Resolved:
    """Find the algorithm and distances the settings name and validate their options (for
    ``tclose run`` and :func:`tclose.anonymize` alike).

    Raises:
        ConfigError: an unknown plugin or option, a ``t`` missing for an algorithm that needs
            it or given to one that does not enforce it, a distance that does not accept its
            attribute's type.
    """
    algorithm = registry.get("algorithm", settings.algorithm, ("algorithm", "name"))
    options = validate_options(
        algorithm.name,
        options_schema(algorithm),
        settings.algorithm_options,
        ("algorithm", "options"),
    )
    if algorithm.requires_t and settings.t is None:
        free = sorted(a for a, p in registry.algorithms.items() if not p.obj.requires_t)
        raise ConfigError(
            f"Algorithm {algorithm.name} needs t (privacy.t; "
            f"t= in tclose.anonymize): a number in (0, 1], with a confidential attribute. For "
            f"k-anonymity only, set algorithm.name to one that needs no t: "
            f"{', '.join(f'algorithm.name: {a}' for a in free) or 'none is installed'}.",
            path=("privacy", "t"),
        )
    if settings.t is not None and not algorithm.requires_t:
        raise t_not_enforced(algorithm.name, registry, ("privacy", "t"))
    distances = resolve_distances(settings.attributes, registry)
    algorithms = {name: provided.obj for name, provided in registry.algorithms.items()}
    return Resolved(algorithm, options, distances, algorithms)


def t_not_enforced(name: str, registry: Registry, path: Sequence[str] | None = None) -> ConfigError:
    """The error for a ``t`` asked of an algorithm that does not enforce t-closeness, placed
    at ``path`` in the configuration (``None``: no place)."""
    enforcing = sorted(a for a, p in registry.algorithms.items() if p.obj.requires_t)
    return ConfigError(
        f"Algorithm {name} does not enforce t-closeness, so privacy.t would not hold in "
        f"the published table. Remove t (k-anonymity only), or choose an algorithm that "
        f"enforces it: {', '.join(enforcing)}.",
        path=path,
    )


def resolve_distances(
    attributes: Mapping[str, AttributeSpec], registry: Registry
) -> dict[str, tuple[Distance, dict]]:
    """The distance plugin and validated options of every confidential attribute (the
    registry's default for the attribute's type when it names none)."""
    distances = {}
    for attribute in attributes.values():
        if attribute.role != "confidential":
            continue
        path = ("attributes", attribute.name, "distance")
        name = attribute.distance or registry.default_distance(attribute.type, path)
        distance = registry.get("distance", name, path)
        if attribute.type not in distance.attribute_types:
            raise ConfigError(
                f"Distance {distance.name} does not accept {attribute.type} "
                f"attributes (it accepts: {', '.join(distance.attribute_types)}).",
                path=path,
            )
        for key in ATTRIBUTE_OPTIONS:
            if key in attribute.distance_options:
                raise ConfigError(
                    f"{key!r} is set from "
                    f"the attribute's own key: write it as attributes.{attribute.name}.{key} "
                    f"(a hierarchy file there is read relative to the YAML file, and checked).",
                    path=("attributes", attribute.name, "distance_options"),
                )
        distances[attribute.name] = (
            distance,
            validate_options(
                distance.name,
                distance.options_schema,
                attribute.distance_options,
                ("attributes", attribute.name, "distance_options"),
            ),
        )
    return distances


def with_attribute_options(
    distances: Mapping[str, tuple[Distance, dict]], extra: Mapping[str, dict]
) -> dict[str, tuple[Distance, dict]]:
    """Each distance's configured options, plus those its attribute adds (hierarchy,
    categories; see :func:`tclose.base.attributes.encode_confidential`)."""
    return {c: (d, {**o, **extra.get(c, {})}) for c, (d, o) in distances.items()}


@dataclass(frozen=True)
class RunPlan:
    """What a run will do, decided before any row is read (see the module's docstring).

    Attributes:
        config: the configuration, with ``source.key`` set to the resolved key column.
        resolved: the algorithm and distances, options validated.
        run_id: the run's id (in the staging table's name and the published table's comment).
        source_db: the source database (a connector's database object).
        target_db: the target database; the same object as ``source_db`` when the target is in
            the source's database, reached with the same credentials.
        source: the source table's name; ``source_table`` its reflected definition.
        target: the target table's name.
        staging: the staging table's name; ``staging_table`` its definition (created by the
            write session, published by renaming it to ``target``).
        audit: the audit table (``report.table``), or ``None``.
        key: the column identifying source rows, or ``None`` for the dialect's row id.
        output_columns: the source columns written, in source order (the written table starts
            with :data:`tclose.naming.ROW_COLUMN`, see :attr:`columns`).
        numeric: quasi-identifiers written as double precision (their aggregates).
        rounded: quasi-identifiers written as integers (``round: true``).
        write: :data:`JOIN` or :data:`STREAM`.
        replace: whether an existing target is replaced (``target.if_exists: replace``).
        dry_run: verify but publish nothing.
        audit_in_publish: whether the ``run_publishing`` hooks record the run inside the
            publishing transaction (a hook is registered and the target's sessions support it).
        row_security: whether row-level security filters the read of the source, as the source
            database says (:class:`tclose.connector.RowSecurity`; ``None``: it cannot tell).
        staging_readers: the other accounts that may read the staging rows, as the target
            database says (:class:`tclose.connector.StagingReaders`; ``None``: none can).
    """

    config: Config
    resolved: Resolved
    run_id: str
    source_db: Any = field(repr=False)
    target_db: Any = field(repr=False)
    source: TableName
    source_table: Any = field(repr=False)
    target: TableName
    staging: TableName
    staging_table: Any = field(repr=False)
    audit: TableName | None
    key: str | None
    output_columns: list[str]
    numeric: list[str]
    rounded: list[str]
    write: str
    replace: bool
    dry_run: bool
    audit_in_publish: bool
    row_security: dict[str, Any] | None = None
    staging_readers: dict[str, Any] | None = None

    @property
    def columns(self) -> list[str]:
        """The columns of the written table, in order."""
        return [ROW_COLUMN, *self.output_columns]

    @property
    def joined(self) -> bool:
        """Whether the staging table is built inside the source's snapshot (:data:`JOIN`)."""
        return self.write == JOIN


def build_plan(
    config: Config,
    registry: Registry,
    *,
    dry_run: bool = False,
    report_path: str | None = None,
    run_id: str | None = None,
) -> RunPlan:
    """Resolve the plugins, connect, reflect the source and decide everything a run does.

    Args:
        config: a validated configuration.
        registry: the plugins.
        dry_run: a dry run (an existing target is then no error).
        report_path: the audit JSON path that overrides ``report.json``.
        run_id: the run's id (default: a fresh random one).

    Raises:
        ConfigError: a plugin, a name, a column's role, a report path or the target is wrong.
        DataError: the source or a configured column does not exist, the target exists and
            ``if_exists`` is ``fail``, or a database cannot be reached.
    """
    resolved = resolve_plugins(config, registry)
    source_db, target_db = _connect(config, registry)
    run_id = run_id or uuid.uuid4().hex
    config, source, target, audit = _resolve_tables(config, registry, source_db, target_db)
    staging = target_db.owned_name(target, STAGING_MARK, run_id)
    _refuse_outputs(config, report_path, source_db, target_db)
    source_table = source_db.table(source)
    config, key = _resolve_columns(config, source_db, source_table, source)
    if target_db.exists(target):
        _refuse_existing_target(config, dry_run, source_db, source, target_db, target)
    output_columns = _output_columns(config, source_table)
    rounded = [a.name for a in config.attributes.values() if a.round]
    numeric = [c for c in config.quasi_identifiers if config.attributes[c].type == "numeric"]
    staging_table = target_db.staging_table(
        staging, source_table, output_columns, numeric, rounded, source_db.dialect
    )
    staging_table.info.update(target=target, run_id=run_id)
    staging_table.comment = f"tclose run {run_id}"  # kept by the published table where supported
    return RunPlan(
        config=config,
        resolved=resolved,
        run_id=run_id,
        source_db=source_db,
        target_db=target_db,
        source=source,
        source_table=source_table,
        target=target,
        staging=staging,
        staging_table=staging_table,
        audit=audit,
        key=key,
        output_columns=output_columns,
        numeric=numeric,
        rounded=rounded,
        write=JOIN
        if target_db is source_db and capabilities_of(source_db).joins_in_snapshot
        else STREAM,
        replace=config.target.if_exists == "replace",
        dry_run=dry_run,
        audit_in_publish=_audits_in_publish(registry, target_db),
        row_security=_row_security(source_db, source),
        staging_readers=_staging_readers(target_db),
    )


def _resolve_tables(
    config: Config, registry: Registry, source_db: Any, target_db: Any
) -> tuple[Config, TableName, TableName, TableName | None]:
    """The configuration (its audit table resolved, for the hooks), and the source, the target
    and the audit table as their databases resolve them, once each is known to be allowed:
    no reserved name, the target and the audit table not the source (nor read by it), and the
    plugins' ``check_run`` hooks passed."""
    refuse_reserved(*_parsed(config))  # before any name is looked up
    source = resolve_name(source_db, config.source.table, "source.table", create=False)
    target = resolve_name(target_db, config.target.table, "target.table")
    audit = None
    if config.report_table:
        audit = resolve_name(target_db, config.report_table, "report.table")
        config = dataclasses.replace(config, report_table=audit.qualified)  # for the hooks
    refuse_reserved(source, target, audit)  # as resolved: a search path may lead there
    refuse_same_table(source_db, source, target_db, target, audit)
    if registry.manager is not None:  # the plugins' own refusals, e.g. a foreign audit table
        tables = {"source.table": source, "target.table": target, "report.table": audit}
        registry.manager.hook.check_run(config=config, target_database=target_db, tables=tables)
    return config, source, target, audit


def _refuse_outputs(
    config: Config, report_path: str | None, source_db: Any, target_db: Any
) -> None:
    """:class:`ConfigError` when a report path is not tclose's to write, or a report path or a
    file target is a file of either database."""
    refuse_foreign_file(report_path or config.report_json, "json")
    refuse_foreign_file(config.report_html, "html")
    target_file = (
        cast(TablePerFile, target_db).path if capabilities_of(target_db).table_per_file else None
    )
    reports = {"json": report_path or config.report_json, "html": config.report_html}
    refuse_output_paths(reports, source_db, target_db, target_file)


def _refuse_existing_target(
    config: Config,
    dry_run: bool,
    source_db: Any,
    source: TableName,
    target_db: Any,
    target: TableName,
) -> None:
    """:class:`DataError` for an existing target with ``if_exists: fail`` (unless a dry run);
    :class:`ConfigError` for one that is not a table tclose may replace."""
    if config.target.if_exists == "fail" and not dry_run:
        elsewhere = another_target(target_db, str(target.with_suffix("_2")))
        raise DataError(
            f"The target table {target} already exists and target.if_exists is "
            f"'fail'. Set if_exists: replace to replace it (once the new table is "
            f"verified; tclose replaces only its own releases), or publish elsewhere. "
            f"{elsewhere}"
        )
    refuse_unreplaceable_target(target_db, target)
    if config.target.if_exists == "replace":
        refuse_foreign_target(target_db, target)
        refuse_unknown_reads(source_db, source, target_db, target)


def _parsed(config: Config) -> tuple[TableName, TableName, TableName | None]:
    """The source, target and audit table as the configuration writes them."""
    audit = TableName.parse(config.report_table) if config.report_table else None
    return TableName.parse(config.source.table), TableName.parse(config.target.table), audit


def resolve_name(database: Any, table: str, path: str, create: bool = True) -> TableName:
    """The table ``table`` (``schema.table`` or ``table``, from the YAML key ``path``) as
    ``database`` resolves it, schema-qualified (:class:`tclose.connector.NameResolution`; as
    written for a connector without it). ``create``: the run may create it (target, audit
    table): its name is checked against the database's limits first, and a missing one is
    placed where the database would create it. Every name is first checked against the
    database's rules for names (``check_configured_name``: empty, white space only, a NUL,
    too long, a character or an ending the database refuses).

    Raises:
        ConfigError: the name is, or would be, in a temporary schema or an in-memory database,
            or the database would store it cut, or refuse it.
    """
    name = TableName.parse(table)
    if create:
        database.check_table_name(name, path)
    if not capabilities_of(database).name_resolution:
        return dataclasses.replace(name, spelled=str(name))
    resolution = cast(NameResolution, database)
    if not create:
        resolution.check_configured_name(name, path)
    resolved = resolution.resolve_table(name, path, create)
    return dataclasses.replace(resolved, spelled=str(name))


def _connect(config: Config, registry: Registry) -> tuple[Any, Any]:
    """The source and target databases; one object when the target is in the source's database
    and reached with the same credentials. Otherwise the source is only read: its database is
    opened read-only by the driver (:func:`~tclose.connector.open_read_only`), unless the target
    is of its kind and in one of its files (the run writes that file anyway, and DuckDB opens a
    file one way per process)."""
    source, target = config.source, config.target

    def connect(end: Any) -> Any:
        return registry.connector_for(dialect_of(end.url)).connect(end.url, end.password_file)

    source_db = connect(source)
    if target.url == source.url and target.password_file == source.password_file:
        return source_db, source_db
    open_read_only(source_db)
    target_db = connect(target)
    if type(target_db) is type(source_db) and shares_a_file(source_db, target_db):
        source_db = connect(source)
    return source_db, target_db


def _resolve_columns(
    config: Config, source_db: Any, source_table: Any, source: TableName
) -> tuple[Config, str | None]:
    """The configuration with the resolved row key, once every configured attribute is known
    to exist and every column of the source has one fate."""
    for column in config.attributes:
        if column not in source_table.c:
            raise DataError(
                f"Column {column!r} (attributes.{column}) does not exist in table "
                f"{source}. Its columns are: {', '.join(source_table.c.keys())}."
            )
    refuse_unknown_entity(config.entity, list(source_table.c.keys()), str(source))
    key = resolve_key(source_db, source_table, config.source.key)
    check_column_fates(config, list(source_table.c.keys()), key)
    return with_key(config, key), key


def _output_columns(config: Config, source_table: Any) -> list[str]:
    """The source columns the written table keeps, in source order: all but the identifiers,
    the entity (``source.entity``) and, unless ``output.keep_key``, the key."""
    dropped = set(config.identifiers) | ({config.entity} if config.entity else set())
    if not config.keep_key and config.source.key:
        dropped.add(config.source.key)
    return [c.name for c in source_table.columns if c.name not in dropped]


def _staging_readers(target_db: Any) -> dict[str, Any] | None:
    """What the target database says of the other accounts that may read a run's staging rows
    (:class:`tclose.connector.StagingReaders`), or ``None`` when none can."""
    if not capabilities_of(target_db).staging_readers:
        return None
    return cast(StagingReaders, target_db).staging_readers()


def _row_security(source_db: Any, source: TableName) -> dict[str, Any] | None:
    """What the source database says of row-level security on the source
    (:class:`tclose.connector.RowSecurity`), or ``None`` when it cannot tell."""
    if not capabilities_of(source_db).row_security:
        return None
    return cast(RowSecurity, source_db).row_security(source)


def _audits_in_publish(registry: Registry, target_db: Any) -> bool:
    """Whether a ``run_publishing`` hook is registered and the target's sessions can run it
    inside the publishing transaction."""
    return bool(
        registry.manager is not None
        and registry.manager.hook.run_publishing.get_hookimpls()
        and capabilities_of(target_db).publishes_in_transaction
    )
