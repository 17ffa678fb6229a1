"""Packaging safeguards for the package-dir mapping of ``tclose`` onto three folders."""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parents[1]
MAPPING = {"framework": "tclose", "plugins": "tclose.plugins", "connectors": "tclose.connectors"}


def _expected_packages() -> set[str]:
    expected = set()
    for folder, package in MAPPING.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / folder)
            expected.add(".".join([package, *relative.parts]))
    return expected


def test_every_package_folder_is_declared_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    declared = set(config["packages"])
    assert _expected_packages() <= declared
    for folder, package in MAPPING.items():
        assert config["package-dir"][package] == folder


@pytest.mark.slow
def test_every_package_folder_is_in_the_wheel(tmp_path):
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    wheel = next(tmp_path.glob("tclose-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    in_wheel = {
        name.rsplit("/", 1)[0].replace("/", ".") for name in names if name.endswith("/__init__.py")
    }
    assert _expected_packages() <= in_wheel
    assert "tclose/configs/quickstart.yaml" in names


def test_nothing_imports_the_folder_names():
    pattern = re.compile(r"^\s*(from|import)\s+(framework|plugins|connectors)\b", re.MULTILINE)
    offenders = [
        str(path.relative_to(ROOT))
        for folder in (*MAPPING, "tests", "bench")
        for path in (ROOT / folder).rglob("*.py")
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_every_example_config_is_exercised_by_a_test():
    tests = "\n".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    for config in (ROOT / "configs").glob("*.yaml"):
        assert config.name in tests, f"no test runs configs/{config.name}"
