"""Static checks as tests: ``ruff check`` and ``mypy`` over the package folders.

Locally a missing tool skips; in CI (``CI=true``) it fails, so a type or lint regression is
caught there.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ["framework", "plugins", "connectors"]


def _missing(tool: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"{tool} is not installed (it is in the 'test' extra)")
    pytest.skip(f"{tool} is not installed")


def _run(command: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_ruff_check_is_clean() -> None:
    ruff = shutil.which("ruff", path=os.path.dirname(sys.executable)) or shutil.which("ruff")
    if ruff is None:
        _missing("ruff")
    result = _run([ruff, "check", *FOLDERS, "tests"])
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.slow
def test_mypy_is_clean() -> None:
    if importlib.util.find_spec("mypy") is None:
        _missing("mypy")
    result = _run([sys.executable, "-m", "mypy", *FOLDERS])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Success" in result.stdout
