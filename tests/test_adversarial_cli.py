"""Adversarial: the commands around a run, as a careless user and an attacker use them.

``tclose compare`` takes lists typed by hand (``--t 0.1,,0.2``, ``--t nan``,
``--algorithms ""``): anything that is not a setting is a usage error (exit 2) before a row is
read. It writes nothing but its page: no table, no report of the configuration, no file beside
the database; its page never replaces a file that is not such a page (a run's audit page
included). Every figure it prints is the one an independent computation from the source rows
and the partition gives. Its page shows names from the data as the audit page does.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pytest

import tclose.app.compare
import tclose.core.pipeline
import tclose.core.runner
from tclose.app.cli import main

QIS = ("age", "zip", "length_of_stay")


def _cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["-q", *args])
    return code, out.getvalue(), err.getvalue()


def _state(folder: Path) -> dict[str, tuple[str, int]]:
    """Every file under ``folder`` (relative path): its SHA-256 and its mtime (ns)."""
    return {
        str(p.relative_to(folder)): (
            hashlib.sha256(p.read_bytes()).hexdigest(),
            p.stat().st_mtime_ns,
        )
        for p in sorted(folder.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


# --- tclose compare: the lists typed by hand -----------------------------------------------


@pytest.fixture
def unreadable(sqlite_run) -> str:
    """A configuration whose source table does not exist: reading it would be exit 3, so an
    exit 2 shows the setting was refused before any row was read."""
    document = sqlite_run.config()
    document["source"]["table"] = "no_such_table"
    return str(sqlite_run.write(document))


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--t", "0.1,,0.2"),
        ("--t", ""),
        ("--t", "nan"),
        ("--t", "0.2,nan"),
        ("--t", "-1"),
        ("--t", "0"),
        ("--t", "1e309"),
        ("--t", "inf"),
        ("--t", "0x1"),
        ("--k", "3,,5"),
        ("--k", "0"),
        ("--k", "-3"),
        ("--k", "3.0"),
        ("--k", "1e3"),
        ("--k", ""),
    ],
)
def test_compare_refuses_a_malformed_number_before_reading(unreadable, option, value):
    """A NaN t compares false with every EMD (a NaN-tolerant check would pass anything), an
    empty item is not a setting, 1e309 is infinity: each is exit 2 naming the option or the
    parameter, before the source is read (its table does not exist: reading it is exit 3)."""
    code, _out, err = _cli("compare", unreadable, option, value)
    assert code == 2, err
    assert any(s in err for s in (f"'{option[2:]}'", f"{option} takes", f"argument {option}:"))
    assert "no_such_table" not in err


@pytest.mark.parametrize("value", ["", ",", " , ,", "t-first,,merge", "t-first, "])
def test_compare_refuses_an_empty_algorithm_name_before_reading(unreadable, value):
    """``--algorithms ""``, ``--algorithms ,,`` and an empty item among names are exit 2, as an
    empty item of ``--t`` or ``--k`` is: never the configuration's algorithm run silently, nor an
    empty comparison exiting 0."""
    code, out, err = _cli("compare", unreadable, "--algorithms", value)
    assert code == 2, out + err
    assert "--algorithms" in err and "no_such_table" not in err, err
    assert out == ""


def test_compare_runs_a_setting_given_twice_once(sqlite_run, capsys):
    """The same algorithm, k or t twice (``0.2,0.20``, ``t-first,t-first``, a t for an algorithm
    that ignores it) is one setting, run once."""
    config = str(sqlite_run.write(sqlite_run.config()))
    arguments = ["--algorithms", "t-first,t-first,mdav", "--k", "3,3", "--t", " 0.2 ,0.20"]
    assert main(["-q", "compare", config, *arguments, "--json"]) == 0
    runs = json.loads(capsys.readouterr().out)["runs"]
    assert [(r["algorithm"], r["k"], r["t"]) for r in runs] == [
        ("t-first", 3, 0.2),
        ("mdav", 3, None),
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "{config}", "--report", ""],
        ["run", "{config}", "--html="],
        ["compare", "{config}", "--html", ""],
        ["verify", "{config}", "--report", ""],
        ["report", "{tmp}/r.json", "-o", ""],
        ["init", "sqlite:///{tmp}/demo.db", "discharges", "--output", ""],
        ["demo", "--dir", ""],
    ],
)
def test_an_empty_option_value_is_a_usage_error(sqlite_run, tmp_path, argv):
    """An empty option value (``--report "$OUT"`` with OUT unset; ``report -o ""``, ``init -o ""``,
    ``demo --dir ""``) is exit 2 naming the option, with nothing written: never run as if the option
    were not given."""
    config = str(sqlite_run.write(sqlite_run.config()))
    before = _state(tmp_path)
    code, out, err = _cli(*[a.format(config=config, tmp=tmp_path) for a in argv])
    assert code == 2 and "is empty; give a value or leave the option out" in err, out + err
    assert _state(tmp_path) == before and sqlite_run.tables() == {"discharges"}


# --- tclose compare: honest figures ---------------------------------------------------------


def _ordered_emd(values: np.ndarray, whole: np.ndarray) -> float:
    """EMD with the ordered distance over the distinct values of ``whole``: the mean over the
    m - 1 gaps of the absolute cumulative difference of the two distributions."""
    distinct = np.unique(whole)
    share = np.array([np.mean(values == v) for v in distinct])
    table = np.array([np.mean(whole == v) for v in distinct])
    return float(np.abs(np.cumsum(share - table))[:-1].sum() / (len(distinct) - 1))


def _expected_row(x: np.ndarray, charge: np.ndarray, labels: np.ndarray, p: float) -> dict:
    """One row of ``tclose compare`` from the source values and the partition alone, by the
    definitions of docs/reports.md (numeric QIs: the published value is the cluster mean)."""
    n = len(x)
    published = np.empty_like(x)
    for label in np.unique(labels):
        published[labels == label] = x[labels == label].mean(axis=0)
    mean, population_sd, sample_sd = x.mean(axis=0), x.std(axis=0), x.std(axis=0, ddof=1)
    change = np.abs(x - published)
    z, z_published = (x - mean) / population_sd, (published - mean) / population_sd
    distances = np.sqrt(((z[:, None, :] - z_published[None, :, :]) ** 2).sum(axis=2))
    nearest = distances <= distances.min(axis=1, keepdims=True) + 1e-9
    linkage = np.mean([nearest[i, i] / nearest[i].sum() for i in range(n)])
    within = change <= p * sample_sd + 1e-12 * np.maximum(1.0, np.abs(x))
    classes: dict[tuple, list[int]] = {}
    for i, row in enumerate(map(tuple, published)):
        classes.setdefault(row, []).append(i)
    original = np.column_stack([x, charge])
    released = np.column_stack([published, charge])
    return {
        "sse": float(np.mean(((x - published) / population_sd) ** 2)),
        "il1s": float(np.mean(change / (np.sqrt(2) * sample_sd))),
        "record_linkage": float(linkage),
        "interval_disclosure": float(np.mean(within.all(axis=1))),
        "clusters": len(np.unique(labels)),
        "k_achieved": min(len(c) for c in classes.values()),
        "reidentification_max": 1 / min(len(c) for c in classes.values()),
        "t_achieved": max(_ordered_emd(charge[c], charge) for c in classes.values()),
        "correlation_max_diff": float(
            np.abs(np.corrcoef(original.T) - np.corrcoef(released.T)).max()
        ),
    }


def test_every_figure_compare_prints_is_recomputed_independently(sqlite_run, monkeypatch, capsys):
    """Two settings (t-first k = 4, t = 0.15; mdav k = 4): SSE, IL1s, record linkage, interval
    disclosure, clusters, k and t achieved, re-identification and the correlation change that
    ``tclose compare --json`` prints equal the same figures computed here with plain NumPy
    from the source rows (read with sqlite3) and the partition the algorithm returned, and the
    printed table shows the same numbers rounded."""
    partitions, keys = [], []
    cluster_rows = tclose.core.pipeline.cluster_rows
    read_inputs = tclose.core.pipeline.read_inputs

    def recording_cluster_rows(*args, **kwargs):
        result = cluster_rows(*args, **kwargs)
        partitions.append(result[0].copy())
        return result

    def recording_read_inputs(*args, **kwargs):
        result = read_inputs(*args, **kwargs)
        keys.append(result[0].copy())
        return result

    monkeypatch.setattr(tclose.core.pipeline, "cluster_rows", recording_cluster_rows)
    monkeypatch.setattr(tclose.core.pipeline, "read_inputs", recording_read_inputs)
    config = str(sqlite_run.write(sqlite_run.config()))
    settings = ["--algorithms", "t-first,mdav", "--k", "4", "--t", "0.15"]
    assert main(["-q", "compare", config, *settings, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert main(["compare", config, *settings]) == 0
    table = capsys.readouterr().out.splitlines()[1:3]  # two settings; the legend follows

    with sqlite3.connect(sqlite_run.db) as connection:
        rows = {
            r[0]: r[1:]
            for r in connection.execute(
                f"SELECT patient_id, {', '.join(QIS)}, charge FROM discharges"
            )
        }
    source = np.array([rows[k] for k in keys[0].tolist()], dtype=float)
    x, charge = source[:, :-1], source[:, -1]
    assert result["source"] == {"table": "discharges", "rows": len(rows)}
    assert [(r["algorithm"], r["k"], r["t"]) for r in result["runs"]] == [
        ("t-first", 4, 0.15),
        ("mdav", 4, None),
    ]
    for run, labels, line in zip(result["runs"], partitions[:2], table, strict=True):
        expected = _expected_row(x, charge, labels, result["interval_p"])
        for figure, value in expected.items():
            assert run[figure] == pytest.approx(value, rel=1e-9, abs=1e-12), figure
        assert run["k_achieved"] >= 4 and run["verified"] is True
        if run["t"] is not None:
            assert run["t_achieved"] <= 0.15 + 1e-9
        cells = line.split()
        shown = [expected[f] for f in ("sse", "il1s", "record_linkage", "interval_disclosure")]
        assert cells[3:7] == [f"{v:.4f}" for v in shown], line
        assert int(cells[7]) == expected["clusters"] and int(cells[8]) <= expected["clusters"]
        assert cells[9] == f"{expected['t_achieved']:.4f}", line


# --- tclose compare: writes nothing but its page ---------------------------------------------


def test_compare_writes_no_table_no_report_and_no_file_but_its_page(sqlite_run, tmp_path):
    """The configuration names a JSON and an HTML report and an audit table, and its target
    exists: compare writes none of them, leaves every file in the folder (the database and
    its side files included) byte for byte and untouched (mtime), and adds its page only."""
    document = sqlite_run.config()
    document["report"] = {
        "json": str(tmp_path / "reports" / "run.json"),
        "html": str(tmp_path / "reports" / "run.html"),
        "table": "tclose_audit",
    }
    config = sqlite_run.write(document)
    with sqlite3.connect(sqlite_run.db) as connection:
        connection.execute("CREATE TABLE discharges_anon (x INTEGER)")
    tables, before = sqlite_run.tables(), _state(tmp_path)
    code, out, err = _cli("compare", str(config), "--k", "3,5", "--html", str(tmp_path / "m.html"))
    assert code == 0, out + err
    after = _state(tmp_path)
    assert after.pop("m.html") and after == before
    assert sqlite_run.tables() == tables and sqlite_run.rows("discharges_anon") == []
    assert not (tmp_path / "reports").exists()


def test_compare_html_never_replaces_the_audit_page_of_a_run(sqlite_run, tmp_path):
    """Each command replaces only a page of its own kind: ``tclose compare --html`` never replaces a
    run's audit page, ``tclose run --html`` and ``tclose report -o`` never a map (exit 2, nothing
    written)."""
    audit, page = tmp_path / "run.html", tmp_path / "map.html"
    document = sqlite_run.config()
    document["report"] = {"json": str(tmp_path / "run.json"), "html": str(audit)}
    config = str(sqlite_run.write(document))
    assert _cli("run", config, "--dry-run")[0] == 0
    assert _cli("compare", config, "--html", str(page))[0] == 0
    before = _state(tmp_path)
    for report in (audit, tmp_path / "run.json"):
        code, _out, err = _cli("compare", config, "--html", str(report))
        assert code == 2 and "--html: The report path" in err, err
    code, _out, err = _cli("report", str(tmp_path / "run.json"), "-o", str(page))
    assert code == 2 and "-o: The report path" in err, err
    code, _out, err = _cli("run", config, "--dry-run", "--html", str(page))
    assert code == 2 and "At key: html" in err, err
    assert _state(tmp_path) == before
    # and each still replaces its own
    assert _cli("compare", config, "--html", str(page))[0] == 0
    assert _cli("report", str(tmp_path / "run.json"), "-o", str(audit))[0] == 0


def test_compare_page_shows_control_characters_and_bidi_overrides_as_escapes(sqlite_run, tmp_path):
    """The map's title and heading show a table name's right-to-left override (U+202E) and terminal
    escapes as escapes (``\u202e``), as the audit page does: no override reverses the text after it.
    """
    name = "dis\u202echarges\x1b[2J"
    with sqlite3.connect(sqlite_run.db) as connection:
        connection.execute(f'CREATE TABLE "{name}" AS SELECT * FROM discharges')
    document = sqlite_run.config()
    document["source"]["table"] = name
    page = tmp_path / "map.html"
    code, out, err = _cli("compare", str(sqlite_run.write(document)), "--html", str(page))
    assert code == 0, out + err
    text = page.read_text(encoding="utf-8")
    assert not any(c in text for c in "\u202e\x1b"), "a raw control character"
    assert "dis\\u202echarges\\x1b[2J" in text
    # self-contained: the only URL is SVG's namespace; nothing is loaded
    assert set(re.findall(r"https?://[^\s\"'<>]+", text)) == {"http://www.w3.org/2000/svg"}
    assert not re.search(r"\b(src|href)\s*=|@import|url\(|<script|<link", text)


# --- every command: the files it reads and writes ------------------------------------------

_DEVICE_RUNNER = """
import contextlib, io, json, resource, sys
resource.setrlimit(resource.RLIMIT_AS, (1 << 31, 1 << 31))  # a regression fails, not the host
from tclose.app.cli import main
results = []
for argv in json.loads(sys.argv[1]):
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["-q", *argv])
    results.append((code, err.getvalue()))
