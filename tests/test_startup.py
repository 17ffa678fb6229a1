"""Start-up stays light: ``import tclose`` and the plugin registry do not import pandas
(nor, for ``import tclose``, Numba or SQLAlchemy), a small run imports no SciPy subpackage, and a
Numba compilation is announced once with its duration. Timings themselves are in
bench/bench_startup.py, not here."""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
import sys
from importlib import resources

import numpy as np
import pytest
import yaml

import tclose
from tclose.app import progress
from tclose.app.demo import create_demo_database
from tclose.base import notices
from tclose.base.compile_notice import compile_notice


def _modules_after(code: str, timeout: float = 120) -> set[str]:
    script = f"import sys, json\n{code}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=timeout
    ).stdout
    return set(json.loads(out.splitlines()[-1]))


def test_import_tclose_imports_no_heavy_dependency():
    modules = _modules_after("import tclose")
    assert not {"pandas", "numba", "sqlalchemy", "scipy"} & modules


def test_plugin_registration_does_not_import_pandas():
    modules = _modules_after("from tclose.base.registry import load_registry; load_registry()")
    assert "pandas" not in modules
    assert "tclose.core.api" not in modules


def test_the_lazy_api_names_still_work():
    from tclose.core.api import AnonymizationResult, anonymize

    assert tclose.anonymize is anonymize
    assert tclose.AnonymizationResult is AnonymizationResult
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        _ = tclose.nothing


def _fresh_kernel():
    from numba import njit

    @njit  # no cache: compiled on its first call in this process
    def total(values):
        result = 0.0
        for v in values:
            result += v
        return result

    return total


def test_a_compilation_is_announced_once_with_its_duration():
    stream = io.StringIO()
    display = progress.Progress(stream, live=False)
    kernel = _fresh_kernel()
    try:
        with compile_notice() as watch:
            kernel(np.arange(3.0))
            kernel(np.arange(4.0))  # same types: no second compilation
        with compile_notice() as again:
            kernel(np.arange(5.0))
    finally:
        display.close()
    lines = stream.getvalue().splitlines()
    assert watch.kernels == 1 and watch.seconds > 0 and again.kernels == 0
    assert sum("compiling Numba kernels" in line for line in lines) == 1
    [done] = [line for line in lines if line.startswith("compiled ")]
    assert done.startswith("compiled 1 Numba kernel(s) in ") and "cached" in done


def test_without_a_display_the_notice_is_a_log_record(caplog, monkeypatch):
    monkeypatch.setattr(notices, "_current", None)
    kernel = _fresh_kernel()
    with caplog.at_level("INFO", logger="tclose"), compile_notice():
        kernel(np.arange(2.0))
    assert "compiling Numba kernels" in caplog.text and "compiled 1 Numba kernel(s)" in caplog.text


def test_two_phases_that_compile_announce_once_and_time_each():
    stream = io.StringIO()
    display = progress.Progress(stream, live=False)
    first, second = _fresh_kernel(), _fresh_kernel()
    try:
        with compile_notice():  # e.g. partitioning
            first(np.arange(3.0))
        with compile_notice():  # e.g. verification
            second(np.arange(3.0))
    finally:
        display.close()
    lines = stream.getvalue().splitlines()
    assert sum("compiling Numba kernels" in line for line in lines) == 1
    assert sum(line.startswith("compiled 1 Numba kernel(s) in ") for line in lines) == 2


def test_the_plugins_command_imports_no_heavy_dependency():
    modules = _modules_after(
        "import os; os.environ['TCLOSE_DISABLE_PLUGIN_AUTOLOAD'] = '1'\n"
        "import contextlib, io\n"
        "from tclose.app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()): main(['plugins'])"
    )
    assert not {"pandas", "numba", "sqlalchemy", "scipy"} & modules


def test_the_builtin_connectors_are_registered_lazily_and_agree_with_their_classes():
    from tclose.base.registry import load_registry
    from tclose.connectors.builtin import BUILTIN_CONNECTORS

    registry = load_registry(entry_points=False)
    assert sorted(registry.connectors) == sorted(c.name for c in BUILTIN_CONNECTORS)
    for lazy in BUILTIN_CONNECTORS:
        real = lazy.load()
        assert (real.name, tuple(real.dialects)) == (lazy.name, lazy.dialects)
        assert registry.connector_for(lazy.dialects[0]) is lazy


def test_a_lazy_connector_connects_through_its_module(tmp_path):
    from tclose.connectors.builtin import BUILTIN_CONNECTORS
    from tclose.connectors.sqlite import SQLiteDatabase

    sqlite = next(c for c in BUILTIN_CONNECTORS if c.name == "sqlite")
    path = tmp_path / "x.db"
    sqlite3.connect(path).close()
    database = sqlite.connect(f"sqlite:///{path.as_posix()}")
    assert isinstance(database, SQLiteDatabase)


def test_a_small_run_imports_neither_numba_nor_scipy(tmp_path):
    """A 100-row ``tclose run`` (the quickstart configuration, as bench/bench_startup.py runs it)
    calls no compiled kernel (the NumPy twins handle small inputs, and ``tclose.base.jit`` imports
    Numba only at a compiled kernel's first call) and measures record linkage in NumPy below
    KERNEL_MIN_ROWS: it imports neither Numba (~0.3 s of CPU) nor SciPy (``scipy.spatial``
    0.25-0.35 s)."""
    database = tmp_path / "demo.db"
    create_demo_database(database, n_rows=100, seed=0)
    text = resources.files("tclose.configs").joinpath("quickstart.yaml").read_text("utf-8")
    document = yaml.safe_load(text)
    document["source"]["url"] = f"sqlite:///{database.as_posix()}"
    document["report"] = {"json": (tmp_path / "report.json").as_posix()}
    config = tmp_path / "run.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    modules = _modules_after(
        "import contextlib, io\n"
        "from tclose.app.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['run', {str(config)!r}, '-q']) == 0",
        timeout=600,
    )
    report = json.loads((tmp_path / "report.json").read_text("utf-8"))
    assert 0.0 < report["risk"]["record_linkage"] <= 1.0  # the run did measure record linkage
    assert sorted(m for m in modules if m.split(".")[0] in ("numba", "scipy")) == []
