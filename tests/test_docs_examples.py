"""The user docs (README.md, docs/*.md) tell the truth: their links resolve, they name no path of
one machine, and their examples run and print what the docs show."""

from __future__ import annotations

import importlib
import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import tclose
from tclose.app.cli import main
from tclose.app.demo import create_demo_database
from tclose.base.config import load_config
from tclose.core.runner import run

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def _prose(text: str) -> str:
    """The Markdown outside code blocks and inline code."""
    return re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))


def _code_blocks(path: Path, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", path.read_text(encoding="utf-8"), re.M | re.S)


def _anchors(path: Path) -> set[str]:
    """The anchors GitHub gives the headings of a Markdown file."""
    anchors: set[str] = set()
    seen: dict[str, int] = {}
    for heading in re.findall(r"^#{1,6} +(.+?) *#*$", FENCE.sub("", path.read_text()), re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.replace("`", "").replace("*", "").lower().strip())
        slug = slug.replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def test_every_relative_link_of_the_docs_points_at_an_existing_file_and_anchor():
    broken = []
    links = 0
    for doc in DOCS:
        for link in re.findall(r"\]\(([^)\s]+)\)", _prose(doc.read_text(encoding="utf-8"))):
            if re.match(r"[a-z][a-z0-9+.-]*:", link):
                continue  # https://, mailto:
            links += 1
            path, _, anchor = link.partition("#")
            target = (doc.parent / path).resolve() if path else doc
            if not target.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {link} (no such file)")
            elif anchor and target.suffix == ".md" and anchor not in _anchors(target):
                broken.append(f"{doc.relative_to(ROOT)}: {link} (no such heading)")
    assert links > 50, "the link pattern found almost no link: is it still right?"
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_every_file_and_test_the_docs_name_exists():
    """`tests/x.py::test_y*`, `bench/...`, `examples/...`, `configs/...` named in the docs."""
    missing = []
    pattern = r"\b((?:tests|bench|examples|configs)/[\w.*/-]+\w)(?:::(\w[\w*]*))?"
    for doc in DOCS:
        for path, test in re.findall(pattern, doc.read_text(encoding="utf-8")):
            files = list(ROOT.glob(path))
            if not files:
                missing.append(f"{doc.relative_to(ROOT)}: {path}")
                continue
            if test:
                name = re.compile(r"^def " + test.replace("*", r"\w*") + r"\(", re.M)
                if not any(name.search(f.read_text(encoding="utf-8")) for f in files):
                    missing.append(f"{doc.relative_to(ROOT)}: {path}::{test}")
    # a test named alone (`test_nasty_names_with_each_mariadb_driver`): in some test file
    sources = "\n".join(
        f.read_text(encoding="utf-8")
        for f in [*ROOT.glob("tests/*.py"), *ROOT.glob("examples/*/tests/*.py")]
    )
    for doc in DOCS:
        for test in re.findall(r"`(test_[\w*]+)`", doc.read_text(encoding="utf-8")):
            if not re.search(r"^def " + test.replace("*", r"\w*") + r"\(", sources, re.M):
                missing.append(f"{doc.relative_to(ROOT)}: {test}")
    assert not missing, "the docs name what does not exist:\n" + "\n".join(missing)


def test_no_doc_config_or_bench_script_names_a_path_of_this_machine():
    """Docs and scripts say `../shared/data/...`, never where one machine keeps it."""
    found = []
    files = [*DOCS, *(ROOT / "bench").rglob("*.py"), *(ROOT / "configs").rglob("*.yaml")]
    files += [p for p in (ROOT / "examples").rglob("*") if p.suffix in (".py", ".md", ".toml")]
    for path in files:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"(?<![\w.@])/(?:work|root|home|Users)/", line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not found, "absolute paths of a machine:\n" + "\n".join(found)


USER_DOCS = [ROOT / "README.md"] + [
    ROOT / "docs" / f"{name}.md"
    for name in ("guide", "attributes", "reports", "plugins", "databases")
]


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            if not hasattr(obj, part):
                return False
            obj = getattr(obj, part)
        return True
    return False


def test_every_tclose_name_the_user_docs_give_exists():
    """`tclose.measures.evaluate`, `tclose.testing.check_connector`, ...: a user who imports
    what the docs name finds it."""
    names = {
        (name, doc.name)
        for doc in USER_DOCS
        for name in re.findall(r"`(tclose(?:\.[A-Za-z_]\w*)+)", doc.read_text(encoding="utf-8"))
    }
    assert len(names) > 30
    missing = sorted(f"{doc}: {name}" for name, doc in names if not _resolves(name))
    assert not missing, "the docs name what tclose does not have:\n" + "\n".join(missing)


def _patients(n: int = 200) -> pd.DataFrame:
    rng = np.random.default_rng(5)
    return pd.DataFrame(
        {
            "name": [f"p{i}" for i in range(n)],
            "age": rng.integers(20, 80, n),
            "zip": rng.integers(1000, 1010, n),
            "charge": rng.normal(1000.0, 200.0, n),
            "ward": rng.choice(["a", "b", "c"], n),
        }
    )


def test_the_readme_python_example_runs_as_written():
    df = _patients()
    published = tclose.anonymize(
        df, ["age", "zip"], ["charge"], k=5, identifiers=["name"], other=["ward"], keep_order=True
    ).data
    namespace = {"df": df, "original_df": df, "published_df": published}
    (block,) = [b for b in _code_blocks(ROOT / "README.md", "python") if "anonymize" in b]
    exec(block, namespace)
    result = namespace["result"]
    assert isinstance(result.data.index, pd.RangeIndex) and "name" not in result.data
    assert result.report["verification"]["passed"]
    assert 0 <= result.report["risk"]["record_linkage"] <= 1


def test_the_evaluate_example_of_reports_md_runs_as_written():
    df = _patients()
    published = tclose.anonymize(
        df, ["age", "zip"], ["charge"], k=5, identifiers=["name"], other=["ward"], keep_order=True
    ).data
    namespace = {"original_df": df, "published_df": published}
    (block,) = [b for b in _code_blocks(ROOT / "docs" / "reports.md", "python") if "evaluate" in b]
    exec(block, namespace)
    figures = namespace["figures"]
    assert 0 <= figures["risk"]["record_linkage"] <= 1 and figures["utility"]["il1s"] > 0


def test_the_third_party_algorithm_of_plugins_md_runs_in_blocks_as_written(capsys):
    (block,) = [b for b in _code_blocks(ROOT / "docs" / "plugins.md", "python") if "blocks=4" in b]
    exec(block, {"__name__": "plugins_md_example"})
    shown = re.search(r"^prints `([^`]*)`", (ROOT / "docs" / "plugins.md").read_text(), re.M)
    assert capsys.readouterr().out.strip() == shown.group(1) == "4 {'min': 750, 'max': 750} True"


def _shape(line: str) -> str:
    """A line of `tclose verify` with its run id and numbers blanked."""
    return re.sub(r"\d+(\.\d+)?", "N", re.sub(r"\b[0-9a-f]{32}\b", "RUN", line))


def test_tclose_verify_prints_what_reports_md_shows(tmp_path, capsys):
    """docs/reports.md shows the output of `tclose verify configs/quickstart.yaml` after
    `tclose demo`: the same lines, in the same order (numbers aside)."""
    database = tmp_path / "demo.db"
    create_demo_database(database, n_rows=500, seed=3)
    document = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    document["source"]["url"] = f"sqlite:///{database}"
    document["report"]["json"] = str(tmp_path / "report.json")
    config = tmp_path / "quickstart.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main(["-q", "run", str(config)]) == 0
    capsys.readouterr()

    assert main(["verify", str(config)]) == 0
    printed = capsys.readouterr().out.splitlines()
    (shown,) = [b for b in _code_blocks(ROOT / "docs" / "reports.md", "text") if "verdict:" in b]
    assert [_shape(line) for line in printed] == [_shape(line) for line in shown.splitlines()]


def test_a_null_names_only_the_missing_policies_the_attribute_accepts(sqlite_run):
    """docs/attributes.md: `category` is for ordinal and nominal attributes only, so the advice
    of a NULL in a numeric column offers `exclude-rows` alone, and following it publishes."""
    with sqlite3.connect(sqlite_run.db) as connection:
        connection.execute("UPDATE discharges SET ward = NULL WHERE patient_id < 4")
        connection.execute("UPDATE discharges SET charge = NULL WHERE patient_id BETWEEN 4 AND 6")
    document = sqlite_run.config()
    document["attributes"]["ward"] = {"role": "quasi_identifier", "type": "nominal"}
    document["attributes"]["ward"]["missing"] = "category"
    with pytest.raises(tclose.errors.DataError) as numeric:
        run(load_config(sqlite_run.write(document)))
    assert "'charge'" in str(numeric.value) and "'exclude-rows'" in str(numeric.value)
    assert "'category'" not in str(numeric.value)

    document["attributes"]["charge"]["missing"] = "exclude-rows"
    del document["attributes"]["ward"]["missing"]
    with pytest.raises(tclose.errors.DataError) as nominal:
        run(load_config(sqlite_run.write(document)))
    assert "'ward'" in str(nominal.value)
    assert "'category' or 'exclude-rows'" in str(nominal.value)

    document["attributes"]["ward"]["missing"] = "category"
    result = run(load_config(sqlite_run.write(document)))
    assert result.published and result.report["source"]["rows_set_aside"] == 3


def test_the_api_report_lists_the_columns_allowed_to_be_unique_as_a_run_does():
    """docs/guide.md: a pass-through column with `allow_unique` is published and the report
    lists it (`verification.allowed_unique`); the API's report listed none."""
    df = _patients().assign(notes=lambda d: [f"n{i}" for i in range(len(d))])
    result = tclose.anonymize(
        df,
        ["age", "zip"],
        ["charge"],
        k=5,
        identifiers=["name"],
        other={"ward": {}, "notes": {"allow_unique": True}},
    )
    assert result.report["verification"]["allowed_unique"] == ["notes"]
    assert result.report["verification"]["linking_columns"] == []
    assert result.data["notes"].is_unique


def test_the_attributes_md_examples_run_as_written(tmp_path):
    """docs/attributes.md's attribute block, its CSV hierarchy and its YAML hierarchy (given to
    `roof`) on a table of those columns: published, every type kept, NULL incomes set aside."""
    import datetime

    attributes_block, hierarchy_block = _code_blocks(ROOT / "docs" / "attributes.md", "yaml")[:2]
    document = yaml.safe_load(attributes_block)
    hierarchy = yaml.safe_load(hierarchy_block)["hierarchy"]
    document["attributes"]["roof"]["hierarchy"] = hierarchy
    roofs = [leaf for leaves in hierarchy["any"].values() for leaf in leaves]
    chapters = ["A01", "A02", "B01", "B02", "C01"]
    (tmp_path / "icd_chapters.csv").write_text("".join(f"{x};{x[0]};any\n" for x in chapters))
    rng = np.random.default_rng(2)
    rows = [
        (
            i,
            int(rng.integers(18, 90)),
            ["none", "primary", "secondary", "tertiary"][i % 4],
            "FM"[i % 2],
            (
                datetime.date(2020, 1, 1) + datetime.timedelta(days=int(rng.integers(700)))
            ).isoformat(),
            None if i % 17 == 0 else roofs[i % len(roofs)],
            None if i % 23 == 0 else float(rng.normal(30000, 5000)),
            chapters[i % len(chapters)],
        )
        for i in range(300)
    ]
    database = tmp_path / "people.db"
    with sqlite3.connect(database) as connection:
        connection.execute(
            "CREATE TABLE people (id INTEGER PRIMARY KEY, age INTEGER, education TEXT, sex TEXT, "
            "admitted DATE, roof TEXT, income REAL, diagnosis TEXT)"
        )
        connection.executemany("INSERT INTO people VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    document["source"] = {"url": f"sqlite:///{database}", "table": "people"}
    document["target"] = {"table": "people_anon"}
    document["privacy"] = {"k": 5, "t": 0.3}
    config = tmp_path / "people.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")

    result = run(load_config(config))
    assert result.published and result.report["verification"]["passed"]
    assert result.report["source"]["rows_set_aside_by_column"] == {"income": 14}
    assert result.report["target"]["rows"] == 300 - 14
    with sqlite3.connect(database) as connection:
        published = connection.execute(
            "SELECT age, education, admitted, roof, diagnosis FROM people_anon"
        ).fetchall()
    assert all(isinstance(age, int) for age, *_ in published)  # round: true keeps INTEGER
    assert {row[1] for row in published} <= {"none", "primary", "secondary", "tertiary"}
    assert all(datetime.date.fromisoformat(row[2]) for row in published)
    assert {row[3] for row in published} <= {*roofs, None}
    assert {row[4] for row in published} == set(chapters)


def test_the_natural_order_of_text_categories_is_their_code_point_order():
    """docs/attributes.md: without `categories`, numbers in number order, other text in code-point
    order (`Z` before `a`), which the report's distributions follow."""
    rng = np.random.default_rng(4)
    df = pd.DataFrame(
        {
            "level": rng.choice(["10", "9", "100"], 120),
            "grade": rng.choice(["b", "a", "Z"], 120),
            "charge": rng.normal(0.0, 1.0, 120),
        }
    )
    report = tclose.anonymize(df, {"level": "ordinal", "grade": "ordinal"}, "charge", k=5).report
    assert report["distributions"]["level"]["categories"] == ["9", "10", "100"]
    assert report["distributions"]["grade"]["categories"] == ["Z", "a", "b"]


def _documented_report_fields() -> set[str]:
    """The fields the table of docs/reports.md ("The JSON report") names: `clusters.count`,
    `.min` (a sibling of the field before it), ..."""
    text = (ROOT / "docs" / "reports.md").read_text(encoding="utf-8")
    table = text[text.index("## The JSON report") : text.index("### Definitions")]
    fields: set[str] = set()
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        parent = ""
        for name in re.findall(r"`([^`]+)`", line.split("|")[1]):
            if name.startswith("."):
                name = parent + name
            parent = name.rsplit(".", 1)[0] if "." in name else name
            fields.add(name)
    return fields


def test_the_report_holds_every_field_reports_md_describes_and_no_other(sqlite_run, tmp_path):
    """Every field of the table is in a run's report, and every field of the report's first two
    levels is in the table (below `config`, `attributes`, `distributions` and the like, which
    are keyed by column or copied)."""
    report_path = tmp_path / "report.json"
    document = sqlite_run.config(report={"json": str(report_path), "table": "tclose_audit"})
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 0
    report = json.loads(report_path.read_text(encoding="utf-8"))
    documented = _documented_report_fields()

    def present(field: str) -> bool:
        node = report
        for part in field.split("."):
            if not isinstance(node, dict) or part not in node:
                return False
            node = node[part]
        return True

    assert sorted(f for f in documented if not present(f)) == []
    undocumented = [
        f"{key}.{inner}" if inner else key
        for key, value in report.items()
        for inner in (value if isinstance(value, dict) and key not in documented else [""])
        if (f"{key}.{inner}" if inner else key) not in documented
    ]
    assert undocumented == []


def test_tclose_compare_prints_what_reports_md_shows(tmp_path, capsys):
    """The table of `tclose compare` in docs/reports.md: the same columns and rows (numbers and
    their padding aside)."""
    database = tmp_path / "demo.db"
    create_demo_database(database, n_rows=300, seed=3)
    document = yaml.safe_load((ROOT / "configs" / "quickstart.yaml").read_text())
    document["source"]["url"] = f"sqlite:///{database}"
    config = tmp_path / "quickstart.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    argv = ["compare", str(config), "--algorithms", "t-first,merge,mdav", "--t", "0.1"]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    (shown,) = [b for b in _code_blocks(ROOT / "docs" / "reports.md", "text") if "max EMD" in b]
    assert printed[0] == shown.splitlines()[0]
    assert [_shape(line).split() for line in printed] == [
        _shape(line).split() for line in shown.splitlines()
    ]


def test_order_hierarchy_without_a_hierarchy_is_a_configuration_error(sqlite_run):
    """docs/attributes.md: `order: hierarchy` orders the leaves of the attribute's hierarchy;
    without one it is exit 2 naming the key."""
    document = sqlite_run.config()
    document["attributes"]["ward"] = {
        "role": "confidential",
        "type": "nominal",
        "distance_options": {"order": "hierarchy"},
    }
    config = sqlite_run.write(document)
    with pytest.raises(tclose.errors.ConfigError) as error:
        run(load_config(config))
    assert "attributes.ward.distance_options ==> At key: order" in str(error.value)
    assert "hierarchy" in str(error.value).splitlines()[-1]
    assert main(["-q", "run", str(config)]) == 2


@pytest.mark.parametrize(
    ("column", "spec", "key"),
    [
        ("ward", {"role": "other", "missing": "category"}, "missing"),
        ("ward", {"role": "other", "categories": ["a", "b"]}, "categories"),
        ("ward", {"role": "identifier", "hierarchy": {"any": ["a", "b"]}}, "hierarchy"),
        ("zip", {"role": "quasi_identifier", "distance_options": {}}, "distance_options"),
        ("ward", {"role": "other", "distance_options": {}}, "distance_options"),
        ("charge", {"role": "confidential", "weight": 2}, "weight"),
        ("age", {"role": "quasi_identifier", "categories": [1, 2]}, "categories"),
    ],
    ids=[
        "missing-other",
        "categories-other",
        "hierarchy-identifier",
        "distance_options-qi",
        "distance_options-other",
        "weight-confidential",
        "categories-numeric",
    ],
)
def test_a_key_the_attribute_would_ignore_is_refused(sqlite_run, capsys, column, spec, key):
    """docs/attributes.md: keys apply to some roles and types only; elsewhere they were ignored
    in silence (`missing`, `categories`, `hierarchy` on a pass-through column, `distance_options`
    on a quasi-identifier)."""
    document = sqlite_run.config()
    document["attributes"][column] = spec
    config = sqlite_run.write(document)
    assert main(["run", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"At attributes.{column} ==> At key: {key}" in err, err
    assert not {"discharges_anon"} & sqlite_run.tables()


def test_the_guide_gives_the_signature_of_anonymize():
    """docs/guide.md, "The Python API": every parameter of `tclose.anonymize`, in order, with
    its default."""
    import inspect

    text = " ".join((ROOT / "docs" / "guide.md").read_text(encoding="utf-8").split())
    (written,) = re.findall(r"`tclose\.anonymize\((df, .*?)\)`", text)
    shown = [p.strip() for p in written.split(",")]
    actual = []
    for parameter in inspect.signature(tclose.anonymize).parameters.values():
        if parameter.kind is parameter.KEYWORD_ONLY and "*" not in actual:
            actual.append("*")
        if parameter.kind is parameter.VAR_KEYWORD:
            actual.append(f"**{parameter.name}")
        elif parameter.default is parameter.empty:
            actual.append(parameter.name)
        else:
            actual.append(f"{parameter.name}={parameter.default!r}")
    assert shown == actual


def test_sse_raw_and_sse_sst_are_what_the_guide_says():
    """docs/guide.md, "Information loss": `sse_raw` = n · d · `sse`; `sse_sst` equals `sse` with
    numeric QIs only, and differs with a nominal one (it said: unless a QI is constant)."""
    rng = np.random.default_rng(6)
    df = pd.DataFrame(
        {
            "a": rng.normal(0.0, 1.0, 200),
            "b": rng.normal(5.0, 2.0, 200),
            "kind": rng.choice(["x", "y", "z"], 200),
            "charge": rng.normal(0.0, 1.0, 200),
        }
    )
    numeric = tclose.anonymize(df.drop(columns="kind"), ["a", "b"], "charge", k=5, t=0.3)
    mixed = tclose.anonymize(df, {"a": "numeric", "kind": "nominal"}, ["charge", "b"], k=5, t=0.3)
    for result in (numeric, mixed):  # n = 200 rows, d = 2 quasi-identifiers
        utility = result.report["utility"]
        assert utility["sse_raw"] == pytest.approx(200 * 2 * utility["sse"])
    assert numeric.report["utility"]["sse_sst"] == pytest.approx(numeric.report["utility"]["sse"])
    assert mixed.report["utility"]["sse_sst"] != pytest.approx(mixed.report["utility"]["sse"])
