"""Adversarial: categorical data as a careless user or an attacker feeds it to tclose.

Hierarchy files as spreadsheets and editors write them (byte order mark, CRLF, padded lines,
quoted cells), files that are not hierarchies at all, and the hierarchical EMD checked against an
independent brute force: the minimum transport cost of the paper's EMD definition, solved as a
linear program with the ground distance ``(H - depth(LCA)) / H`` recomputed from the tree.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
import unicodedata

import numpy as np
import pandas as pd
import pytest
import yaml
from scipy.optimize import linprog

import tclose
from tclose.app.cli import main
from tclose.app.init_config import skeleton, url_for_file
from tclose.base.attributes import MISSING, encode_quasi_identifier
from tclose.base.config import AttributeSpec, load_config
from tclose.base.hierarchy import Hierarchy
from tclose.base.redaction import redact_url
from tclose.errors import ConfigError, DataError
from tclose.kernels.nominal import NominalEMD

WARDS = {"medical": ["cardiology", "neurology", "oncology"], "surgical": ["general", "orthopedics"]}
WARD_LINES = [f"{leaf};{group};*" for group, leaves in WARDS.items() for leaf in leaves] + [
    "maternity;*"
]


def _ward_config(sqlite_run, hierarchy, **ward) -> dict:
    """The demo table with ``ward`` as the nominal confidential attribute (``charge``, unique per
    row, dropped)."""
    document = sqlite_run.config()
    attributes = document["attributes"]
    attributes["charge"] = {"role": "identifier"}
    attributes["ward"] = {"role": "confidential", "type": "nominal", "hierarchy": hierarchy, **ward}
    document["privacy"] = {"k": 3, "t": 0.3}
    return document


# --- the brute force ---------------------------------------------------------------------------


def _ground(tree: Hierarchy, leaves: list[str]) -> np.ndarray:
    """``(H - depth(LCA)) / H`` from the tree's parent links, by walking both paths to the
    root."""
    height = max(1, max(tree.depth[leaf] for leaf in tree.leaves))

    def path(node: str) -> list[str]:
        out = [node]
        while tree.parent[out[-1]] is not None:
            out.append(tree.parent[out[-1]])
        return out

    out = np.zeros((len(leaves), len(leaves)))
    for (i, a), (j, b) in itertools.product(enumerate(leaves), repeat=2):
        if a != b:
            lca = next(node for node in path(a) if node in set(path(b)))
            out[i, j] = (height - tree.depth[lca]) / height
    return out


def _transport_emd(p: np.ndarray, q: np.ndarray, ground: np.ndarray) -> float:
    """The EMD as the paper defines it: the minimum cost of a flow moving ``p`` onto ``q``."""
    m = len(p)
    rows = [np.kron(np.eye(m)[i], np.ones(m)) for i in range(m)]  # mass leaving bin i
    cols = [np.kron(np.ones(m), np.eye(m)[j]) for j in range(m)]  # mass reaching bin j
    solved = linprog(
        ground.reshape(-1),
        A_eq=np.array(rows + cols),
        b_eq=np.concatenate([p, q]),
        bounds=(0, None),
        method="highs",
    )
    assert solved.success
    return float(solved.fun)


def _class_emds(values: np.ndarray, classes: np.ndarray, tree: Hierarchy) -> list[float]:
    leaves = sorted(set(values))
    ground = _ground(tree, leaves)
    whole = np.array([(values == v).mean() for v in leaves])
    return [
        _transport_emd(
            np.array([(values[classes == c] == v).mean() for v in leaves]), whole, ground
        )
        for c in np.unique(classes)
    ]


TREES = [
    {"*": {"X": ["a", "b"], "Y": ["c", "d"]}},
    {"*": {"X": {"P": ["a", "b"], "Q": ["c"]}, "e": None, "Y": ["d"]}},  # leaves at depths 1-3
    {"*": {"W": {"V": {"U": ["a"]}}, "b": None, "c": None}},  # a chain of single children
    {"R": {"S": {"X": ["a", "b"], "Y": ["c", "d", "e"]}}},  # a root with one child
]


@pytest.mark.parametrize("spec", TREES, ids=["balanced", "unbalanced", "chain", "one-child-root"])
def test_hierarchical_emd_is_the_minimum_transport_cost(spec):
    """Guard: the closed form (a sum over inner nodes) equals the linear program's optimum for
    random groups, on trees whose leaves are not all at the same depth too."""
    tree = Hierarchy.from_mapping(spec)
    rng = np.random.default_rng(5)
    for _ in range(25):
        n = int(rng.integers(3, 13))
        values = rng.choice(tree.leaves, n)
        labels = np.unique(rng.integers(0, 3, n), return_inverse=True)[1]
        fitted = NominalEMD.fit(values, hierarchy=tree)
        assert fitted.cluster_emd(labels) == pytest.approx(
            _class_emds(values, labels, tree), abs=1e-9
        )


@pytest.mark.parametrize("with_nulls", [False, True], ids=["values", "nulls-as-category"])
@pytest.mark.parametrize("algorithm", ["t-first", "merge", "k-first"])
def test_reported_and_verified_t_are_the_transport_emd_of_the_written_classes(
    algorithm, with_nulls
):
    """Guard: the report's ``t_achieved`` is the largest minimum-transport EMD over the classes
    of the published rows (grouped by their written QI values), and it is at most t; with
    ``missing: category``, NULL is a leaf under the root (the compiled k-first included)."""
    spec = TREES[1]
    rng = np.random.default_rng(11)
    leaves = Hierarchy.from_mapping(spec).leaves
    dx = rng.choice(leaves, 60, p=[0.3, 0.2, 0.1, 0.2, 0.2]).astype(object)
    if with_nulls:
        dx[rng.choice(60, 9, replace=False)] = None
    result = tclose.anonymize(
        pd.DataFrame({"age": rng.integers(20, 80, 60), "dx": dx}),
        quasi_identifiers=["age"],
        confidential={"dx": {"type": "nominal", "hierarchy": spec, "missing": "category"}},
        k=3,
        t=0.25,
        algorithm=algorithm,
    )
    tree = Hierarchy.from_mapping({"*": {**spec["*"], MISSING: None}})
    classes = result.data.groupby("age").ngroup().to_numpy()
    emds = _class_emds(result.data["dx"].fillna(MISSING).to_numpy(), classes, tree)
    assert result.report["verification"]["passed"]
    assert result.report["privacy"]["t_achieved"]["dx"] == pytest.approx(max(emds), abs=1e-9)
    assert max(emds) <= 0.25 + 1e-9


# --- hierarchy files ---------------------------------------------------------------------------


def _tree_from(tmp_path, data: bytes) -> Hierarchy:
    path = tmp_path / "h.csv"
    path.write_bytes(data)
    return Hierarchy.from_csv(path)


@pytest.mark.parametrize(
    "data",
    [
        "\ufeffa;X;*\nb;X;*\nc;*\n".encode(),  # a spreadsheet's UTF-8 byte order mark
        b"a;X;*\r\nb;X;*\r\nc;*\r\n",
        b"\n\na;X;*\n\n \nb;X;*\nc;*\n\n",
        b"a;X;*;\nb;X;*;\nc;*;;\n",  # lines padded to the longest one by a spreadsheet
        b'"a";"X";*\n"b";X;"*"\nc;*\n',
        b" a , X , * \nb,X,*\nc,*\n",
    ],
    ids=["bom", "crlf", "blank-lines", "padded", "quoted", "comma-and-spaces"],
)
def test_a_hierarchy_file_reads_as_its_author_meant(tmp_path, data):
    """A byte order mark is not part of the first leaf, and a line padded with separators gains no
    empty-named root: the ground distances (so the EMDs and t) are those of the hierarchy the user
    wrote."""
    tree = _tree_from(tmp_path, data)
    assert (tree.root, tree.leaves, tree.height) == ("*", ["a", "b", "c"], 2)
    assert tree.parent == {"*": None, "X": "*", "a": "X", "b": "X", "c": "*"}
    assert tree.leaf_distance_matrix(["a", "b", "c"])[0].tolist() == [0.0, 0.5, 1.0]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"a;X;*\n\nb;;*\n", "line 3: value 2 of the path is empty"),
        (b"a;X;*\nX;*\n", "line 2: 'X' begins the line, so it is a leaf, but it is the parent"),
        (b"a;X;*\nc;a;X;*\n", "line 1: 'a' begins the line, so it is a leaf, but it is the par"),
        (b"a;b;a\n", "line 1: 'a' begins the line"),  # a cycle
        (b"a;b\nb;a\n", "line 2: 'b' has two parents"),  # a cycle through the added root
        (b"a;X;*\nX;Y;*\n", "line 2: 'X' has two parents"),  # one label at two levels
        (b"a;a;*\n", "line 1: 'a' has two parents"),
        (b"\n\n", "is empty"),
    ],
    ids=[
        "empty-cell",
        "leaf-is-inner",
        "leaf-is-inner-later",
        "cycle",
        "cycle-2",
        "two-levels",
        "own-parent",
        "empty",
    ],
)
def test_a_malformed_hierarchy_file_is_refused_naming_the_line(tmp_path, data, said):
    """An empty cell, or a leaf that another line gives children, is refused naming its line,
    counted with blank lines."""
    with pytest.raises(ConfigError, match="h.csv") as error:
        _tree_from(tmp_path, data)
    assert said in str(error.value)


def test_the_database_file_given_as_hierarchy_is_a_config_error(sqlite_run, capsys):
    """``hierarchy: demo.db`` (or any file not in UTF-8, a Latin-1 export) is a configuration error
    naming the file, not an internal error."""
    before = sqlite_run.rows("discharges")
    path = sqlite_run.write(_ward_config(sqlite_run, str(sqlite_run.db)))
    assert main(["-q", "run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "attributes.ward" in err and "hierarchy" in err and "is not UTF-8 text" in err, err
    (sqlite_run.tmp_path / "latin.csv").write_bytes("caf\xe9;*\n".encode("latin-1"))
    path = sqlite_run.write(_ward_config(sqlite_run, "latin.csv"))
    assert main(["-q", "run", str(path)]) == 2
    assert "is not UTF-8 text (byte 4" in capsys.readouterr().err
    assert sqlite_run.rows("discharges") == before
    assert "discharges_anon" not in sqlite_run.tables()


def test_a_relative_hierarchy_path_is_the_config_files_not_the_working_folders(
    sqlite_run, tmp_path, monkeypatch
):
    """Guard: a ``h.csv`` in the working folder is not read in place of the config's."""
    (tmp_path / "h.csv").write_text("\n".join(WARD_LINES) + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "h.csv").write_text("cardiology;*\n")  # would leave every other ward unknown
    monkeypatch.chdir(elsewhere)
    config = load_config(sqlite_run.write(_ward_config(sqlite_run, "h.csv")))
    assert config.attributes["ward"].hierarchy.height == 2
    assert main(["-q", "run", str(tmp_path / "run.yaml")]) == 0


