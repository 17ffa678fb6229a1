"""Rule: a file target is resolved once and never written through a symbolic link.

A Parquet target's folder is resolved when the URL is read (a link among the folders is
followed then, and the temporary file and the rename stay in that real folder). A target that
is itself a symbolic link — to a file (a release of tclose or not), to a missing file, to a
folder, written relative or absolute — is refused before any work (exit 2, saying where it
points), whatever ``if_exists`` says, and again at the publish; the link, and what it points
to, stay as they were.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tclose.app.cli import main
from tclose.core import runner

pytestmark = pytest.mark.duckdb


def _parquet_target(sqlite_run, target, if_exists: str = "replace") -> str:
    document = sqlite_run.config()
    document["target"] = {"url": f"parquet:///{target}", "table": "out", "if_exists": if_exists}
    return str(sqlite_run.write(document, f"links-{if_exists}.yaml"))


def _refused(monkeypatch, path: str, capsys) -> str:
    def no_reading(*_args, **_kwargs):
        raise AssertionError("the source was read: the refusal came after the work began")

    monkeypatch.setattr(runner, "read_inputs", no_reading)
    code = main(["-q", "run", path])
    monkeypatch.undo()
    err = capsys.readouterr().err
    assert code == 2, err
    return err


def _tree(folder) -> dict:
    """Every entry under ``folder``: a link's target, a file's bytes."""
    found = {}
    for root, dirs, files in os.walk(folder):
        for entry in dirs + files:
            full = os.path.join(root, entry)
            if os.path.islink(full):
                found[full] = ("link", os.readlink(full))
            elif os.path.isfile(full):
                found[full] = ("file", Path(full).read_bytes())
    return found


@pytest.mark.parametrize("if_exists", ["replace", "fail"])
def test_an_attacker_points_the_target_at_a_missing_file_elsewhere(
    sqlite_run, tmp_path, monkeypatch, capsys, if_exists
):
    """``out.parquet -> elsewhere/missing.parquet``: nothing is written there, the link stays."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    target = tmp_path / "out.parquet"
    target.symlink_to(elsewhere / "missing.parquet")
    err = _refused(monkeypatch, _parquet_target(sqlite_run, target, if_exists), capsys)
    assert f"The target {target} is a symbolic link (to {elsewhere / 'missing.parquet'})" in err
    assert os.readlink(target) == str(elsewhere / "missing.parquet")
    assert list(elsewhere.iterdir()) == []


def _release(sqlite_run, tmp_path, name: str = "real.parquet"):
    """A Parquet release of tclose at ``tmp_path/name``."""
    real = tmp_path / name
    document = sqlite_run.config()
    document["target"] = {"url": f"parquet:///{real}", "table": real.name.split(".")[0]}
    assert main(["-q", "run", str(sqlite_run.write(document, "first.yaml"))]) == 0
    return real


@pytest.mark.parametrize(
    "points_to", ["a release, absolute", "a release, relative", "a folder", "itself"]
)
def test_a_link_as_target_is_refused_whatever_it_points_to(
    sqlite_run, tmp_path, monkeypatch, capsys, points_to
):
    target = tmp_path / "out.parquet"
    if points_to.startswith("a release"):
        real = _release(sqlite_run, tmp_path)
        target.symlink_to(real if points_to.endswith("absolute") else real.name)
    elif points_to == "a folder":
        (tmp_path / "folder").mkdir()
        target.symlink_to(tmp_path / "folder")
    else:
        target.symlink_to(target.name)  # a loop
    path = _parquet_target(sqlite_run, target)
    before = _tree(tmp_path)
    err = _refused(monkeypatch, path, capsys)
    assert f"The target {target} is a symbolic link" in err
    assert _tree(tmp_path) == before


def test_a_link_made_during_the_run_is_not_written_through(
    sqlite_run, tmp_path, monkeypatch, capsys
):
    """The plan saw no file; before the publish someone made the target a link to a file of
    theirs: the publish refuses (exit 3), the link and the file as they were."""
    target = tmp_path / "out.parquet"
    theirs = tmp_path / "theirs.parquet"
    theirs.write_bytes(b"")
    verify = runner._verify_staging

    def linked(*args, **kwargs):
        target.symlink_to(theirs)
        return verify(*args, **kwargs)

    monkeypatch.setattr(runner, "_verify_staging", linked)
    assert main(["-q", "run", _parquet_target(sqlite_run, target)]) == 3
    assert "is a symbolic link" in capsys.readouterr().err
    assert os.readlink(target) == str(theirs) and theirs.read_bytes() == b""


def test_a_link_among_the_folders_is_followed_once(sqlite_run, tmp_path, capsys):
    """``data -> real/``: the release is written in ``real/``, its temporary file there too,
    and replaced there by the next run; the folder link stays a link."""
    (tmp_path / "real").mkdir()
    (tmp_path / "data").symlink_to("real")
    path = _parquet_target(sqlite_run, tmp_path / "data" / "out.parquet")
    assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    assert main(["-q", "run", path]) == 0, capsys.readouterr().err
    assert [p.name for p in (tmp_path / "real").iterdir()] == ["out.parquet"]
    assert os.path.islink(tmp_path / "data")
