"""The MySQL driver notice once per environment, always in `tclose plugins`.

"mysql driver: PyMySQL ... (pure Python; pip install 'tclose[mariadb]' reads several times
faster)" is shown the first time a run uses that driver in a Python environment (a marker file
in the user's cache folder, XDG_CACHE_HOME or ~/.cache, remembers it), logged at INFO (``-v``)
afterwards, and always listed by ``tclose plugins``. A run against the real server:
tests/test_mysql_driver.py. A cache that cannot be written never fails a run: the notice is then
shown again.
"""

from __future__ import annotations

import importlib.util
import io
import logging
import subprocess
import sys
from pathlib import Path

import pytest

from tclose.app import progress
from tclose.app.cli import main
from tclose.base.notices import notice_once, notices_folder


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    return folder


def _shown(key: str, text: str) -> str:
    """What a command's display shows for ``notice_once(key, text)``."""
    stream = io.StringIO()
    display = progress.Progress(stream, live=False)
    try:
        notice_once(key, text)
    finally:
        display.close()
    return stream.getvalue()


def test_a_notice_is_shown_once_per_environment_then_logged(cache, caplog):
    assert "faster" in _shown("h29-driver", "use the faster driver")
    assert list((cache / "tclose").rglob("*")), "a marker remembers it"
    with caplog.at_level(logging.INFO, logger="tclose"):
        assert _shown("h29-driver", "use the faster driver") == ""
    assert "use the faster driver" in caplog.text  # -v still shows it
    assert "another" in _shown("h29-other", "another notice")  # each notice on its own


def test_another_python_environment_is_told_again(cache, monkeypatch):
    assert _shown("h29-env", "hint") != ""
    monkeypatch.setattr(sys, "prefix", str(cache / "another-venv"))
    assert _shown("h29-env", "hint") != ""
    assert _shown("h29-env", "hint") == ""


@pytest.mark.parametrize("how", ["a-file", "read-only"])
def test_a_cache_that_cannot_be_written_never_fails_and_the_notice_stays(
    tmp_path, monkeypatch, how
):
    folder = tmp_path / "cache"
    if how == "a-file":
        folder.write_text("not a folder")
    else:
        folder.mkdir()
        folder.chmod(0o500)
        if (folder / "probe").exists() or _writable(folder):
            pytest.skip("running as a user who writes anywhere (root)")
    monkeypatch.setenv("XDG_CACHE_HOME", str(folder))
    assert _shown("h29-ro", "hint") != ""
    assert _shown("h29-ro", "hint") != ""  # not remembered, so said again


def _writable(folder: Path) -> bool:
    try:
        (folder / "probe").write_text("")
    except OSError:
        return False
    (folder / "probe").unlink()
    return True


def test_a_notice_nobody_saw_is_not_marked_as_seen(cache):
    """``tclose -q`` (no display, INFO not logged) shows nothing: the next run still tells."""
    logger = logging.getLogger("tclose")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        notice_once("h29-quiet", "hint")
    finally:
        logger.setLevel(level)
    assert not notices_folder().exists() or not list(notices_folder().iterdir())
    assert _shown("h29-quiet", "hint") != ""


def test_the_cache_folder_follows_xdg_and_ignores_a_relative_one(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")  # the XDG spec: ignore it
    assert notices_folder().is_relative_to(tmp_path / "home" / ".cache" / "tclose")
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert notices_folder().is_relative_to(tmp_path / "home" / ".cache" / "tclose")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert notices_folder().is_relative_to(tmp_path / "xdg" / "tclose")


def _only_pymysql(monkeypatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("mariadb", "MySQLdb") else real(name, *a),
    )


def test_tclose_plugins_always_names_the_driver_and_the_faster_one(cache, monkeypatch, capsys):
    _only_pymysql(monkeypatch)
    for _ in range(2):
        assert main(["plugins"]) == 0
        out = capsys.readouterr().out
        assert "mysql:// and mariadb:// read through PyMySQL" in out, out
        assert "pip install 'tclose[mariadb]'" in out


def test_tclose_plugins_imports_no_connector_module():
    script = (
        "import sys\nfrom tclose.app.cli import main\nmain(['plugins'])\n"
        "print([m for m in sys.modules if m.startswith('tclose.connectors.')])"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    loaded = set(out.splitlines()[-1].strip("[]").replace("'", "").split(", "))
    assert loaded == {"tclose.connectors.builtin", "tclose.connectors.mysql_drivers"}
