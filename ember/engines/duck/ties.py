"""A window's order checked for ties where DuckDB computes the window again.

Row numbers and ROWS frames depend on how an engine orders rows that tie in a window's
ORDER BY, so a window computed again in DuckDB matches the job's only where no two rows
of a partition tie (`ir.Window.untied`, a capture's guess). The compiler checks the guess
with a QUALIFY over every row the window computes (`syntax.TieCheck`): on a tie it calls
`ember_tie($tie)`, which notes the run's token and fails the query; `compile.run` then
finds its token noted and raises `Tie`. The signal is the token, not the text of
DuckDB's error, which says only that a Python function failed.
"""

from __future__ import annotations

import itertools
import threading

_lock = threading.Lock()
_tokens = itertools.count(1)
_noted: set[int] = set()


class Tie(Exception):
    """Two rows of a window partition tie in its order (`ir.Window.untied` guessed not)."""


def token() -> int:
    """A token for one run of a query that checks for ties."""
    with _lock:
        return next(_tokens)


def tie(run: int) -> bool:
    """`ember_tie`, called by a tie check on a tied row: notes the run, fails the query."""
    with _lock:
        _noted.add(run)
    raise ArithmeticError("rows tie in the order of a window guessed untied")


def tied(run: int) -> bool:
    """Whether a tie check of the run failed (and forgets the run)."""
    with _lock:
        if run in _noted:
            _noted.discard(run)
            return True
        return False
