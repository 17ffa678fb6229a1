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

import logging
import re
import shutil
import sys
import threading
import time
from typing import IO

from tclose.base.config import redact_url
from tclose.base.notices import close_display, open_display

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


_FRAMES = "|/-\\"
_CLEAR = "\r\x1b[K"


class Progress:
    """Phase display on a stream (stderr by default). From its creation until :meth:`close` it
    is the display that shows the notices of every layer (:mod:`tclose.base.notices`).

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
        open_display(self)

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
        close_display(self)

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
