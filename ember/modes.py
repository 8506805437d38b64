"""`ember.lineage`: eager or lazy lineage, picked from how the lineage will be used."""

from __future__ import annotations

import contextlib
from typing import Literal, get_args

from pyspark.sql import DataFrame

from ember.capture.capture import capture
from ember.errors import UnsupportedOperatorError
from ember.infer.infer import infer
from ember.query.trace import AnyLineage

Mode = Literal["auto", "eager", "lazy"]
MODES: tuple[Mode, ...] = get_args(Mode)
# An exact lazy trace costs a restricted re-run of the job; capture costs a share of one
# run, once, after which traces take milliseconds (the lazy benchmark measures both). For
# a job of about a second the two meet at two to three traces: past that, capture pays.
LAZY_UP_TO = 3


def lineage(df: DataFrame, mode: Mode = "auto", traces: int | None = None) -> AnyLineage:
    """Lineage of `df`, captured (`"eager"`, `ember.capture`) or inferred (`"lazy"`,
    `ember.infer`). `"auto"` infers when at most `LAZY_UP_TO` traces are expected
    (`traces=`) and captures otherwise, including when nothing is declared (interactive
    use asks many questions) and when inference refuses the plan (a random value, a
    grouped map: it refuses before any job runs), which capture may still trace."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "lazy":
        return infer(df)
    if mode == "auto" and traces is not None and traces <= LAZY_UP_TO:
        with contextlib.suppress(UnsupportedOperatorError):
            return infer(df)
    return capture(df)
