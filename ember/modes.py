"""`ember.lineage`: eager or lazy lineage, picked from how the lineage will be used."""

from __future__ import annotations

from pyspark.sql import DataFrame

from ember.capture.capture import capture
from ember.infer import InferredLineage, infer
from ember.lineage import Lineage

MODES = ("auto", "eager", "lazy")
# An exact lazy trace re-runs the job on a few rows: roughly as long as a small Spark job
# (docs/benchmarks/lazy.md). Capture costs about one extra run of the job, once, after
# which traces take milliseconds. Past a handful of traces, capture has paid for itself.
LAZY_UP_TO = 3


def lineage(df: DataFrame, mode: str = "auto", traces: int | None = None) -> Lineage | InferredLineage:
    """Lineage of `df`, captured (`"eager"`, `ember.capture`) or inferred (`"lazy"`,
    `ember.infer`). `"auto"` infers when at most `LAZY_UP_TO` traces are expected
    (`traces=`) and captures otherwise, including when nothing is declared (interactive
    use asks many questions)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "lazy" or (mode == "auto" and traces is not None and traces <= LAZY_UP_TO):
        return infer(df)
    return capture(df)
