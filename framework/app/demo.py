"""The embedded demo: a synthetic patient-discharge table in SQLite, anonymized end to end.

``discharge_table`` is also the seeded data set of the benchmarks, so that the figures quoted in
the issues and the docs can be reproduced without any external file.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

#: The seven numeric quasi-identifiers of :func:`discharge_table` (the paper's Patient Discharge
#: set has seven QIs and one confidential charge).
QI_COLUMNS = (
    "age",
    "zip",
    "admission_day",
    "length_of_stay",
    "procedures",
    "diagnoses",
    "severity",
)

#: ``PRAGMA application_id`` of a database made by :func:`create_demo_database` ("tcld"): the
#: proof that ``tclose demo`` made the file it would replace.
DEMO_APPLICATION_ID = 0x74636C64

_FIRST_NAMES = ("Ana", "Ben", "Carla", "Dev", "Eli", "Fatima", "Gus", "Hana", "Ivan", "Jo")
_LAST_NAMES = ("Smith", "Garcia", "Chen", "Okafor", "Novak", "Rossi", "Kim", "Silva", "Berg")
_WARDS = ("cardiology", "oncology", "maternity", "orthopedics", "general", "neurology")


def discharge_table(n_rows: int, seed: int = 0) -> pd.DataFrame:
    """A realistic synthetic patient-discharge table.

    Columns: ``patient_id`` (integer key), ``name`` (direct identifier), the seven numeric
    quasi-identifiers of :data:`QI_COLUMNS` (age in years, a 5-digit zip code, admission day of the
    year, length of stay in days, number of procedures, number of diagnoses, a severity score),
    ``charge`` (the confidential amount charged, in dollars with cents, almost all distinct) and
    ``ward`` (a pass-through text column). The charge depends weakly on the QIs (correlation about
    0.1–0.3), as in the paper's Patient Discharge set.

    Args:
        n_rows: number of rows.
        seed: seed of the generator; the same seed gives the same table.

    Returns:
        a DataFrame with ``n_rows`` rows.
    """
    rng = np.random.default_rng(seed)
    age = np.clip(rng.gamma(6.0, 8.0, n_rows), 0, 100).round().astype(np.int64)
    zip_code = 90001 + rng.choice(np.arange(0, 900, 7), n_rows) + rng.integers(0, 3, n_rows)
    admission_day = rng.integers(1, 366, n_rows)
    severity = np.clip(rng.normal(2.0 + age / 40.0, 1.0), 1, 6).round(1)
    length_of_stay = np.clip(rng.poisson(1.0 + severity * 1.2), 1, 60).astype(np.int64)
    procedures = rng.poisson(0.5 + 0.4 * length_of_stay).astype(np.int64)
    diagnoses = np.clip(rng.poisson(1.5 + 0.05 * age), 1, 25).astype(np.int64)
    charge = np.round(
        rng.lognormal(9.0, 0.8, n_rows) * (1 + 0.08 * length_of_stay) + 900.0 * procedures, 2
    )
    first = rng.choice(_FIRST_NAMES, n_rows)
    last = rng.choice(_LAST_NAMES, n_rows)
    return pd.DataFrame(
        {
            "patient_id": np.arange(1, n_rows + 1, dtype=np.int64),
            "name": np.char.add(np.char.add(first, " "), last),
            "age": age,
            "zip": zip_code.astype(np.int64),
            "admission_day": admission_day.astype(np.int64),
            "length_of_stay": length_of_stay,
            "procedures": procedures,
            "diagnoses": diagnoses,
            "severity": severity,
            "charge": charge,
            "ward": rng.choice(_WARDS, n_rows),
        }
    )


def create_demo_database(path: Path, n_rows: int = 20_000, seed: int = 0) -> str:
    """Write :func:`discharge_table` into a fresh SQLite file as table ``discharges``.

    An existing file at ``path`` is replaced. Returns the SQLAlchemy URL of the database.
    """
    import sqlite3

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.unlink()
    table = discharge_table(n_rows, seed)
    with sqlite3.connect(path) as connection:
        connection.execute(f"PRAGMA application_id = {DEMO_APPLICATION_ID}")
        connection.execute(
            "CREATE TABLE discharges (patient_id INTEGER PRIMARY KEY, name TEXT NOT NULL, "
            "age INTEGER, zip INTEGER, admission_day INTEGER, length_of_stay INTEGER, "
            "procedures INTEGER, diagnoses INTEGER, severity REAL, charge REAL, ward TEXT)"
        )
        connection.executemany(
            "INSERT INTO discharges VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            table.astype(object).itertuples(index=False, name=None),
        )
    return f"sqlite:///{path}"


def refuse_foreign_demo(path: Path) -> None:
    """:class:`~tclose.errors.ConfigError` (exit 2) unless ``path`` may become the demo
    database: it does not exist, is empty, or is a database :func:`create_demo_database` made
    (its ``application_id``); its folder must be a folder or creatable."""
    from tclose.errors import ConfigError

    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        reason = "a file is in the way" if isinstance(error, FileExistsError) else error.strerror
        raise ConfigError(
            f"Cannot use the folder {path.parent} for the demo: {reason}. Choose another --dir."
        ) from None
    if not path.exists() and not path.is_symlink():
        return
    if not path.is_file():
        raise ConfigError(f"{path} exists and is not a file; choose another --dir.")
    if path.stat().st_size == 0:
        return
    try:
        with open(path, "rb") as handle:
            header = handle.read(100)
    except OSError as error:
        raise ConfigError(f"Cannot read {path}: {error.strerror}.") from None
    ours = len(header) == 100 and header.startswith(b"SQLite format 3\x00")
    if not (ours and int.from_bytes(header[68:72], "big") == DEMO_APPLICATION_ID):
        raise ConfigError(
            f"{path} exists and is not a database made by tclose demo; it is not replaced. "
            f"Remove it, or choose another --dir."
        )
