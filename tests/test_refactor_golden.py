"""Golden outputs: the same inputs give the same outputs whatever shape the code takes.

Each output below was recorded once, under ``tests/golden/``, and every run of this file
produces it again and compares it with the recording:

- ``run_report.json``: the audit report of ``tclose run`` on a 400-row SQLite demo table;
- ``verify_report_source.txt``: what ``tclose verify --report --source`` prints for that table;
- ``compare.json``: what ``tclose compare --json`` prints for the same configuration;
- ``api_report.json``: the report of :func:`tclose.anonymize` on the demo frame;
- ``labels.json``: the partition each built-in algorithm makes of the demo frame, unblocked, in 3
  blocks (``executor: local``) and refined (``refine: true``, for those that take it), as the
  number of clusters and the SHA-256 of the labels renumbered by first appearance (the same
  partition gives the same hash whatever numbers the algorithm gives its clusters).

What changes from one run to the next is left out before comparing: run ids, hosts, Python and
platform, start and end times, timings and every ``seconds`` figure, versions; floats are
compared to 10 significant digits, objects without regard to key order.

A change of behaviour that is meant rewrites the recording (and says so in its commit):
``TCLOSE_GOLDEN=write python -m pytest tests/test_refactor_golden.py``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

import tclose
from tclose.app.cli import main
from tclose.app.demo import create_demo_database, discharge_table

GOLDEN = Path(__file__).resolve().parent / "golden"
WRITE = os.environ.get("TCLOSE_GOLDEN") == "write"

QUASI_IDENTIFIERS = ["age", "zip", "length_of_stay"]
OTHER = ["admission_day", "procedures", "diagnoses", "severity", "ward"]
# Keys whose values differ between two runs of the same configuration.
VOLATILE = {
    "run": {"id", "started", "finished", "host", "python", "platform", "times"},
    "tool": {"version"},
}
VOLATILE_ANYWHERE = {"timings", "seconds", "seconds_refine", "block_seconds"}
RUN_ID = re.compile(r"\b[0-9a-f]{32}\b")
ALGORITHMS = {  # name: (t, the variants it takes)
    "t-first": (0.2, ("plain", "blocks", "refine")),
    "merge": (0.2, ("plain", "blocks", "refine")),
    "k-first": (0.2, ("plain", "blocks", "refine")),
    "mdav": (None, ("plain", "blocks", "refine")),
    "auto": (0.2, ("plain", "blocks")),  # auto refines its candidates itself: no `refine`
}
VARIANTS = {
    "plain": {},
    "blocks": {"blocks": 3, "executor": "local", "workers": 2},
    "refine": {"refine": True},
}


def _stable(value: Any, at: tuple[str, ...] = ()) -> Any:
    """``value`` without its volatile parts, floats to 10 significant digits."""
    if isinstance(value, dict):
        dropped = VOLATILE.get(at[-1], set()) if len(at) == 1 else set()
        out = {
            key: _stable(item, (*at, key))
            for key, item in value.items()
            if key not in dropped and key not in VOLATILE_ANYWHERE
        }
        if at == ("plugins",):
            out = {key: "<version>" for key in out}
        return out
    if isinstance(value, list):
        return [_stable(item, at) for item in value]
    if isinstance(value, float) and np.isfinite(value):
        return float(f"{value:.10g}")
    return value


def _check(name: str, produced: Any) -> None:
    """Compare ``produced`` with ``tests/golden/<name>`` (or record it with TCLOSE_GOLDEN=write)."""
    path = GOLDEN / name
    text = (
        produced
        if isinstance(produced, str)
        else json.dumps(produced, indent=1, ensure_ascii=False) + "\n"
    )
    if WRITE:
        GOLDEN.mkdir(exist_ok=True)
        path.write_text(text, encoding="utf-8")
        pytest.skip(f"recorded {path.name}: nothing compared")
    recorded = path.read_text(encoding="utf-8")
    if isinstance(produced, str):
        assert produced == recorded, f"{name} differs from the recording"
    else:
        assert produced == json.loads(recorded), f"{name} differs from the recording"


@contextlib.contextmanager
def _stdout() -> Iterator[io.StringIO]:
    with contextlib.redirect_stdout(io.StringIO()) as out:
        yield out


@pytest.fixture(scope="module")
def published(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A published run of the demo table: the folder it ran in, its config and its report.

    The configuration names the database by a relative path, the same in every recording, so
    that its digest (``config_sha256``) is too; the commands run in that folder."""
    folder = tmp_path_factory.mktemp("golden")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(folder)
        create_demo_database(folder / "demo.db", n_rows=400, seed=1)
        document = {
            "source": {"url": "sqlite:///demo.db", "table": "discharges", "key": "patient_id"},
            "target": {"table": "discharges_anon", "if_exists": "fail"},
            "attributes": {
                "name": {"role": "identifier"},
                **{c: {"role": "quasi_identifier", "type": "numeric"} for c in QUASI_IDENTIFIERS},
                "charge": {"role": "confidential", "type": "numeric", "distance": "emd-ordered"},
                **{c: {"role": "other", "allow_unique": True} for c in OTHER},
            },
            "privacy": {"k": 3, "t": 0.2},
            "algorithm": {"name": "t-first", "options": {}},
        }
        (folder / "run.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
        with _stdout():
            code = main(["-q", "run", "run.yaml", "--report", "report.json"])
        assert code == 0
        report = json.loads((folder / "report.json").read_text(encoding="utf-8"))
        yield {"folder": folder, "report": report}


def test_the_report_of_a_sqlite_run_is_the_recorded_one(published):
    _check("run_report.json", _stable(published["report"]))


def test_verify_with_report_and_source_prints_the_recorded_lines(published):
    with _stdout() as out:
        code = main(["verify", "run.yaml", "--report", "report.json", "--source"])
    assert code == 0
    printed = out.getvalue()
    assert published["report"]["run"]["id"] in printed  # the run mark, replaced below
    _check("verify_report_source.txt", RUN_ID.sub("<run id>", printed))


def test_compare_json_is_the_recorded_one(published):
    with _stdout() as out:
        code = main(["compare", "run.yaml", "--json"])
    assert code == 0
    _check("compare.json", _stable(json.loads(out.getvalue())))


def _anonymized(algorithm: str, **options: Any) -> tclose.AnonymizationResult:
    return tclose.anonymize(
        discharge_table(400, seed=1),
        QUASI_IDENTIFIERS,
        ["charge"],
        k=3,
        t=ALGORITHMS[algorithm][0],
        algorithm=algorithm,
        identifiers=["name", "patient_id"],
        other={c: {"allow_unique": True} for c in OTHER},
        **options,
    )


def test_the_api_report_is_the_recorded_one():
    _check("api_report.json", _stable(_anonymized("t-first").report))


def _partition(labels: np.ndarray) -> dict[str, Any]:
    """Cluster count and hash of ``labels`` renumbered 0, 1, ... in order of first appearance."""
    _, first, inverse = np.unique(labels, return_index=True, return_inverse=True)
    renumbered = np.argsort(np.argsort(first))[inverse].astype("<i8")
    return {
        "clusters": int(len(first)),
        "sha256": hashlib.sha256(renumbered.tobytes()).hexdigest(),
    }


def test_partition_renumbering_keeps_the_partition_only():
    same = _partition(np.array([5, 5, 2, 9, 2, 9]))
    assert same == _partition(np.array([0, 0, 1, 2, 1, 2]))
    assert same != _partition(np.array([0, 0, 1, 1, 2, 2]))


def test_every_built_in_algorithm_makes_the_recorded_partitions():
    produced = {
        algorithm: {
            variant: _partition(_anonymized(algorithm, **VARIANTS[variant]).labels)
            for variant in variants
        }
        for algorithm, (_, variants) in ALGORITHMS.items()
    }
    _check("labels.json", produced)
