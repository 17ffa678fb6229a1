"""Names every part of tclose agrees on: qualified table names and the names a run gives to the
tables and columns it creates.

The framework (the runner, ``tclose init``) and the connectors both use these; they live here so
that the core depends on no connector. :mod:`tclose.connectors.sql` re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

#: Marks in the names of the tables a run creates: ``<target>__tclose_s_<run>`` (staging) and,
#: on MySQL, ``<target>__tclose_o_<run>`` (the replaced target between ``RENAME`` and ``DROP``).
#: The target part is shortened to fit the database's identifier limit. Such a name proves
#: nothing: tclose drops a table only when it recorded the table as its own (see
#: :meth:`tclose.connectors.sql.Session.drop_leftovers`).
STAGING_MARK = "__tclose_s_"
OLD_MARK = "__tclose_o_"
#: Characters of the run id in an owned name.
RUN_ID_LENGTH = 12
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
            resolved it to (:func:`tclose.plan.resolve_name`): messages name the table as the
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
