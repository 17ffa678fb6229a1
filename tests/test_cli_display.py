"""After ``tclose`` returns, whatever the command and its outcome, no display of its own is left
to show notices: a later notice (a compile notice in the Python API, say) never writes to the
command's stream, which may be closed by then."""

from __future__ import annotations

import pytest

from tclose.app.cli import main
from tclose.base.notices import current_display


@pytest.mark.parametrize(
    "argv",
    [
        ["plugins"],
        ["schema", "report"],
        ["report", "no-such-report.json"],
        ["run", "no-such-config.yaml"],
    ],
)
def test_no_display_outlives_the_command(argv, capsys):
    main(argv)
    assert current_display() is None


def test_no_display_outlives_a_run(sqlite_run, capsys):
    path = sqlite_run.write(sqlite_run.config())
    assert main(["run", str(path)]) == 0
    assert current_display() is None
