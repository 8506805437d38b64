"""Lines on stderr when ember makes the user wait: shown in an interactive terminal, or
wherever `EMBER_PROGRESS=1` asks for it (`EMBER_PROGRESS=0` silences it): one line when a
trace waits for a background capture (`note`), the phases of a long capture (`Phases`)."""

from __future__ import annotations

import os
import sys
import threading
import time


def enabled() -> bool:
    """Whether notes are shown: `EMBER_PROGRESS` when set, else whether stderr is a terminal.

    >>> os.environ["EMBER_PROGRESS"] = "0"; enabled()
    False
    >>> os.environ["EMBER_PROGRESS"] = "1"; enabled()
    True
    >>> del os.environ["EMBER_PROGRESS"]
    """
    asked = os.environ.get("EMBER_PROGRESS")
    if asked is not None:
        return asked not in ("", "0", "false", "no")
    return sys.stderr.isatty()


def note(text: str) -> None:
    """Prints `text` as one dim line on stderr, if notes are shown."""
    if enabled():
        _print(text)


def _print(text: str) -> None:
    from rich.console import Console

    Console(stderr=True).print(text, style="dim", highlight=False, markup=False, soft_wrap=True)


AFTER = 2.0  # seconds of quiet before a long piece of work starts naming its phases


class Phases:
    """Names the phases of a piece of work on stderr, but only once it has run `AFTER`
    seconds: a short capture prints nothing, a long one says what it is doing (the phase
    under way when the quiet ends, then each phase as it starts, with the time so far).

    `shown`: True or False as the caller asked, None for `enabled()`.
    """

    def __init__(self, what: str, shown: bool | None = None, after: float | None = None):
        self.what, self.shown = what, enabled() if shown is None else shown
        self.after = AFTER if after is None else after
        self.started = time.monotonic()
        self.current: str | None = None
        self.spoke = False
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        if self.shown:
            self._timer = threading.Timer(self.after, self._speak)
            self._timer.daemon = True
            self._timer.start()

    def __call__(self, phase: str) -> None:
        with self._lock:
            self.current = phase
            if self.spoke:
                self._say(phase)

    def done(self, text: str = "done") -> None:
        """Ends the notes: a last line if any was shown."""
        if self._timer is not None:
            self._timer.cancel()
        with self._lock:
            if self.spoke:
                self._say(text)
            self.spoke, self.current = False, None

    def _speak(self) -> None:
        with self._lock:
            self.spoke = True
            if self.current is not None:
                self._say(self.current)

    def _say(self, phase: str) -> None:
        elapsed = time.monotonic() - self.started
        _print(f"ember: {self.what}: {phase} ({elapsed:.1f} s)")
