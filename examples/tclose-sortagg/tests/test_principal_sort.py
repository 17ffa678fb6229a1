"""The example plugin passes tclose's conformance suite and is found through its entry point."""

from __future__ import annotations

import pytest
from tclose_sortagg import PrincipalSort

from tclose.testing import check_algorithm, load_registry


@pytest.mark.parametrize("axis", ["principal", "first"])
def test_principal_sort_conforms(axis):
    assert check_algorithm(PrincipalSort(), {"axis": axis}) > 0


def test_entry_point_registers_principal_sort():
    provided = load_registry().algorithms["principal-sort"]
    assert provided.provider == "tclose-sortagg"
