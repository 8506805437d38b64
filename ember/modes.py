"""`ember.lineage`: eager or lazy lineage, picked from how the lineage will be used."""

from __future__ import annotations

import contextlib

from pyspark.sql import DataFrame

from ember.capture.capture import capture
from ember.errors import UnsupportedOperatorError
from ember.infer import InferredLineage, infer
from ember.query.lineage import Lineage

MODES = ("auto", "eager", "lazy")
# At TPC-H SF1 (docs/benchmarks.md) an exact lazy trace takes ~0.1 s at the median (up to
# ~2 s) and inference adds ~7 % to the job on average; capture adds ~34 % at the median,
# once, after which traces take milliseconds. For a ~1 s job the two meet at two to three
# traces: past that, capture has paid for itself.
LAZY_UP_TO = 3


def lineage(df: DataFrame, mode: str = "auto", traces: int | None = None) -> Lineage | InferredLineage:
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
