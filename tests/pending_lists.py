"""The lists of what the work packages of issue 30 still have to remove, one file a package.

A list is a folder of ``<package>.txt`` files, one entry a line (a ``#`` starts a comment): the
tests that read one fail on a violation no file lists and on a listed one that no longer occurs,
so that each package deletes its lines, and its file once empty, with the change that fixes them.
"""

from __future__ import annotations

from pathlib import Path


def pending(folder: Path) -> dict[str, str]:
    """Entry → the name of the file that lists it (an entry listed twice is an error)."""
    listed: dict[str, str] = {}
    for path in sorted(folder.glob("*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            entry = line.split("#")[0].strip()
            if entry:
                assert entry not in listed, (
                    f"{entry} is listed twice ({listed.get(entry)}, {path.name})"
                )
                listed[entry] = path.name
    return listed
