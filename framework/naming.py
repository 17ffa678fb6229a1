"""Names every part of tclose agrees on: qualified table names and the names a run gives to the
tables and columns it creates.

The framework (the runner, ``tclose init``) and the connectors both use these; they live here so
that the core depends on no connector. :mod:`tclose.connectors.sql` re-exports them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

#: Marks in the names of the tables a run creates: ``<target>__tclose_s_<run>`` (staging) and,
#: on MySQL, ``<target>__tclose_o_<run>`` (the replaced target between ``RENAME`` and ``DROP``).
#: The target part is shortened to fit the database's identifier limit. Such a name proves
#: nothing: tclose drops a table only when it recorded the table as its own (see
#: :meth:`tclose.connectors.sql.Session.drop_leftovers`).
STAGING_MARK = "__tclose_s_"
OLD_MARK = "__tclose_o_"
#: Marks of the join's temporary helper tables, ``__tclose_m_<run>`` (source key, new key,
#: cluster) and ``__tclose_c_<run>`` (the cluster values): per-run names that no table of a
#: user may bear (:func:`reserved`), so a helper never shadows one.
MAP_MARK = "__tclose_m_"
CENTROID_MARK = "__tclose_c_"
#: Mark of a streamed fill's temporary helper table, ``__tclose_r_<run>``: the rows as they
#: arrive, until they are numbered in content order.
ROWS_MARK = "__tclose_r_"
#: Characters of the run id in an owned name.
RUN_ID_LENGTH = 12
#: The registry of the releases tclose published, one table per schema: a publish replaces an
#: existing table only when this registry records it (:mod:`tclose.releases`).
RELEASES_TABLE = "tclose_releases"
#: MariaDB/MySQL's registry of the tables a run creates (dropped after a killed run).
OWNED_TABLE = "tclose_owned"
#: The schema (a database, on MariaDB/MySQL) where a run keeps its unverified staging rows, out
#: of reach of the accounts that may read the target's schema.
STAGING_SCHEMA = "tclose_staging"
#: A name a run gives its own tables: a mark and (part of) a run id, at the end.
_OWNED_NAME = re.compile(r"__tclose_[a-z]_[0-9a-f]+\Z", re.IGNORECASE)
#: Name of the new surrogate key column of the published table.
ROW_COLUMN = "tclose_row"
#: Label of the row key column in streamed reads.
KEY_LABEL = "__key__"


@dataclass(frozen=True)
class TableName:
    """A possibly schema-qualified table name (``schema.table``; the last dot separates).

    Attributes:
        schema: the schema (``None``: the database's choice, unresolved).
        name: the table's name.
        spelled: how the configuration wrote the table, when this is the name a database
            resolved it to (:func:`tclose.core.plan.resolve_name`): messages name the table as the
            user wrote it (``str``), statements as resolved. Not part of equality.
    """

    schema: str | None
    name: str
    spelled: str | None = field(default=None, compare=False, repr=False)

    @classmethod
    def parse(cls, qualified: str) -> TableName:
        schema, _, name = qualified.rpartition(".")
        return cls(schema or None, name)

    @property
    def qualified(self) -> str:
        """``schema.name`` (``name`` without a schema), whatever the spelling."""
        return f"{self.schema}.{self.name}" if self.schema else self.name

    def with_suffix(self, suffix: str) -> TableName:
        return self.with_name(self.name + suffix)

    def with_name(self, name: str) -> TableName:
        """Table ``name`` in the same schema, spelled (if this one is) with the schema as the
        configuration spelled it."""
        spelled = None
        if self.spelled is not None:
            schema = TableName.parse(self.spelled).schema
            spelled = f"{schema}.{name}" if schema else name
        return TableName(self.schema, name, spelled)

    def __str__(self) -> str:
        return self.spelled if self.spelled is not None else self.qualified


def run_table_name(mark: str, run_id: str) -> str:
    """The name of one run's helper table of ``mark`` (:data:`MAP_MARK`, ...)."""
    return mark + run_id[:RUN_ID_LENGTH]


def reserved(name: TableName) -> str | None:
    """Why ``name`` is one of the names tclose keeps for itself, or ``None``: a registry
    (:data:`RELEASES_TABLE`, :data:`OWNED_TABLE`), a name a run gives its own tables (a mark
    and a run id at its end: staging, parked, helper tables), or a table in
    :data:`STAGING_SCHEMA`. Names are compared without case (``casefold``), as the most lenient
    database compares them: a name that one database would take for tclose's is refused on all.
    """
    table = name.name.casefold()
    if table in (RELEASES_TABLE, OWNED_TABLE):
        what = "the registry of releases" if table == RELEASES_TABLE else "the registry of runs"
        return f"it is the name of {what} tclose keeps in each schema it writes"
    if _OWNED_NAME.search(name.name):
        return "it is named like the tables a run makes for itself (a mark and a run id)"
    if name.schema is not None and name.schema.casefold() == STAGING_SCHEMA:
        return f"schema {name.schema} is where tclose keeps its unverified staging tables"
    return None
