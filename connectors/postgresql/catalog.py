"""PostgreSQL's catalog queries: the schema a name resolves to, the tables a read reads, the
row-level security policies that filter it, what a replace would break, a table's identity,
the trust of a registry of releases and the partitions dropped with a table.
"""

from __future__ import annotations

import sqlalchemy as sa

from tclose.connectors.sql import SQLDatabase, TableName

#: The schema, the stored name and whether it is temporary (a temporary relation, or one in a
#: temporary schema) of the relation ``%(name)s`` (quoted) resolves to.
_RESOLVED = """
SELECT n.nspname, c.relname, c.relpersistence = 't' OR n.oid = pg_my_temp_schema()
    OR pg_is_other_temp_schema(n.oid)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass(%(name)s)
"""


def _resolved_row(
    connection: sa.Connection, name: TableName, database: SQLDatabase
) -> tuple[str, str, bool] | None:
    """:data:`_RESOLVED` of ``name``: ``(schema, stored name, temporary)``, or ``None``."""
    found = connection.exec_driver_sql(_RESOLVED, {"name": database.qualified(name)}).first()
    return None if found is None else (str(found[0]), str(found[1]), bool(found[2]))


#: The OIDs of a relation (``%(name)s``, quoted) and of every relation it reads, each with the
#: description (``pg_describe_object``) of what the catalog cannot say the reads of, as
#: :meth:`PostgreSQLDatabase.tables_read` says. Built-in functions and types are pinned: no
#: ``pg_depend`` row names them.
_READS = """
WITH RECURSIVE reads(classid, objid) AS (
    SELECT 'pg_class'::regclass::oid, to_regclass(%(name)s)::oid
    UNION
    SELECT next.classid, next.objid FROM reads CROSS JOIN LATERAL (
        SELECT d.refclassid AS classid, d.refobjid AS objid
        FROM pg_class v JOIN pg_rewrite w ON w.ev_class = v.oid JOIN pg_depend d
            ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
        WHERE reads.classid = 'pg_class'::regclass AND v.oid = reads.objid AND v.relkind = 'v'
            AND NOT (d.refclassid = 'pg_class'::regclass AND d.refobjid = reads.objid)
        UNION ALL
        SELECT 'pg_class'::regclass, i.inhrelid FROM pg_inherits i
        WHERE reads.classid = 'pg_class'::regclass AND i.inhparent = reads.objid
        UNION ALL
        SELECT d.refclassid, d.refobjid FROM pg_policy p JOIN pg_depend d
            ON d.classid = 'pg_policy'::regclass AND d.objid = p.oid
        WHERE reads.classid = 'pg_class'::regclass AND p.polrelid = reads.objid
            AND NOT (d.refclassid = 'pg_class'::regclass AND d.refobjid = reads.objid)
    ) next
)
SELECT CASE WHEN r.classid = 'pg_class'::regclass THEN r.objid END,
    CASE WHEN c.relkind IN ('r', 'p', 'v', 'm', 'S', 'c')
        OR (r.classid = 'pg_type'::regclass AND t.typtype <> 'd')
        OR r.classid = 'pg_collation'::regclass THEN NULL
        ELSE pg_describe_object(r.classid, r.objid, 0) END
FROM reads r
LEFT JOIN pg_class c ON r.classid = 'pg_class'::regclass AND c.oid = r.objid
LEFT JOIN pg_type t ON r.classid = 'pg_type'::regclass AND t.oid = r.objid
WHERE r.objid IS NOT NULL
"""


def _unknown_reads(unlisted: list[str]) -> str | None:
    """Why a read that reaches the objects ``unlisted`` (described) reads tables the catalog
    cannot list, or ``None`` when it reaches none."""
    if not unlisted:
        return None
    return (
        f"it reads through {', '.join(unlisted)}, whose reads the catalog does not list "
        f"(a function's body, a foreign table's server)"
    )


#: The tables whose row-level security filters a read of a relation (``%(name)s``, quoted) by
#: ``current_user``, with the role each is checked for (:meth:`PostgreSQLDatabase.row_security`):
#: a view's relations are read with its owner's rights unless it is ``security_invoker``.
_ROW_SECURITY = """
WITH RECURSIVE reads(oid, reader) AS (
    SELECT to_regclass(%(name)s)::oid, (SELECT oid FROM pg_roles WHERE rolname = current_user)
    UNION
    SELECT d.refobjid,
        CASE WHEN coalesce((SELECT bool_or(split_part(o, '=', 2)::boolean)
                            FROM unnest(v.reloptions) o
                            WHERE split_part(o, '=', 1) = 'security_invoker'), false)
            THEN reads.reader ELSE v.relowner END
    FROM reads
    JOIN pg_class v ON v.oid = reads.oid AND v.relkind = 'v'
    JOIN pg_rewrite w ON w.ev_class = v.oid
    JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
        AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> v.oid
)
SELECT DISTINCT c.oid::regclass::text, r.rolname
FROM reads JOIN pg_class c ON c.oid = reads.oid JOIN pg_roles r ON r.oid = reads.reader
WHERE c.relkind IN ('r', 'p') AND c.relrowsecurity AND NOT r.rolsuper AND NOT r.rolbypassrls
    AND (c.relforcerowsecurity OR NOT pg_has_role(reads.reader, c.relowner, 'USAGE'))
ORDER BY 1, 2
"""

