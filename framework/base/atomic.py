"""Files written whole or not at all: a temporary file beside the target, flushed to disk, then
renamed over it (``os.replace`` is atomic on POSIX and Windows). A full disk or a kill leaves the
previous file (or none), never a truncated one. Files read whole (:func:`read_text`) are never a
device."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
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


def read_text(path: str | Path, encoding: str = "utf-8", max_bytes: int | None = None) -> str:
    """The text of the file at ``path`` (as :meth:`Path.read_text`: line ends ``\r\n`` and
    ``\r`` read as ``\n``), refusing a device: ``/dev/zero`` or ``/dev/urandom`` given as a
    configuration, report, hierarchy or password file never ends, and reading it whole filled
    the memory (exit 4 at best). A pipe (``<(...)``, ``/dev/stdin`` from a pipe) is read. With
    ``max_bytes``, no more than that many bytes are read: a longer file is refused.

    Raises:
        OSError: the file cannot be opened or read, is a device (``strerror`` says so), or holds
            more than ``max_bytes`` bytes (``errno.EFBIG``).
        UnicodeDecodeError: the file is not in ``encoding`` (``start``: the byte's offset).
    """
    with open(path, "rb") as handle:
        mode = os.fstat(handle.fileno()).st_mode
        if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
            raise OSError(errno.ENODEV, "it is a device, not a file")
        data = handle.read() if max_bytes is None else handle.read(max_bytes + 1)
    if max_bytes is not None and len(data) > max_bytes:
        raise OSError(errno.EFBIG, f"it holds more than {max_bytes} bytes")
    return data.decode(encoding).replace("\r\n", "\n").replace("\r", "\n")


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