def test_a_hierarchy_thousands_of_levels_deep_is_no_internal_error(tmp_path):
    """A hierarchy thousands of levels deep, a shorter line first, is read without recursion (no
    exit 4)."""
    levels = ";".join(f"n{i}" for i in range(3000))
    tree = _tree_from(tmp_path, f"b;n2999\na;{levels}\n".encode())
    assert tree.height == 3000
    values = np.array(["a", "b", "a", "b", "a", "a"])
    labels = np.array([0, 0, 0, 1, 1, 1])
    fitted = NominalEMD.fit(values, hierarchy=tree)
    assert fitted.cluster_emd(labels) == pytest.approx(_class_emds(values, labels, tree))


# --- NULL as a category with a hierarchy -------------------------------------------------------


def test_missing_category_of_a_confidential_attribute_with_a_hierarchy(sqlite_run):
    """``missing: category`` on a nominal confidential attribute with a hierarchy: NULL is a value
    at distance 1 from every other, as for a quasi-identifier, and the EMD is the transport cost
    with that distance."""
    with sqlite3.connect(sqlite_run.db) as connection:
        connection.execute("UPDATE discharges SET ward = NULL WHERE patient_id % 9 = 0")
    (sqlite_run.tmp_path / "h.csv").write_text("\n".join(WARD_LINES) + "\n")
    document = _ward_config(sqlite_run, "h.csv", missing="category")
    report = sqlite_run.tmp_path / "r.json"
    assert main(["-q", "run", str(sqlite_run.write(document)), "--report", str(report)]) == 0
    assert main(["-q", "verify", str(sqlite_run.tmp_path / "run.yaml"), "--source"]) == 0
    out = pd.DataFrame(
        sqlite_run.rows("discharges_anon"), columns=sqlite_run.columns("discharges_anon")
    )
    assert out["ward"].isna().sum() == 400 // 9
    tree = Hierarchy.from_mapping({"*": {**WARDS, "maternity": None, MISSING: None}})
    classes = out.groupby(["age", "zip", "length_of_stay"]).ngroup().to_numpy()
    emds = _class_emds(out["ward"].fillna(MISSING).to_numpy(), classes, tree)
    t_achieved = json.loads(report.read_text())["privacy"]["t_achieved"]["ward"]
    assert t_achieved == pytest.approx(max(emds), abs=1e-9) and t_achieved <= 0.3 + 1e-9