#: What is bound to a table (``%(name)s``, quoted), in words
#: (:meth:`PostgreSQLDatabase.replace_blockers`).
_BLOCKERS = """
WITH t AS (SELECT c.oid, c.reltype FROM pg_class c WHERE c.oid = to_regclass(%(name)s))
SELECT DISTINCT CASE
    WHEN d.classid = 'pg_rewrite'::regclass THEN
        (SELECT 'view ' || w.ev_class::regclass::text FROM pg_rewrite w WHERE w.oid = d.objid)
    WHEN d.classid = 'pg_constraint'::regclass THEN
        (SELECT CASE WHEN k.contype = 'f' AND k.conrelid <> t.oid
                THEN 'foreign key ' || quote_ident(k.conname) || ' of '
                    || k.conrelid::regclass::text
                ELSE pg_describe_object(d.classid, d.objid, d.objsubid) END
         FROM pg_constraint k WHERE k.oid = d.objid)
    ELSE pg_describe_object(d.classid, d.objid, d.objsubid) END
FROM pg_depend d CROSS JOIN t
WHERE ((d.refclassid = 'pg_class'::regclass AND d.refobjid = t.oid)
        OR (d.refclassid = 'pg_type'::regclass AND d.refobjid = t.reltype))
    AND d.deptype IN ('n', 'a')
    AND NOT (d.classid = 'pg_class'::regclass AND d.objid = t.oid)
    AND NOT (d.classid = 'pg_type'::regclass AND d.objid = t.reltype)
    AND NOT EXISTS (
        SELECT 1 FROM pg_constraint k
        WHERE d.classid = 'pg_constraint'::regclass AND k.oid = d.objid
            AND k.conrelid = t.oid AND k.contype = 'p')
UNION
SELECT 'table ' || i.inhparent::regclass::text
    || CASE WHEN c.relispartition THEN ' (it is a partition of it)'
        ELSE ' (it inherits from it)' END
FROM pg_inherits i CROSS JOIN t JOIN pg_class c ON c.oid = t.oid WHERE i.inhrelid = t.oid
UNION
SELECT 'table ' || i.inhrelid::regclass::text
    || CASE WHEN c.relispartition THEN ' (a partition of it)' ELSE ' (it inherits from it)' END
FROM pg_inherits i CROSS JOIN t JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = t.oid
"""

#: A table's schema, stored name, OID, persistence, comment and columns (name, declared type,
#: ``NOT NULL``), as :meth:`PostgreSQLDatabase.release_of` records them.
_IDENTITY = """
SELECT n.nspname, c.relname, c.oid, c.relpersistence, obj_description(c.oid, 'pg_class'),
    (SELECT string_agg(quote_ident(a.attname) || ' ' || format_type(a.atttypid, a.atttypmod)
            || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END, ', ' ORDER BY a.attnum)
     FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped)
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.oid = to_regclass(%(name)s)
"""

#: What decides whether a registry of releases (``%(name)s``, quoted) is trusted
#: (:meth:`PostgreSQLDatabase.registry_problem`): its kind, its owner, the connecting role, the
#: other roles granted a write on it (``PUBLIC`` too), the members of its owner role, and its
#: triggers and rules.
_REGISTRY_TRUST = """
SELECT c.relkind, pg_get_userbyid(c.relowner), current_user::text,
    ARRAY(SELECT DISTINCT CASE WHEN a.grantee = 0 THEN 'PUBLIC' ELSE pg_get_userbyid(a.grantee) END
          FROM aclexplode(c.relacl) a
          WHERE a.grantee <> c.relowner
              AND a.privilege_type IN ('INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'TRIGGER')),
    ARRAY(SELECT pg_get_userbyid(m.member) FROM pg_auth_members m WHERE m.roleid = c.relowner),
    ARRAY(SELECT 'trigger ' || tgname FROM pg_trigger WHERE tgrelid = c.oid AND NOT tgisinternal
          UNION ALL SELECT 'rule ' || rulename FROM pg_rewrite WHERE ev_class = c.oid)
FROM pg_class c WHERE c.oid = to_regclass(%(name)s)
"""

#: The OIDs of a relation (``%(name)s``, quoted) and of the partitions dropped with it.
_DROPPED_WITH = """
WITH RECURSIVE dropped(oid) AS (
    SELECT to_regclass(%(name)s)::oid
    UNION
    SELECT i.inhrelid FROM dropped JOIN pg_class c ON c.oid = dropped.oid AND c.relkind = 'p'
    JOIN pg_inherits i ON i.inhparent = dropped.oid
)
SELECT oid FROM dropped WHERE oid IS NOT NULL
"""
