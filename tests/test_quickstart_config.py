"""configs/quickstart.yaml is valid and runs against the demo database."""

from __future__ import annotations

from pathlib import Path

import yaml

from tclose.app.demo import create_demo_database
from tclose.base.config import parse_config
from tclose.core.runner import run

CONFIG = Path(__file__).resolve().parents[1] / "configs" / "quickstart.yaml"


def test_quickstart_yaml_runs_on_a_small_demo_database(tmp_path):
    database = tmp_path / "demo.db"
    create_demo_database(database, n_rows=500, seed=3)
    document = yaml.safe_load(CONFIG.read_text())
    document["source"]["url"] = f"sqlite:///{database}"
    document["report"]["json"] = str(tmp_path / "report.json")
    result = run(parse_config(document))
    assert result.published
    assert result.report["privacy"]["k_achieved"] >= 5
    assert result.report["privacy"]["t_achieved"]["charge"] <= 0.15 + 1e-9
    assert (tmp_path / "report.json").exists()


README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_yaml_example_passes_the_column_rules(tmp_path):
    """The README's example declares every column of its table and runs."""
    import re
    import sqlite3

    text = README.read_text(encoding="utf-8")
    block = next(b for b in re.findall(r"```yaml\n(.*?)```", text, re.S) if "attributes:" in b)
    document = yaml.safe_load(block)
    database = tmp_path / "demo.db"
    leaves = ["A01", "A02", "B01", "B02"]
    (tmp_path / "icd.csv").write_text("".join(f"{x};{x[0]};any\n" for x in leaves))
    with sqlite3.connect(database) as connection:
        connection.execute(
            "CREATE TABLE patients (id INTEGER PRIMARY KEY, name TEXT, age INTEGER, zip TEXT, "
            "level TEXT, charge REAL, dx TEXT, notes TEXT)"
        )
        connection.executemany(
            "INSERT INTO patients VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    i,
                    f"p{i}",
                    20 + i % 50,
                    f"0{i % 4}",
                    ["low", "mid", "high"][i % 3],
                    float(i * 37 % 101),
                    leaves[i % 4],
                    f"n{i % 5}",
                )
                for i in range(1, 121)
            ],
        )
    document["source"]["url"] = f"sqlite:///{database}"
    document["report"] = {"json": str(tmp_path / "r.json")}
    config = tmp_path / "readme.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    from tclose.base.config import load_config

    result = run(load_config(config))
    assert result.published and result.report["verification"]["passed"]
    assert "id" not in result.report["target"]["columns"]
