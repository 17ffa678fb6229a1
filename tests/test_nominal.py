"""Nominal EMD (equal and hierarchical ground distances) and hierarchies, against hand-computed
values."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tclose.base.hierarchy import Hierarchy
from tclose.errors import ConfigError, DataError
from tclose.kernels.nominal import NominalEMD

TREE = {"*": {"X": ["a", "b"], "Y": ["c", "d"]}}
VALUES = np.array(list("aabbccdd"))


def test_equal_distance_hand_computed():
    emd = NominalEMD.fit(VALUES)
    # {a, a}: P = (1, 0, 0, 0), Q = (1/4,)*4 -> 1/2 * (3/4 + 3 * 1/4) = 3/4
    assert emd.cluster_emd(np.array([0, 0, 1, 1, 2, 2, 3, 3])) == pytest.approx([0.75] * 4)
    # one of each value: identical to the table
    assert emd.cluster_emd(np.array([0, 1, 0, 1, 0, 1, 0, 1])) == pytest.approx([0, 0])
    # {a, a, b, b}: 1/2 * (1/4 + 1/4 + 1/4 + 1/4) = 1/2
    assert emd.emd_of_counts(np.array([2, 2, 0, 0])) == pytest.approx(0.5)


def test_hierarchical_distance_hand_computed():
    emd = NominalEMD.fit(VALUES, hierarchy=Hierarchy.from_mapping(TREE))
    # {a, a}: move 1/4 from a to b inside X (cost 1/2 each) and 1/2 from X to Y (cost 1):
    # 1/2 * 1/4 + 1 * 1/2 = 0.625
    assert emd.emd_of_counts(np.array([2, 0, 0, 0])) == pytest.approx(0.625)
    # {a, b}: only the move from X to Y: 1/2
    assert emd.emd_of_counts(np.array([1, 1, 0, 0])) == pytest.approx(0.5)
    # {a, c}: within X 1/4 at 1/2, within Y 1/4 at 1/2: 0.25
    assert emd.emd_of_counts(np.array([1, 0, 1, 0])) == pytest.approx(0.25)
    assert emd.cluster_emd(np.array([0, 1, 0, 1, 0, 1, 0, 1])) == pytest.approx([0, 0])


def test_hierarchical_distance_is_at_most_equal_distance():
    rng = np.random.default_rng(0)
    values = rng.choice(list("abcd"), 200)
    labels = rng.integers(0, 30, 200)
    labels = np.unique(labels, return_inverse=True)[1]
    equal = NominalEMD.fit(values).cluster_emd(labels)
    tree = NominalEMD.fit(values, hierarchy=Hierarchy.from_mapping(TREE)).cluster_emd(labels)
    assert (tree <= equal + 1e-12).all()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from("abcdef"), min_size=2, max_size=60), st.integers(1, 6), st.booleans()
)
def test_cluster_emd_equals_per_cluster_histograms(values, n_clusters, with_tree):
    tree = Hierarchy.from_mapping({"*": {"P": ["a", "b", "c"], "Q": {"R": ["d", "e"], "S": ["f"]}}})
    values = np.array(values)
    emd = NominalEMD.fit(values, hierarchy=tree if with_tree else None)
    labels = np.arange(len(values)) % n_clusters
    labels = np.unique(labels, return_inverse=True)[1]
    counts = np.zeros((labels.max() + 1, emd.m))
    np.add.at(counts, (labels, emd.codes), 1)
    assert emd.cluster_emd(labels) == pytest.approx(emd.emd_of_counts(counts))
    whole = emd.emd_of_counts(emd.global_counts)
    assert whole == pytest.approx(0.0, abs=1e-12)


def test_orders():
    values = np.array(["b", "a", "a", "c", "c", "c"])
    assert NominalEMD.fit(values).categories == ["c", "a", "b"]  # frequency
    listed = NominalEMD.fit(values, order="listed", listed=["b", "c", "a"])
    assert listed.categories == ["b", "c", "a"]
    assert list(listed.ranks) == [0, 4, 5, 1, 2, 3]  # ties broken by row index
    tree = Hierarchy.from_mapping({"*": {"X": ["c", "a"], "Y": ["b"]}})
    assert NominalEMD.fit(values, hierarchy=tree).categories == ["c", "a", "b"]  # leaf order
    marginal = NominalEMD.fit(values, hierarchy=tree, order="marginality")
    # marginality: c: 1/6*1 + 2/6*0.5 = 1/3; a: 1/6 + 3/6*0.5 = 5/12; b: 5/6
    assert marginal.categories == ["c", "a", "b"]


def test_hierarchy_from_csv_and_validation(tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("a;X;*\nb;X;*\nc;Y;*\n")
    tree = Hierarchy.from_csv(path)
    assert tree.leaves == ["a", "b", "c"] and tree.height == 2
    with pytest.raises(
        DataError, match=r"2 distinct value\(s\) are not leaves.*values are not shown"
    ):
        tree.check_values(["a", "z", "e"], "diagnosis")
    path.write_text("a;X;*\na;Y;*\n")
    with pytest.raises(ConfigError, match="two parents"):
        Hierarchy.from_csv(path)
    with pytest.raises(ConfigError, match="exactly one root"):
        Hierarchy.from_mapping({"A": ["x"], "B": ["y"]})
