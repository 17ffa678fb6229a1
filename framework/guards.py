"""Checks made before a run writes anything: the source is never a table the run writes, and no
output file overwrites something that is not an output of tclose.

- :func:`refuse_same_table`: source, target and audit table are compared by the identity the
  database itself gives them (server, database, schema, folded name, real file, catalog object
  id; see :meth:`tclose.connectors.sql.SQLDatabase.table_identity`), never by spelling.
- :func:`refuse_foreign_file`: a report path that exists must be a report of tclose (JSON with
  tclose's keys, or tclose's HTML page); a database file (SQLite's header) is always refused.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ConfigError, DataError

#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def refuse_same_table(
    source_db: Any, source: Any, target_db: Any, target: Any, audit: Any = None
) -> None:
    """:class:`ConfigError` (exit 2) when the target (or the audit table, ``report.table``)
    is the source table under another name or URL, or the audit table is the target."""
    if not all(hasattr(db, "table_identity") for db in (source_db, target_db)):
        # A connector that cannot say what its tables are: compare what is known.
        def identify(db: Any, name: Any) -> tuple | None:
            return (id(db), str(name))

    else:

        def identify(db: Any, name: Any) -> tuple | None:
            return db.table_identity(name)

    source_id = identify(source_db, source)
    if source_id is None:
        return  # no source table: reading it fails with its own message
    target_id = identify(target_db, target)
    if target_id == source_id:
        raise ConfigError(
            f"==> At target ==> At key: table\nThe target table {target} is the source table "
            f"{source} (the same table in the same database, named another way); tclose never "
            f"modifies its source. Choose another target table."
        )
    if audit is not None:
        audit_id = identify(target_db, audit)
        if audit_id is not None and audit_id in (source_id, target_id):
            which = "source" if audit_id == source_id else "target"
            raise ConfigError(
                f"==> At report ==> At key: table\nThe audit table {audit} is the {which} "
                f"table. Choose another name for report.table."
            )


def refuse_foreign_file(path: str | None, key: str) -> None:
    """:class:`ConfigError` (exit 2) if ``path`` exists and is not a report tclose wrote."""
    if not path:
        return
    file = Path(path)
    if not file.exists():
        return
    where = f"==> At report ==> At key: {key}\n"
    if not file.is_file():
        raise ConfigError(f"{where}The report path {path} exists and is not a file.")
    with file.open("rb") as handle:
        head = handle.read(4096)
    if head.startswith(SQLITE_HEADER):
        raise ConfigError(
            f"{where}The report path {path} is a SQLite database file; tclose never overwrites "
            f"it. Choose another report path."
        )
    if file.stat().st_size == 0:
        return  # an empty file holds nothing to lose
    if not _is_report(file, head, key):
        raise ConfigError(
            f"{where}The report path {path} exists and is not a report of tclose; it is not "
            f"overwritten. Choose another path, or remove the file."
        )


def refuse_report_on_target(path: str | None, key: str, target_file: Path | None) -> None:
    """:class:`ConfigError` (exit 2) if the report ``path`` names ``target_file`` (a file
    target, e.g. a Parquet file), however spelled: the report, written after publishing, would
    replace the release."""
    if not path or target_file is None:
        return
    if Path(path).resolve() == target_file.resolve():
        raise ConfigError(
            f"==> At report ==> At key: {key}\nThe report path {path} is the target file "
            f"{target_file}; the report would replace the release. Choose another report path."
        )


def _is_report(file: Path, head: bytes, key: str) -> bool:
    if key == "html":
        text = head.decode("utf-8", "replace").lower()
        return "<html" in text and "tclose" in text
    try:
        document = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(document, dict) and {"tool", "verification"} <= set(document)


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
