"""configs/quickstart.yaml is valid and runs against the demo database."""

from __future__ import annotations

from pathlib import Path

import yaml

from tclose.config import parse_config
from tclose.demo import create_demo_database
from tclose.runner import run

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
