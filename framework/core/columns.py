"""Every column's fate: the row key is resolved once, every other column has a declared role.

A run first resolves the column that identifies source rows — ``source.key``, else the table's
single-column primary key, else the dialect's row id (SQLite's ``rowid``, which is not a column
and so is never published) — and then checks that every other column of the source is listed
under ``attributes``. The key needs no entry: it is dropped unless ``output.keep_key`` is true.
Nor does the entity column (``source.entity``), which is never published.
Declaring the key with a role other than ``identifier`` is a configuration error (a key is unique
per row: as a quasi-identifier, confidential or pass-through column it would link every published
row back to its source row).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from tclose.base.config import Config
from tclose.errors import ConfigError


def resolve_key(database: Any, table: Any, key: str | None) -> str | None:
    """The name of the column that identifies the rows of ``table``, or ``None`` when the
    dialect's row id stands in (no such column exists, so nothing can publish it).

    Raises:
        ConfigError: no ``source.key``, no single-column primary key and no row id.
        DataError: ``source.key`` is not a column of the table.
    """
    column = database.row_key(table, key)
    name = getattr(column, "name", None)
    if isinstance(name, str) and name in table.c and table.c[name] is column:
        return name
    return None


def unlisted_columns(config_attributes: Sequence[str], columns: Sequence[str], key: str | None):
    """The columns of ``columns`` that have no role (the key needs none)."""
    listed = set(config_attributes)
    return [c for c in columns if c not in listed and c != key]


def unlisted_error(unlisted: Sequence[str], where: str = "table") -> ConfigError:
    """The configuration error for columns without a declared role, with the one-line fix."""
    shown = ", ".join(unlisted[:20]) + (", ..." if len(unlisted) > 20 else "")
    return ConfigError(
        f"The source {where} has {len(unlisted)} column(s) with no role: "
        f"{shown}. Every column needs a declared fate: list each under attributes, e.g. "
        f"`{unlisted[0]}: {{role: other}}` to publish it unchanged, or `{{role: identifier}}` to "
        f"drop it.",
        path=("attributes",),
    )


def check_column_fates(config: Config, columns: Sequence[str], key: str | None) -> None:
    """Raise :class:`ConfigError` unless every column of the source has exactly one fate.

    Args:
        config: the run's configuration.
        columns: the source table's columns (as reflected).
        key: the resolved key column (:func:`resolve_key`), or ``None`` for the row id.
    """
    if key is not None and key in config.attributes:
        role = config.attributes[key].role
        if role != "identifier":
            raise ConfigError(
                f"Column {key!r} is the row key of the "
                f"source (source.key or the primary key), so it cannot have role {role}: its "
                f"values are unique per row. Remove it from attributes (the key is dropped unless "
                f"output.keep_key is true), or use another column.",
                path=("attributes", key),
            )
        if config.keep_key:
            raise ConfigError(
                f"The source key {key!r} cannot be kept "
                f"(output.keep_key) and dropped (role identifier).",
                path=("attributes", key),
            )
    if config.keep_key and key is None:
        raise ConfigError(
            "The source table has no key column to keep "
            "(no source.key and no single-column primary key); set source.key or remove keep_key.",
            path=("output", "keep_key"),
        )
    entity = [config.entity] if config.entity else []
    unlisted = unlisted_columns([*config.attributes, *entity], columns, key)
    if unlisted:
        raise unlisted_error(unlisted)


def refuse_unknown_entity(entity: str | None, columns: Sequence[str], table: str) -> None:
    """Raise :class:`ConfigError` when ``source.entity`` is not one of ``columns`` (names are
    compared exactly, as every column name of a configuration; a column spelled alike in
    another case is named)."""
    if entity is None or entity in columns:
        return
    alike = [c for c in columns if c.casefold() == entity.casefold()]
    hint = f" Did you mean {alike[0]!r}? Names are compared exactly." if alike else ""
    raise ConfigError(
        f"Column {entity!r} (source.entity) does not exist in table {table}.{hint} Its columns "
        f"are: {', '.join(columns)}.",
        path=("source", "entity"),
    )


def with_key(config: Config, key: str | None) -> Config:
    """``config`` with ``source.key`` set to the resolved key column."""
    if key is None or key == config.source.key:
        return config
    return dataclasses.replace(config, source=dataclasses.replace(config.source, key=key))