print(json.dumps(results))
"""


def test_a_device_given_as_an_input_file_is_refused_not_read_forever(sqlite_run, tmp_path):
    """``tclose report /dev/zero``, ``verify --report /dev/urandom``, ``run /dev/zero`` (the
    configuration) and a hierarchy file ``/dev/zero`` are exit 2 naming the file as a device, never
    read whole (which never ends)."""
    import subprocess
    import sys

    config = str(sqlite_run.write(sqlite_run.config()))
    hierarchy = sqlite_run.config()
    hierarchy["attributes"]["ward"] = {
        "role": "quasi_identifier",
        "type": "nominal",
        "hierarchy": "/dev/zero",
    }
    cases = [
        ["report", "/dev/zero", "-o", str(tmp_path / "z.html")],
        ["verify", config, "--report", "/dev/urandom"],
        ["run", "/dev/zero"],
        ["compare", "/dev/zero"],
        ["run", "--dry-run", str(sqlite_run.write(hierarchy, "hierarchy.yaml"))],
    ]
    done = subprocess.run(
        [sys.executable, "-c", _DEVICE_RUNNER, json.dumps(cases)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    for argv, (code, err) in zip(cases, json.loads(done.stdout), strict=True):
        assert code == 2 and "device, not a file" in err, (argv, code, err)
    assert sqlite_run.tables() == {"discharges"} and not (tmp_path / "z.html").exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "{config}", "--k", "3", "--k", "5"],
        ["compare", "{config}", "--t", "0.1", "--t=0.2"],
        ["compare", "{config}", "--algorithms", "mdav", "--algorithms", "merge"],
        ["compare", "{config}", "--html", "{tmp}/a.html", "--html", "{tmp}/b.html"],
        ["run", "{config}", "--report", "{tmp}/a.json", "--report", "{tmp}/b.json"],
        ["run", "{config}", "--html", "{tmp}/a.html", "--html", "{tmp}/b.html"],
        ["verify", "{config}", "--report", "{tmp}/a.json", "--report", "{tmp}/b.json"],
        ["report", "{tmp}/a.json", "-o", "{tmp}/a.html", "--output", "{tmp}/b.html"],
        ["init", "sqlite:///{tmp}/demo.db", "discharges", "-o", "{tmp}/a", "-o", "{tmp}/b"],
        ["demo", "--dir", "{tmp}/d", "--rows", "50", "--rows", "60"],
    ],
)
def test_an_option_given_twice_is_a_usage_error(sqlite_run, tmp_path, argv):
    """An option given twice (``compare --k 3 --k 5``, ``run --report a.json --report b.json``) is
    exit 2 naming the option, and nothing is run or written: a script that appends options never
    runs another setting than it shows."""
    config = str(sqlite_run.write(sqlite_run.config()))
    before = _state(tmp_path)
    argv = [a.format(config=config, tmp=tmp_path) for a in argv]
    code, out, err = _cli(*argv)
    option = next(a for a in reversed(argv) if a.startswith("-")).split("=")[0]
    assert code == 2 and "given twice; give it once" in err, out + err
    assert f"argument {option}" in err or f"/{option}:" in err, err
    assert _state(tmp_path) == before and sqlite_run.tables() == {"discharges"}


def test_a_dry_run_onto_an_existing_target_changes_no_table_and_adds_no_file(sqlite_run, tmp_path):
    """``if_exists: replace`` and ``--dry-run``: the target keeps its rows, no table is added
    or left behind (the staging table is dropped), and without a report path no file appears
    beside the database (no report, no page, no journal)."""
    document = sqlite_run.config()
    document["target"]["if_exists"] = "replace"
    config = str(sqlite_run.write(document))
    assert _cli("run", config)[0] == 0  # a release, which if_exists: replace may replace
    released = sqlite_run.rows("discharges_anon")
    source, files = sqlite_run.rows("discharges"), set(_state(tmp_path))
    code, out, err = _cli("run", config, "--dry-run")
    assert code == 0, out + err
    assert sqlite_run.tables() == {"discharges", "discharges_anon"}
    assert sqlite_run.rows("discharges_anon") == released
    assert sqlite_run.rows("discharges") == source
    assert set(_state(tmp_path)) == files


# --- exit codes --------------------------------------------------------------------------------


def test_compare_exits_1_when_a_setting_fails_verification(
    sqlite_run, singletons_registry, monkeypatch, tmp_path
):
    """README: exit 1 is a failed verification. An algorithm that breaks k (every row its own
    cluster) is shown as ``NO`` and a red point, beside the settings that verified."""
    monkeypatch.setattr(tclose.app.compare, "load_registry", lambda: singletons_registry)
    config, page = str(sqlite_run.write(sqlite_run.config())), tmp_path / "map.html"
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["compare", config, "--algorithms", "t-first,singletons", "--html", str(page)])
    assert code == 1
    lines = out.getvalue().splitlines()
    assert lines[1].split()[0] == "t-first" and lines[1].split()[-2] == "yes"
    assert lines[2].split()[0] == "singletons" and lines[2].split()[-2] == "NO"
    text = page.read_text(encoding="utf-8")
    assert text.count('fill="#c0392b"') == 1 and text.count('fill="#2f6fb0"') == 1


def test_compare_interrupted_exits_130_and_writes_no_page(sqlite_run, monkeypatch, tmp_path):
    """Ctrl-C during the second setting: exit 130, ``interrupted.``, no page, no JSON."""
    calls = []
    cluster_rows = tclose.core.pipeline.cluster_rows

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return cluster_rows(*args, **kwargs)

    monkeypatch.setattr(tclose.core.pipeline, "cluster_rows", interrupted)
    config, page = str(sqlite_run.write(sqlite_run.config())), tmp_path / "map.html"
    code, out, err = _cli("compare", config, "--k", "3,4", "--json", "--html", str(page))
    assert code == 130 and "interrupted." in err and out == ""
    assert not page.exists() and sqlite_run.tables() == {"discharges"}


# --- tclose report: a report edited by hand -------------------------------------------------


@pytest.fixture(scope="module")
def dry_report(tmp_path_factory) -> dict:
    """The report of a dry run (k = 3, t = 0.2 on charge), parsed."""
    from tclose.app.demo import create_demo_database
    from tests.conftest import _base_config

    folder = tmp_path_factory.mktemp("dry_report")
    create_demo_database(folder / "demo.db", n_rows=400, seed=1)
    document = _base_config(folder / "demo.db")
    document["report"] = {"json": str(folder / "run.json")}
    config = folder / "run.yaml"
    config.write_text(json.dumps(document), encoding="utf-8")
    code, out, err = _cli("run", str(config), "--dry-run")
    assert code == 0, out + err
    return json.loads((folder / "run.json").read_text(encoding="utf-8"))


def _check(report: dict, name: str) -> dict:
    return next(c for c in report["verification"]["checks"] if c["name"] == name)


def _drop_check(name: str):
    def edit(report: dict) -> None:
        checks = report["verification"]["checks"]
        checks.remove(_check(report, name))

    return edit


def _set(name: str, **fields):
    def edit(report: dict) -> None:
        _check(report, name).update(fields)

    return edit


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        (_drop_check("k_anonymity"), "no k_anonymity check"),
        (_drop_check("t_closeness:charge"), "no t_closeness:charge check"),
        (_set("k_anonymity", actual=1), "its check 'k_anonymity' passed with 1 < 3"),
        (_set("k_anonymity", actual=None), "its check 'k_anonymity' passed with None < 3"),
        (_set("t_closeness:charge", actual=0.9), "'t_closeness:charge' passed with 0.9 > 0.2"),
        (_set("t_closeness:charge", actual=None), "'t_closeness:charge' passed with None > 0.2"),
    ],
)
def test_a_report_whose_checks_do_not_make_its_verdict_is_not_shown_as_verified(
    dry_report, tmp_path, edit, said
):
    """A verdict needs the k check, a t check per enforced confidential attribute, and figures that
    pass them: a report edited to drop the check that failed, or whose k or t check says ``passed``
    beside figures that fail it, is exit 2 naming the check, and no page."""
    import copy

    report = copy.deepcopy(dry_report)
    edit(report)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    code, out, err = _cli("report", str(path), "-o", str(tmp_path / "p.html"))
    assert code == 2 and said in err, out + err
    assert "verification.passed is true, but" in err and not (tmp_path / "p.html").exists()


def test_tclose_report_prints_the_verdict_and_the_checks_that_failed(dry_report, tmp_path, capsys):
    """``tclose report`` of a failed run prints the report's verdict and names its failed checks
    (the page shows them as FAIL rows)."""
    import copy

    report = copy.deepcopy(dry_report)
    report["verification"]["passed"] = False
    _set("t_closeness:charge", passed=False, actual=0.3)(report)
    _set("linkage", passed=False)(report)
    path = tmp_path / "failed.json"
    path.write_text(json.dumps(report), encoding="utf-8")
    assert main(["report", str(path)]) == 0
    out = capsys.readouterr().out
    assert "verdict in the report: NOT verified (failed: t_closeness:charge, linkage)" in out
    text = (tmp_path / "failed.html").read_text(encoding="utf-8")
    assert "Verification FAILED" in text and text.count(">FAIL<") == 2
    path.write_text(json.dumps(dry_report), encoding="utf-8")
    assert main(["report", str(path)]) == 0
    assert "verdict in the report: verified (5 checks passed)" in capsys.readouterr().out


def test_compare_refuses_a_k_larger_than_the_table_before_the_first_setting(
    sqlite_run, monkeypatch
):
    """``--k 3,4,5,401`` on 400 rows is exit 3 naming k = 401 right after reading, before any
    setting runs: no comparison loses its settings to the last one."""
    ran = []
    cluster_rows = tclose.core.pipeline.cluster_rows

    def counted(*args, **kwargs):
        ran.append(args[4])
        return cluster_rows(*args, **kwargs)

    monkeypatch.setattr(tclose.core.pipeline, "cluster_rows", counted)
    config = str(sqlite_run.write(sqlite_run.config()))
    code, out, err = _cli("compare", config, "--k", "3,401,5")
    assert code == 3 and "has 400 rows, fewer than k = 401" in err, out + err
    assert ran == []


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["report", "{report}", "-o", "{tmp}/afile/p.html"], "-o: Cannot write the page"),
        (["report", "{report}", "-o", "{tmp}/{long}.html"], "-o: Cannot write the page"),
        (["compare", "{config}", "--html", "{tmp}/afile/m.html"], "--html: Cannot write the"),
        (["compare", "{config}", "--html", "{tmp}/{long}.html"], "--html: Cannot write the"),
        (["init", "sqlite:///{db}", "discharges", "-o", "{tmp}/afile/x"], "Cannot write"),
        (["init", "sqlite:///{db}", "discharges", "-o", "{tmp}/{long}"], "Cannot write the"),
        (["demo", "--rows", "-5", "--dir", "{tmp}/d"], "--rows -5: the demo needs"),
        (["demo", "--rows", "0", "--dir", "{tmp}/d"], "--rows 0: the demo needs"),
        (["demo", "--rows", "4", "--dir", "{tmp}/d"], "--rows 4: the demo needs"),
    ],
)
def test_an_output_path_that_cannot_be_written_is_a_usage_error_before_any_work(
    sqlite_run, dry_report, tmp_path, argv, said
):
    """An output path that cannot be written (a file where a folder must be, a name longer than the
    folder takes) is exit 2 before anything is read or written, for ``report -o``, ``compare
    --html``, ``init -o`` and ``run``; so is ``demo --rows`` below k."""
    (tmp_path / "afile").write_text("precious", encoding="utf-8")
    report = tmp_path / "r.json"
    report.write_text(json.dumps(dry_report), encoding="utf-8")
    config = str(sqlite_run.write(sqlite_run.config()))
    before = _state(tmp_path)
    values = {"report": report, "config": config, "tmp": tmp_path, "db": sqlite_run.db}
    argv = [a.format(**values, long="x" * 300) for a in argv]
    code, out, err = _cli(*argv)
    assert code == 2 and said in err, out + err
    assert _state(tmp_path) == before and not (tmp_path / "d").exists()


def test_compare_refuses_more_settings_than_it_runs_before_reading(unreadable):
    """More than ``MAX_SETTINGS`` settings (``--k 1,...,5000`` with 1000 values of t and three
    algorithms: 15 million) is exit 2 at once, with the count, before they are built; the limit
    itself is accepted."""
    import time

    from tclose.app.compare import MAX_SETTINGS

    ks = ",".join(str(k) for k in range(1, 5001))
    ts = ",".join(str(t / 1000) for t in range(1, 1001))
    started = time.perf_counter()
    code, _out, err = _cli("compare", unreadable, "--k", ks, "--t", ts, "--algorithms", "mdav")
    assert code == 2 and "make up to 5,000,000 settings (1 × 5000 × 1000)" in err, err
    assert time.perf_counter() - started < 30
    ks = ",".join(str(k) for k in range(1, MAX_SETTINGS // 2 + 1))
    code, _out, err = _cli("compare", unreadable, "--k", ks, "--t", "0.1,0.2")
    assert code == 3 and "no_such_table" in err, err  # read: the settings were accepted


@pytest.mark.parametrize("key", ["hierarchy", "password_file"])
def test_a_hierarchy_or_password_file_that_is_not_utf8_is_a_usage_error(sqlite_run, key):
    """A Latin-1 hierarchy CSV or password file is exit 2 naming the file and the byte's position
    only: never an internal error, never a byte of the password."""
    secret = sqlite_run.tmp_path / "latin1.txt"
    secret.write_bytes(b"s\xe9cret;top\nother;top\n")
    document = sqlite_run.config()
    if key == "hierarchy":
        document["attributes"]["ward"] = {
            "role": "quasi_identifier",
            "type": "nominal",
            "hierarchy": str(secret),
        }
    else:
        document["source"]["password_file"] = str(secret)
    code, out, err = _cli("run", "--dry-run", str(sqlite_run.write(document)))
    assert code == 2 and "is not UTF-8 text (byte 2 is not UTF-8)" in err, out + err
    assert "0xe9" not in err and "xe9" not in err and "cret" not in err
    assert sqlite_run.tables() == {"discharges"}


def test_compare_without_t_for_an_algorithm_that_needs_it_names_the_option(sqlite_run):
    """A configuration of mdav (no privacy.t) compared with t-first and no ``--t``: exit 2 naming
    ``--t``, not privacy.t (which the YAML does not hold), before any row is read."""
    document = sqlite_run.config(privacy={"k": 3}, algorithm={"name": "mdav", "options": {}})
    document["source"]["table"] = "no_such_table"
    config = str(sqlite_run.write(document))
    code, out, err = _cli("compare", config, "--algorithms", "mdav,t-first")
    assert code == 2 and "error: --t: Algorithm t-first needs t: give --t" in err, out + err
