"""MariaDB/MySQL's catalog queries: what a replace would break, the accounts that may read the
staging schema, and a table's row of ``information_schema``.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa

from tclose.connectors.mysql_drivers import (
    PREFERENCE,  # noqa: F401 (re-exported)
)
from tclose.naming import STAGING_SCHEMA

#: The foreign keys of other tables that reference a table, and the triggers on it
#: (:meth:`MySQLDatabase.replace_blockers`); parameters: its schema and name, twice.
_BOUND = """
SELECT CONCAT('foreign key ', constraint_name, ' of ', constraint_schema, '.', table_name)
    FROM information_schema.referential_constraints
    WHERE unique_constraint_schema = %s AND referenced_table_name = %s
UNION ALL
SELECT CONCAT('trigger ', trigger_schema, '.', trigger_name)
    FROM information_schema.triggers
    WHERE event_object_schema = %s AND event_object_table = %s
"""


#: The grants that let an account read :data:`STAGING_SCHEMA` (:func:`_grant_rows`): the
#: account, the grant in words and whether it reaches every database.
_STAGING_GRANTS = f"""
SELECT User, Host, 'SELECT ON *.*', 1 FROM mysql.user WHERE Select_priv = 'Y'
UNION ALL
SELECT User, Host, CONCAT('SELECT ON `', Db, '`.*'), 0 FROM mysql.db
    WHERE Select_priv = 'Y' AND '{STAGING_SCHEMA}' LIKE Db
UNION ALL
SELECT User, Host, CONCAT('SELECT ON `', Db, '`.`', Table_name, '`'), 0 FROM mysql.tables_priv
    WHERE FIND_IN_SET('Select', Table_priv) AND '{STAGING_SCHEMA}' LIKE Db
UNION ALL
SELECT DISTINCT User, Host, CONCAT('SELECT on columns of `', Db, '`.`', Table_name, '`'), 0
    FROM mysql.columns_priv
    WHERE FIND_IN_SET('Select', Column_priv) AND '{STAGING_SCHEMA}' LIKE Db
"""


def _grant_rows(connection: sa.Connection) -> list[tuple]:
    """:data:`_STAGING_GRANTS`, each as ``(user, host, grant, every database)``."""
    statement = _STAGING_GRANTS
    if connection.dialect.paramstyle in ("format", "pyformat"):
        statement = statement.replace("%", "%%")
    return [(u, h, g, bool(e)) for u, h, g, e in connection.exec_driver_sql(statement).all()]


def _accounts_of(connection: sa.Connection, user: str, host: str) -> list[str]:
    """The accounts a grant to ``user``@``host`` reaches: that account; for a role (host
    empty), every account granted it, through roles granted roles; for ``PUBLIC``, every
    account (``'PUBLIC'``, as the server names it)."""
    if host or user == "PUBLIC":
        return [f"'{user}'@'{host}'" if host else "every account (PUBLIC)"]
    query = "SELECT User, Host FROM mysql.roles_mapping WHERE Role = %s"
    if connection.dialect.paramstyle == "qmark":
        query = query.replace("%s", "?")
    accounts: list[str] = []
    for member, member_host in connection.exec_driver_sql(query, (user,)).all():
        for account in _accounts_of(connection, str(member), str(member_host)):
            accounts.append(f"{account} through role {user}")
    return accounts


def _catalog_row(
    connection: sa.Connection, columns: str, schema: str, table: str, fold: Any
) -> Any:
    """``columns`` of table ``schema.table``'s row of ``information_schema.tables`` (``None``
    if none), names compared as the server compares them (in lower case under
    ``lower_case_table_names`` ``fold``)."""
    compare = "BINARY table_schema = %s AND BINARY table_name = %s"
    if int(fold):
        compare = "LOWER(table_schema) = LOWER(%s) AND LOWER(table_name) = LOWER(%s)"
    if connection.dialect.paramstyle == "qmark":
        compare = compare.replace("%s", "?")
    return connection.exec_driver_sql(
        f"SELECT {columns} FROM information_schema.tables WHERE {compare}", (schema, table)
    ).first()
