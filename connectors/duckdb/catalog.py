"""The tables a DuckDB read reads: the base tables of a view's query, the functions and macros
whose reads the catalog cannot list, and the files a table function globs.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from tclose.connectors.sql import TableName


def _view_select(definition: str) -> str:
    """The ``SELECT`` of a view's ``CREATE VIEW name [(columns)] AS SELECT ...;``: what follows
    the first ``AS`` keyword (DuckDB's tokenizer, so that a quoted name holding `` AS `` is
    passed over)."""
    import duckdb

    for offset, kind in duckdb.tokenize(definition):
        if kind == duckdb.token_type.keyword and definition[offset : offset + 2].upper() == "AS":
            return definition[offset + 2 :].strip().rstrip(";")
    return definition


def _base_tables(tree: Any) -> list[TableName]:
    """Every ``BASE_TABLE`` of a parsed statement (``json_serialize_sql``), as a name."""
    if isinstance(tree, list):
        return [name for item in tree for name in _base_tables(item)]
    if not isinstance(tree, dict):
        return []
    if tree.get("type") == "BASE_TABLE" and tree.get("table_name"):
        return [TableName(tree.get("schema_name") or None, tree["table_name"])]
    return [name for value in tree.values() for name in _base_tables(value)]


#: The built-in table functions whose reads a view's definition shows: the file readers (their
#: files are walked as names, :func:`_names_read`) and those that read nothing.
KNOWN_TABLE_FUNCTIONS = frozenset(
    {"read_parquet", "parquet_scan", "read_csv", "read_csv_auto", "read_json", "read_json_auto"}
    | {"read_ndjson", "read_ndjson_auto", "read_text", "read_blob", "range", "generate_series"}
    | {"unnest"}
)


def _unlisted_calls(tree: Any, built_in: set[str]) -> list[str]:
    """The calls of a parsed statement (``json_serialize_sql``) whose reads it does not show:
    a function that is not one of DuckDB's own (``built_in``: a macro, a table macro, a
    function registered by a client), and a table function outside
    :data:`KNOWN_TABLE_FUNCTIONS` (``query_table('t')`` and ``query('...')`` read tables named
    by text, a scanner reads another database)."""
    found: set[str] = set()

    def visit(node: Any, table_function: bool = False) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            if node.get("class") == "FUNCTION" and isinstance(node.get("function_name"), str):
                name = node["function_name"].lower()
                unknown = table_function and name not in KNOWN_TABLE_FUNCTIONS
                if unknown or name not in built_in:
                    found.add(f"{'table function' if table_function else 'function'} {name}()")
            for key, item in node.items():
                visit(item, key == "function" and node.get("type") == "TABLE_FUNCTION")

    visit(tree)
    return sorted(found)


def _names_read(tree: Any) -> list[str]:
    """The file names (or patterns) a parsed statement (``json_serialize_sql``) may read: each
    text constant in a table function's arguments (``read_parquet(['a.parquet',
    'b/*.parquet'])``) and each table name that may be a file's (``FROM 'x.csv'``)."""
    paths: list[str] = []

    def strings(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                strings(item)
        elif isinstance(node, dict):
            literal = node.get("literal")
            if isinstance(literal, dict) and isinstance(literal.get("text"), str):
                paths.append(literal["text"])
            value = node.get("value")  # DuckDB before 1.2: {"value": {"value": "x.parquet"}}
            if isinstance(value, dict) and isinstance(value.get("value"), str):
                paths.append(value["value"])
            for item in node.values():
                strings(item)

    def visit(node: Any) -> None:
        if isinstance(node, list):
            for item in node:
                visit(item)
        elif isinstance(node, dict):
            if node.get("type") == "TABLE_FUNCTION":
                strings(node.get("function"))
            elif node.get("type") == "BASE_TABLE" and node.get("table_name"):
                paths.append(node["table_name"])
            for item in node.values():
                visit(item)

    visit(tree)
    return paths


def _files_globbed(connection: Connection, names: Sequence[str]) -> list[tuple]:
    """The ``("file", device, inode)`` identity of every existing file of this machine that
    ``names`` name as DuckDB reads them: each expanded by DuckDB's own ``glob`` on
    ``connection`` (its ``**``, hidden files, ``~`` and ``file_search_path``, which Python's
    ``glob`` does not share). A remote name (``s3://``, ``https://``) names no file here."""
    found = []
    for name in names:
        if "://" in name:
            continue
        try:
            files = connection.execute(sa.text("SELECT file FROM glob(:p)"), {"p": name}).all()
        except sa.exc.DBAPIError:  # not a name DuckDB can expand
            connection.rollback()
            continue
        for (file,) in files:
            if os.path.isfile(file):
                stat = os.stat(file)
                found.append(("file", stat.st_dev, stat.st_ino))
    return found
