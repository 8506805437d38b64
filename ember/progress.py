"""One line on stderr when ember makes the user wait: shown in an interactive terminal,
or wherever `EMBER_PROGRESS=1` asks for it (`EMBER_PROGRESS=0` silences it)."""

from __future__ import annotations

import os
import sys


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
        from rich.console import Console

        Console(stderr=True).print(text, style="dim", highlight=False, markup=False)
