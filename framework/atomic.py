"""Files written whole or not at all: a temporary file beside the target, flushed to disk, then
renamed over it (``os.replace`` is atomic on POSIX and Windows). A full disk or a kill leaves the
previous file (or none), never a truncated one."""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

#: Bytes the temporary file's name adds to the file's (``.``, ``.``, 8 random, ``.tmp``).
ATOMIC_NAME_EXTRA = 14


def name_max(folder: str | Path) -> int | None:
    """The longest file name ``folder`` takes, in bytes (``None``: unknown)."""
    try:
        return os.pathconf(folder, "PC_NAME_MAX")
    except (OSError, ValueError):
        return None


def write_atomically(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``, creating parent folders; all or nothing."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(
        dir=path.parent, prefix=f".{path.name}.", suffix=".tmp"
    )
    try:
        with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(temporary, 0o666 & ~mask)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