def test_a_hierarchy_naming_the_missing_value_is_refused(sqlite_run, capsys):
    """``(missing)`` is NULL's name under ``missing: category`` (the data may not hold that
    text); a hierarchy placing it somewhere would give NULL another distance as a
    quasi-identifier (always 1) than as a confidential attribute."""
    (sqlite_run.tmp_path / "h.csv").write_text("\n".join([*WARD_LINES, f"{MISSING};*"]) + "\n")
    path = sqlite_run.write(_ward_config(sqlite_run, "h.csv", missing="category"))
    assert main(["-q", "run", str(path)]) == 2
    err = capsys.readouterr().err
    assert "attributes.ward" in err and "names the value '(missing)'" in err, err


# --- nominal and ordinal values ----------------------------------------------------------------

SPELLINGS = ["A", "a", " a", "a ", "é", unicodedata.normalize("NFD", "é"), "ﬁ", "fi"]


def _anonymize(frame: pd.DataFrame, quasi, confidential, t: float = 0.5):
    return tclose.anonymize(frame, quasi_identifiers=quasi, confidential=confidential, k=3, t=t)


def test_values_spelled_apart_by_case_spaces_or_unicode_form_stay_apart():
    """Guard: values are matched as text, exactly: no case folding, trimming or Unicode
    normalization merges two values, changes a published one or lets an undeclared spelling
    through a ``categories`` list."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"q": rng.choice(SPELLINGS, 80), "c": rng.choice(SPELLINGS, 80)})
    result = _anonymize(frame, {"q": "nominal"}, {"c": "nominal"}, t=0.6)
    assert sorted(result.data["c"]) == sorted(frame["c"])  # published unchanged, byte for byte
    assert set(result.data["q"]) <= set(SPELLINGS)
    assert result.data.groupby("q").size().min() >= 3 and result.report["verification"]["passed"]
    declared = [s for s in SPELLINGS if unicodedata.is_normalized("NFC", s)]  # NFD é is out
    with pytest.raises(DataError, match=r"'q' holds 1 distinct value\(s\) not in") as err:
        _anonymize(frame, {"q": {"type": "nominal", "categories": declared}}, {"c": "nominal"})
    assert unicodedata.normalize("NFD", "é") not in str(err.value)


@pytest.mark.parametrize(
    "categories",
    [["a", "b", "a"], [1, "1", 2], [True, "True"]],
    ids=["repeat", "1-and-'1'", "bool"],
)
def test_a_category_listed_twice_is_refused(categories):
    """Guard: a repeated category (as text) would give one value two ranks."""
    frame = pd.DataFrame({"o": ["a", "b", "1", "2"] * 3, "c": range(12)})
    with pytest.raises(ConfigError, match="non-empty list of distinct values"):
        _anonymize(frame, {"o": {"type": "ordinal", "categories": categories}}, {"c": "numeric"})


def test_booleans_and_a_single_category_round_trip():
    """Guard: a boolean column stays boolean (QI and confidential), a column of one value is
    published as that value with an EMD of 0."""
    rng = np.random.default_rng(4)
    frame = pd.DataFrame(
        {
            "flag": rng.choice([True, False], 30),
            "only": ["x"] * 30,
            "sick": rng.choice([True, False], 30),
            "same": ["y"] * 30,
        }
    )
    result = _anonymize(
        frame, {"flag": "nominal", "only": "ordinal"}, {"sick": "nominal", "same": "nominal"}
    )
    assert result.data["flag"].dtype == bool and result.data["sick"].dtype == bool
    assert sorted(result.data["sick"]) == sorted(frame["sick"])
    assert set(result.data["only"]) == {"x"} and set(result.data["same"]) == {"y"}
    assert result.report["privacy"]["t_achieved"]["same"] == 0.0


# --- tclose init -------------------------------------------------------------------------------


def _init(database, table: str, tmp_path, capsys) -> str:
    output = tmp_path / "init.yaml"
    assert main(["-q", "init", f"sqlite:///{database}", table, "-o", str(output)]) == 0, (
        capsys.readouterr().err
    )
    return output.read_text(encoding="utf-8")


def test_init_never_proposes_publishing_an_identifier_unchanged(tmp_path, capsys):
    """``tclose init`` proposes no column that looks like an identifier (``email``, ``First Name``,
    ``customerId``, a ``UNIQUE`` badge number) as ``other``: a user who sets only the
    quasi-identifiers and the confidential column does not publish them unchanged (the linkage check
    catches a column unique per row, not e-mails shared by a household)."""
    database = tmp_path / "people.db"
    identifying = ["email", "First Name", "customerId", "E-Mail", "phone_number", "badge", "code"]
    with sqlite3.connect(database) as connection:
        connection.execute(
            'CREATE TABLE people (pid INTEGER PRIMARY KEY, email TEXT, "First Name" TEXT, '
            '"customerId" INTEGER, "E-Mail" TEXT, phone_number TEXT, badge TEXT UNIQUE, '
            "code TEXT, age INTEGER, ward TEXT, valid INTEGER, paid REAL)"
        )
        connection.execute("CREATE UNIQUE INDEX people_code ON people (code)")
        connection.executemany(
            "INSERT INTO people VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    i,
                    f"h{i % 20}@x.org",
                    f"N{i % 20}",
                    i % 20,
                    f"h{i % 20}@y.org",
                    f"5{i % 20}",
                    f"b{i}",
                    f"c{i}",
                    20 + i % 30,
                    "ab"[i % 2],
                    i % 2,
                    float(i % 3),
                )
                for i in range(60)
            ],
        )
    # the user sets the two roles the run needs and accepts every other line as written
    document = yaml.safe_load(_init(database, "people", tmp_path, capsys))
    document["attributes"]["age"]["role"] = "quasi_identifier"
    document["attributes"]["ward"]["role"] = "confidential"
    document["report"] = {"json": str(tmp_path / "r.json"), "html": str(tmp_path / "r.html")}
    path = tmp_path / "init.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    config = load_config(path)
    assert set(config.identifiers) == {"pid", *identifying}
    assert [n for n, a in config.attributes.items() if a.role == "other"] == ["valid", "paid"]
    assert main(["-q", "run", str(path)]) == 0
    with sqlite3.connect(database) as connection:
        published = [d[1] for d in connection.execute("PRAGMA table_info(people_anon)")]
    assert set(published) == {"tclose_row", "age", "ward", "valid", "paid"}


def test_init_writes_hostile_and_very_long_column_names_as_loadable_keys(tmp_path, capsys):
    """A column name over 1024 characters (SQLite allows it) is written as a key YAML reads back:
    the skeleton loads."""
    names = ["x" * 1100, "y" * 5000, "~", "#x", " lead", "trail ", ":", "ü\u0301", "no", "%t"]
    database = tmp_path / "odd.db"
    columns = ", ".join('"' + name + '" INTEGER' for name in names)
    with sqlite3.connect(database) as connection:
        connection.execute(f"CREATE TABLE t (k INTEGER PRIMARY KEY, {columns})")
    text = _init(database, "t", tmp_path, capsys)
    assert max(len(line) for line in text.splitlines() if len(line) < 1000) < 160  # aligned
    text = text.replace("{role: other", "{role: quasi_identifier", 1)
    text = text.replace("{role: other", "{role: confidential", 1)
    (tmp_path / "init.yaml").write_text(text, encoding="utf-8")
    config = load_config(tmp_path / "init.yaml")
    assert list(config.attributes) == ["k", *names]
    assert config.quasi_identifiers == [names[0]] and config.confidential == [names[1]]


@pytest.mark.parametrize(
    ("spec", "counts", "medoid"),
    [
        ({"*": {"X": ["b", "a"], "Y": ["c"]}}, {"a": 1, "b": 1}, "b"),
        # x and y both cost 7 (in units of the ground distance); in floating point y's sum came
        # out smaller and y was published
        (
            {"*": {"P": {"Q": ["u", "x"], "R": ["w", "y"]}, "Z": {"S": ["z"]}}},
            {"w": 4, "x": 7, "y": 5, "z": 1},
            "x",
        ),
    ],
    ids=["leaf-order", "floating-point-tie"],
)
def test_a_nominal_qi_medoid_tie_goes_to_the_first_leaf(spec, counts, medoid):
    """A tie between medoids of a nominal QI goes to the first value in leaf order, as documented,
    never to alphabetical order or to rounding (the costs are compared exactly)."""
    values = pd.Series([value for value, count in counts.items() for _ in range(count)])
    attribute = AttributeSpec(
        "q", "quasi_identifier", "nominal", hierarchy=Hierarchy.from_mapping(spec)
    )
    published = encode_quasi_identifier(values, attribute).aggregate(np.zeros(len(values), int))
    assert set(published) == {medoid}


def test_verify_refuses_a_hierarchy_file_changed_since_the_run(sqlite_run, capsys):
    """The configuration names a hierarchy file by its path only, so the report records each
    hierarchy's digest and ``tclose verify --report`` compares it with the hierarchy it reads: a
    file edited after the run (two levels added above the root halve every ground distance, so every
    EMD) fails verification, though the configuration digest is unchanged."""
    hierarchy = sqlite_run.tmp_path / "h.csv"
    hierarchy.write_text("\n".join(WARD_LINES) + "\n")
    config = sqlite_run.write(_ward_config(sqlite_run, "h.csv"))
    report_path = sqlite_run.tmp_path / "r.json"
    assert main(["-q", "run", str(config), "--report", str(report_path)]) == 0
    recorded = json.loads(report_path.read_text())["privacy"]["hierarchies"]
    same_tree = Hierarchy.from_mapping({"*": {**WARDS, "maternity": None}})
    assert recorded == {"ward": {"sha256": same_tree.digest(), "height": 2, "leaves": 6}}
    capsys.readouterr()
    assert main(["verify", str(config), "--report", str(report_path)]) == 0
    assert "PASS  hierarchy_sha256:ward" in capsys.readouterr().out

    hierarchy.write_text("\n".join(f"{line};World;Everything" for line in WARD_LINES) + "\n")
    assert main(["verify", str(config), "--report", str(report_path)]) == 1
    out = capsys.readouterr().out
    assert "PASS  config_sha256" in out and "PASS  t_closeness:ward" in out
    assert "FAIL  hierarchy_sha256:ward" in out and "verdict: NOT verified" in out


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"order": "hierarchy"}, "The order 'hierarchy' needs the attribute's hierarchy"),
        ({"hierarchy": "h.csv"}, "'hierarchy' is set from the attribute's own key"),
        ({"categories": ["general"]}, "'categories' is set from the attribute's own key"),
    ],
    ids=["order-without-hierarchy", "hierarchy-option", "categories-option"],
)
def test_distance_options_that_belong_to_the_attribute_are_config_errors(
    sqlite_run, tmp_path, monkeypatch, capsys, options, said
):
    """``order: hierarchy`` without a hierarchy, and a ``hierarchy`` given in ``distance_options``
    (which would be read relative to the working folder, unchecked and unrecorded), are
    configuration errors naming the key."""
    (tmp_path / "h.csv").write_text("\n".join(WARD_LINES) + "\n")
    monkeypatch.chdir(tmp_path)
    document = _ward_config(sqlite_run, None, distance_options=options)
    del document["attributes"]["ward"]["hierarchy"]
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    err = capsys.readouterr().err
    assert "==> At attributes.ward" in err and "distance_options" in err and said in err, err
    assert "discharges_anon" not in sqlite_run.tables()


@pytest.mark.parametrize(
    "url",
    [
        "duckdb:///md:analytics?motherduck_token=Zq8secretVALUE",
        "postgresql://ann@db/x?aws_secret_access_key=Zq8secretVALUE&application_name=etl",
        "mysql+pymysql://ann@db/x?db_password=Zq8secretVALUE",
    ],
)
def test_init_never_writes_a_credential_parameter_of_any_name(url):
    """No query parameter of the URL that may hold a credential (a MotherDuck token, an AWS secret,
    any name) is written into the skeleton, whose text reports and logs show."""
    written = skeleton(url, "t", [])
    assert "Zq8secretVALUE" not in written and "Zq8secretVALUE" not in redact_url(url)
    assert url_for_file(url).count("${TCLOSE_DB_") == 1


@pytest.mark.parametrize("kind", ["nominal", "ordinal"])
def test_binary_values_in_a_categorical_qi_are_refused_naming_the_rows(tmp_path, capsys, kind):
    """A BLOB in a nominal or ordinal QI is refused naming the column and counting the rows, never
    published as the text ``b'\x01'`` (a value the source never held) nor shown in a message."""
    database = tmp_path / "blob.db"
    with sqlite3.connect(database) as connection:
        connection.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, q, age INTEGER, c TEXT)")
        connection.executemany(
            "INSERT INTO t VALUES (?,?,?,?)",
            [(i, b"\x01" if i in (4, 9) else "x", 20 + i % 7, "ab"[i % 2]) for i in range(30)],
        )
    document = {
        "source": {"url": f"sqlite:///{database}", "table": "t", "key": "id"},
        "target": {"table": "t_anon"},
        "attributes": {
            "q": {"role": "quasi_identifier", "type": kind},
            "age": {"role": "quasi_identifier"},
            "c": {"role": "confidential", "type": "nominal"},
        },
        "privacy": {"k": 3, "t": 0.5},
    }
    config = tmp_path / "blob.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    assert main(["-q", "run", str(config)]) == 3
    err = capsys.readouterr().err
    assert "'q'" in err and "binary values" in err and "(rows 4, 9)" in err, err
    assert "\\x01" not in err and "b'" not in err
    with sqlite3.connect(database) as connection:
        tables = {r[0] for r in connection.execute("SELECT name FROM sqlite_master")}
    assert tables == {"t"}


@pytest.mark.parametrize("role", ["quasi_identifier", "confidential"])
def test_a_category_outside_the_hierarchy_is_a_config_error(sqlite_run, capsys, role):
    """A category the configuration lists but its hierarchy lacks is a configuration error naming
    it, not a data error about rows (no row holds the value)."""
    (sqlite_run.tmp_path / "h.csv").write_text("\n".join(WARD_LINES) + "\n")
    categories = [*WARDS["medical"], *WARDS["surgical"], "maternity", "icu"]
    document = _ward_config(sqlite_run, "h.csv", categories=categories)
    document["attributes"]["ward"]["role"] = role
    if role == "quasi_identifier":
        document["attributes"]["charge"] = {"role": "confidential"}
    assert main(["-q", "run", str(sqlite_run.write(document))]) == 2
    err = capsys.readouterr().err
    assert "attributes.ward" in err and "categories" in err and "('icu')" in err, err


@pytest.mark.postgres
def test_char_padded_values_get_a_hint_not_a_riddle(pg, capsys):
    """A PostgreSQL ``char(12)`` column returns its values padded with spaces, which match no leaf
    or category: the message counts the values that match once trimmed, without showing them."""
    source = pg.name("src")
    pg.execute(
        f"CREATE TABLE {source} (id int PRIMARY KEY, ward char(12), age int); INSERT INTO "
        f"{source} SELECT i, (ARRAY['cardiology', 'neurology', 'general'])[1 + i % 3], "
        f"20 + i % 17 FROM generate_series(1, 60) i"
    )
    tree = {"*": {"medical": ["cardiology", "neurology"], "surgical": ["general"]}}
    for ward in ({"hierarchy": tree}, {"categories": ["cardiology", "neurology", "general"]}):
        document = {
            "source": {"url": pg.url, "table": source, "key": "id"},
            "target": {"table": pg.name("anon")},
            "attributes": {
                "ward": {"role": "confidential", "type": "nominal", **ward},
                "age": {"role": "quasi_identifier"},
            },
            "privacy": {"k": 3, "t": 0.5},
        }
        assert main(["-q", "run", str(pg.write_config(document))]) == 3
        err = capsys.readouterr().err
        assert "'ward'" in err and "3 of them equal a" in err and "CHAR(n)" in err, err
        assert "cardiology" not in err


def test_a_real_column_against_integer_categories_gets_a_hint():
    """``categories: [1, 2.5, 3]`` on a REAL column (read as 1.0, 2.5, 3.0): the message counts the
    values that match as numbers (1.0 is not the text 1), without showing them."""
    frame = pd.DataFrame({"z": [1.0, 2.5, 3.0] * 10, "c": np.arange(30.0)})
    spec = {"type": "ordinal", "categories": [1, 2.5, 3]}
    with pytest.raises(DataError, match="2 of them equal a category as numbers") as error:
        _anonymize(frame, {"z": spec}, {"c": "numeric"})
    assert "1.0" not in str(error.value).split("(1.0 read")[0]


def test_an_inline_hierarchy_keeps_every_key_of_a_mapping_in_a_list():
    """In ``[{Europe: [Spain]}, {Asia: [China], Africa: [Kenya]}]`` every key of each mapping is
    read (Africa and Kenya are in the tree), and a list inside a list is a configuration error,
    never a leaf named ``"['a', 'b']"``."""
    tree = Hierarchy.from_mapping(
        {"Any": [{"Europe": ["Spain"]}, {"Asia": ["China"], "Africa": ["Kenya"]}, "Oceania"]}
    )
    assert tree.leaves == ["Spain", "China", "Kenya", "Oceania"]
    assert tree.parent["Kenya"] == "Africa" and tree.parent["Africa"] == "Any"
    with pytest.raises(ConfigError, match="Under 'Any': a list holds values and mappings"):
        Hierarchy.from_mapping({"Any": [["a", "b"], "c"]})
