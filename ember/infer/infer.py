"""`ember.infer`'s entry: run the job untouched and infer its lineage from the plan."""

from __future__ import annotations

from pyspark.sql import DataFrame

from ember.engines.spark import engine as engines
from ember.engines.spark.frames import spark_frame
from ember.errors import UnsupportedOperatorError
from ember.infer.exact import check_choices, why_rerun
from ember.infer.lineage import InferredLineage
from ember.infer.pushdown import infer as push_down
from ember.infer.pushdown import lift_limits
from ember.infer.saving import run_saving
from ember.infer.segments import split
from ember.plan import ir
from ember.plan.traceable import check


def infer(df: DataFrame, exact: bool = True, iterative: bool = True) -> InferredLineage:
    """Runs `df` untouched and returns lineage inferred from its plan, read lazily.

    Inference reads no data: it works out, per scan, which output columns pin the rows a
    traced output row came from. A trace binds those to the row's values and reads only
    matching rows. `exact=True` gives the same answer as `ember.capture`: where the plan
    makes the matching rows the exact lineage, directly; where a few intermediates make it
    so, the job saves them (projected) as it runs and traces go through them; otherwise a
    trace re-runs the job on just the matching rows. `exact=False` returns the matching
    rows themselves, a superset that never misses a lineage row, refined across joins
    when `iterative` (else PredTrace's naive push-down); it saves nothing.

    Output rows with equal values are traced together (set semantics).
    """
    df = spark_frame(df)  # a pandas-on-Spark frame is a DataFrame underneath
    engine = engines.of(df, "ember.infer")
    written, sources, clock = engines.imported(engine, df)
    _check_deterministic(written, exact)
    plan = lift_limits(written, exact)
    if exact:
        check_choices(plan)  # refuses operators that choose rows by chance, which a re-run chooses anew
    check(plan)  # refuses, before any job, what ember cannot trace
    inference = push_down(plan)
    numbered = {k: engines.numbered(engine, s) for k, s in sources.items()}
    rerun = exact and why_rerun(plan, inference) is not None
    segment = split(plan) if rerun else None
    if rerun and segment is None and clock:
        raise UnsupportedOperatorError(
            "ember.infer cannot trace this plan exactly: its traces re-run it, and it reads the clock "
            "(current_timestamp() and its kin), which a re-run reads anew; use ember.capture, or "
            "ember.infer(df, exact=False) for a superset"
        )
    ran = None if segment is None or not segment.saves else run_saving(engine, written, segment, numbered)
    if segment is not None and segment.saves and ran is None:
        segment = None  # a save point the job's plan does not hold: traces re-run
    output, saved = ran if ran is not None else (df.toArrow(), {})
    lifted = lift_limits(plan, exact=False)  # a limit exact mode kept: a forward trace checks its cut rows away
    candidates = inference if lifted is plan else push_down(lifted)
    return InferredLineage(engine, plan, output, numbered, inference, exact, iterative, segment, saved, candidates)


def _check_deterministic(plan: ir.Node, exact: bool) -> None:
    """A re-run must compute the same rows: random expressions cannot be traced lazily,
    nor a sample exactly (a re-run over fewer rows draws others; a superset ignores it).
    Nor can a grouped or partition map, whose rows show no value that leads back to their
    group."""
    for node in ir.walk(plan):
        if isinstance(node, ir.GroupMap):
            raise UnsupportedOperatorError(
                f"ember.infer cannot trace a {node.OPERATORS}: the rows the function returns need not show "
                "which group or partition they came from; use ember.capture"
            )
        if exact and isinstance(node, ir.Passthrough) and node.kind == ir.SEQUENCE:
            raise UnsupportedOperatorError(
                "ember.infer cannot trace pandas-on-Spark's default index (a row sequence) exactly: a re-run "
                "over the traced rows alone numbers them otherwise; use ember.capture, or ember.infer(df, "
                "exact=False) for a superset"
            )
        if exact and isinstance(node, ir.Passthrough) and node.kind in ("sample", ir.RANDOM_SAMPLE):
            raise UnsupportedOperatorError(
                "ember.infer cannot trace a sample exactly: a re-run over the traced rows alone draws "
                "other rows; use ember.capture, or ember.infer(df, exact=False) for a superset"
            )
        for e in node.expressions():
            if not e.deterministic:
                raise UnsupportedOperatorError(
                    f"ember.infer cannot trace the nondeterministic expression {e.sql}; use ember.capture"
                )
            for sub in e.subqueries:
                _check_deterministic(sub, exact)


__all__ = ["InferredLineage", "infer"]
