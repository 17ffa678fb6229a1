"""What any layer tells the user while a command runs, without knowing the command's display.

The ``tclose`` command's display (:class:`tclose.app.progress.Progress`) registers itself here
while it is open (:func:`open_display`, :func:`close_display`). Code below the application —
the runner, the compile notice, a connector's driver hint, an algorithm's progress — tells the
user through :func:`notice` and :func:`notice_once`: a line above the display's live line, or,
without a display (``--quiet``, the Python API), an INFO log record. :func:`phase_counts` and
:func:`counts_reporter` carry a phase's bar down to an algorithm that counts its work.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Protocol


class Display(Protocol):
    """Where notices go while a command runs: a full line written above its live line."""

    def write(self, text: str) -> None: ...


#: The display of the running ``tclose`` command, if any (see :func:`notice`).
_current: Display | None = None
_COUNTS: ContextVar[Callable[[int, int], None] | None] = ContextVar("tclose_counts", default=None)


def open_display(display: Display) -> None:
    """Make ``display`` the one that shows the notices from now on."""
    global _current
    _current = display


def close_display(display: Display) -> None:
    """``display`` shows no more notices (if it was the one showing them)."""
    global _current
    if _current is display:
        _current = None


def current_display() -> Display | None:
    """The display that shows the notices, or ``None`` (they are then log records)."""
    return _current


@contextmanager
def phase_counts(say: Callable[..., None], line: str) -> Iterator[None]:
    """While the block runs, :func:`counts_reporter` returns a callable ``(done, total)`` that
    calls ``say(line, done=done, total=total)``: how an algorithm deep inside a phase (k-first)
    updates the phase's bar without knowing about the runner."""
    token = _COUNTS.set(lambda done, total: say(line, done=done, total=total))
    try:
        yield
    finally:
        _COUNTS.reset(token)


def counts_reporter() -> Callable[[int, int], None] | None:
    """The ``(done, total)`` callable of the enclosing :func:`phase_counts`, or ``None``."""
    return _COUNTS.get()


def notices_folder() -> Path:
    """Where :func:`notice_once` remembers what it told: ``tclose/notices`` in the user's cache
    folder, ``$XDG_CACHE_HOME`` when it is an absolute path (the XDG Base Directory
    specification ignores a relative one), else ``~/.cache``."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if os.path.isabs(base) else Path.home() / ".cache"
    return root / "tclose" / "notices"


def notice_once(key: str, text: str) -> None:
    """:func:`notice` ``text`` the first time it is seen in this Python environment
    (``sys.prefix``: each virtual environment has its own installed drivers), else log it at
    INFO (``tclose -v`` shows it). A marker file in :func:`notices_folder`, named after the
    environment and ``key``, remembers it once the text was shown (a ``--quiet`` command shows
    nothing and marks nothing). A folder that cannot be written is no error: the notice is then
    shown again next time."""
    logger = logging.getLogger("tclose")
    digest = hashlib.sha256(f"{sys.prefix}\0{key}".encode()).hexdigest()[:32]
    marker: Path | None = None
    try:
        marker = notices_folder() / digest
        seen = marker.exists()
    except (OSError, RuntimeError):  # no home folder, or a folder that cannot be looked into
        marker, seen = None, False
    if seen:
        logger.info(text)
        return
    shown = _current is not None or logger.isEnabledFor(logging.INFO)
    notice(text)
    if shown and marker is not None:
        with contextlib.suppress(OSError):
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.write_text(f"{key}\n{sys.prefix}\n", encoding="utf-8")


def notice(text: str) -> None:
    """Tell the user ``text`` (a full line): above the live line of the running ``tclose``
    command's display, or, without one (``--quiet``, the Python API), as an INFO log record."""
    display = _current
    if display is not None:
        display.write(text)
    else:
        logging.getLogger("tclose").info(text)
