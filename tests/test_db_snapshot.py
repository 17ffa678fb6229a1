"""A concurrent writer during a run: the kernel and the output see one state of the source.

The writer runs while the kernel works (a test algorithm commits changes to the source through
its own connection, after pass 1 and before the write). What each dialect guarantees:

- PostgreSQL: the run reads, joins and verifies in one REPEATABLE READ snapshot; the writer
  commits, and the output is exactly the source as it was when the run started.
- MariaDB: ``INSERT ... SELECT`` would read the changed rows; with snapshot isolation it fails
  instead, and nothing is published. Without joining (the streamed path) the output is the
  snapshot, as on PostgreSQL.
- SQLite: the run holds the write lock; the writer is refused ("database is locked") until the
  run ends, and the output is the source as it was.
"""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

import tclose
from tclose.base.config import load_config
from tclose.base.registry import load_registry
from tclose.core.runner import run
from tclose.errors import DataError
from tclose.interfaces import Partition
from tclose.kernels.mdav import mdav


class WriterDuringKernel:
    """MDAV, after committing changes to the source through another connection."""

    name = "writer-during-kernel"
    options_schema: dict = {}
    requires_t = False

    def __init__(self, db, source: str) -> None:
        self.db, self.source = db, source
        self.outcome: Exception | None | str = "not run"

    def partition(self, x, distances, k, t, options):
        self.outcome = self.write()
        return Partition(mdav(x, k))

    def write(self) -> Exception | None:
        table = self.db.quote(self.source)
        args = {"timeout": 0.2} if self.db.dialect == "sqlite" else {}
        engine = sa.create_engine(self.db.url, poolclass=sa.pool.NullPool, connect_args=args)
        try:
            with engine.begin() as connection:
                connection.exec_driver_sql(
                    f"UPDATE {table} SET charge = charge + 1000000, note = 'changed' "
                    f"WHERE patient_id <= 20"
                )
                connection.exec_driver_sql(
                    f"DELETE FROM {table} WHERE patient_id BETWEEN 21 AND 30"
                )
                connection.exec_driver_sql(
                    f"INSERT INTO {table} (patient_id, age, zip, length_of_stay, charge, code) "
                    f"SELECT patient_id + 10000, age, zip, length_of_stay, charge, code "
                    f"FROM {table} WHERE patient_id BETWEEN 31 AND 40"
                )
            return None
        except sa.exc.OperationalError as error:
            return error
        finally:
            engine.dispose()


def _run_with_writer(db):
    source, target = db.name("patients"), db.name("anon")
    db.create_patients(source)
    before = db.frame(source)
    writer = WriterDuringKernel(db, source)

    class Plugin:
        @tclose.hookimpl
        def register_algorithms(self, register):
            register(writer)

    # the plugin does not enforce t, so t is not asked for
    document = db.config(
        source, target, algorithm={"name": "writer-during-kernel"}, privacy={"k": 3}
    )
    config = load_config(db.write_config(document))
    registry = load_registry(extra_plugins=[Plugin()], entry_points=False)
    return source, target, before, writer, lambda: run(config, registry=registry)


def _assert_output_is(db, target, before) -> None:
    out = db.frame(target)
    assert len(out) == len(before) == 400
    assert sorted(out["code"]) == sorted(before["code"])
    assert np.array_equal(np.sort(out["charge"].to_numpy()), np.sort(before["charge"].to_numpy()))
    assert "changed" not in set(out["note"].dropna())


def test_a_concurrent_writer_never_mixes_two_states_of_the_source(db):
    source, target, before, writer, start = _run_with_writer(db)
    if db.dialect == "mysql":
        with pytest.raises(DataError, match="changed while tclose was reading it") as error:
            start()
        assert f"from {source}" in str(error.value) and "Nothing was published" in str(error.value)
        assert db.tables() == {source}
    else:
        assert start().published
        _assert_output_is(db, target, before)
    if db.dialect == "sqlite":
        assert "locked" in str(writer.outcome)
        assert writer.write() is None  # the run is over: the writer gets through
    else:
        assert writer.outcome is None  # the writer was never blocked
    after = db.frame(source)
    assert (after["note"] == "changed").sum() == 20 and len(after) == 400


@pytest.mark.mysql
def test_mariadb_streamed_path_publishes_the_snapshot(maria, monkeypatch):
    from tclose.connectors.mysql import MySQLDatabase

    monkeypatch.setattr(MySQLDatabase, "joins_in_snapshot", property(lambda self: False))
    source, target, before, writer, start = _run_with_writer(maria)
    assert start().published
    assert writer.outcome is None
    _assert_output_is(maria, target, before)
    assert (maria.frame(source)["note"] == "changed").sum() == 20


@pytest.mark.mysql
@pytest.mark.parametrize("joined", [True, False], ids=["joined", "streamed"])
def test_mariadb_snapshot_holds_when_the_server_default_is_read_committed(
    maria, monkeypatch, joined
):
    """A server (or a user's account) whose default isolation is READ COMMITTED: ``START
    TRANSACTION WITH CONSISTENT SNAPSHOT`` then takes no snapshot, so each statement of the
    run would see the writer's committed changes. The run asks for REPEATABLE READ itself."""
    from tclose.connectors.mysql import MySQLDatabase, MySQLSession

    opened = MySQLSession.open_connection.__func__

    def read_committed(cls, engine):
        connection = opened(cls, engine)
        connection.exec_driver_sql("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        return connection

    monkeypatch.setattr(MySQLSession, "open_connection", classmethod(read_committed))
    if not joined:
        monkeypatch.setattr(MySQLDatabase, "joins_in_snapshot", property(lambda self: False))
    source, target, before, writer, start = _run_with_writer(maria)
    if joined:  # as under REPEATABLE READ: snapshot isolation refuses the changed rows
        with pytest.raises(DataError, match="changed while tclose was reading it"):
            start()
        assert maria.tables() == {source}
    else:
        assert start().published
        _assert_output_is(maria, target, before)
    assert writer.outcome is None
    assert (maria.frame(source)["note"] == "changed").sum() == 20
