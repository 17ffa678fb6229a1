"""What the ``tclose`` command shows on stderr while it works, and how its log lines look.

:class:`Progress` is the ``progress`` callback of :func:`tclose.core.runner.run`: each call starts a
phase (reading, partitioning, writing, verifying, publishing). On a terminal the current phase is
a live line with a spinner, the elapsed time and, when the caller reports ``done`` and ``total``,
a bar (``done`` alone: the rows read so far, for streamed reads of unknown length); a finished phase stays as a line with its duration. Anywhere else (a file, a pipe, CI)
every phase is one plain, timestamped line and nothing is redrawn.

:class:`ConsoleHandler` writes log records above the live line, and :class:`RedactingFilter`
removes passwords from URLs in any log message. Neither ever sees data values: the runner logs
phases, counts and table names only.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import IO

from tclose.base.config import redact_url

#: What :func:`terminal_text` writes as an escape: the C0 controls but tab and line feed, DEL,
#: the C1 controls (``\x9b`` is CSI on some terminals) and the bidirectional overrides.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def terminal_text(text: str) -> str:
    """``text`` with every character of :data:`_CONTROLS` written as its Python escape
    (``\\x1b``, ``\\r``, ``\\u202e``): what the ``tclose`` command prints. Names of tables
    and columns come from the data and reach messages and progress lines; an ANSI escape sequence
    in one must not clear the screen, recolour or hide the lines after it, or set the window
    title. Line feeds stay (messages have several lines), and so a name can still start a line."""
    return _CONTROLS.sub(lambda match: repr(match.group())[1:-1], text)


#: The display of the running ``tclose`` command, if any (see :func:`notice`).
_current: Progress | None = None
_FRAMES = "|/-\\"
_CLEAR = "\r\x1b[K"
_COUNTS: ContextVar[Callable[[int, int], None] | None] = ContextVar("tclose_counts", default=None)


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


class Progress:
    """Phase display on a stream (stderr by default).

    Args:
        stream: where to write.
        live: redraw a spinner line (``None``: when ``stream`` is a terminal).
        interval: seconds between redraws of the live line.
    """

    def __init__(
        self, stream: IO[str] | None = None, *, live: bool | None = None, interval: float = 0.1
    ) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty() if live is None else live
        self.interval = interval
        self.phase: str | None = None
        self.done: int | None = None
        self.total: int | None = None
        self.started = time.monotonic()
        self.phase_started = self.started
        self._frame = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        global _current
        _current = self

    def __call__(self, line: str, done: int | None = None, total: int | None = None) -> None:
        """Start the phase ``line``, or, if it is the current phase, update its ``done`` count
        out of ``total`` (drawn as a bar on a terminal)."""
        line = terminal_text(line)
        with self._lock:
            if line == self.phase:
                self.done, self.total = done, total
                return
            self._end_phase()
            self.phase, self.done, self.total = line, done, total
            self.phase_started = time.monotonic()
            if self.live:
                self._draw()
                self._start_thread()
            else:
                self._write(f"[{self._clock()}] {line}\n")

    def write(self, text: str) -> None:
        """Write ``text`` (a full line) above the live line."""
        text = terminal_text(text)
        with self._lock:
            if self.live and self.phase is not None:
                self.stream.write(_CLEAR)
            self._write(text if text.endswith("\n") else text + "\n")
            if self.live and self.phase is not None:
                self._draw()

    def close(self) -> None:
        """End the current phase and stop redrawing."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with self._lock:
            self._end_phase()
        global _current
        if _current is self:
            _current = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- internals ---------------------------------------------------------------------------

    def _clock(self) -> str:
        return f"{time.monotonic() - self.started:7.1f} s"

    def _end_phase(self) -> None:
        if self.phase is None:
            return
        seconds = time.monotonic() - self.phase_started
        if self.live:
            self._write(f"{_CLEAR}  done  {self.phase} ({seconds:.1f} s)\n")
        self.phase = None

    def _draw(self) -> None:
        seconds = time.monotonic() - self.phase_started
        frame = _FRAMES[self._frame % len(_FRAMES)]
        self._frame += 1
        bar = ""
        if self.done is not None and self.total:
            share = min(max(self.done / self.total, 0.0), 1.0)
            filled = int(share * 24)
            bar = f" [{'#' * filled}{'.' * (24 - filled)}] {share:4.0%}"
        elif self.done is not None:  # a streamed read of unknown length: rows so far
            bar = f" {self.done:,} rows"
        line = f"  {frame}     {self.phase}{bar} {seconds:.1f} s"
        width = shutil.get_terminal_size((100, 24)).columns - 1
        if len(line) > width:  # a wrapped line could not be redrawn in place
            line = line[: max(width - 3, 10)] + "..."
        self._write(f"{_CLEAR}{line}")

    def _start_thread(self) -> None:
        if self._thread is not None:
            return

        def spin() -> None:
            while not self._stop.wait(self.interval):
                with self._lock:
                    if self.phase is not None:
                        self._draw()

        self._thread = threading.Thread(target=spin, name="tclose-progress", daemon=True)
        self._thread.start()

    def _write(self, text: str) -> None:
        self.stream.write(text)
        self.stream.flush()


class RedactingFilter(logging.Filter):
    """Replaces any password in a URL of a log message by ``***``."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact_url(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True


class ConsoleHandler(logging.Handler):
    """Log handler that writes through a :class:`Progress`, so lines never break a live line."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress
        self.addFilter(RedactingFilter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.progress.write(self.format(record))
        except Exception:  # logging must never break a run
            self.handleError(record)


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
    progress = _current
    if progress is not None:
        progress.write(text)
    else:
        logging.getLogger("tclose").info(text)
