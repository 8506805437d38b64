"""Whether ember can trace a plan (`plan.traceable`): refusals on tiny IR plans, no Spark."""

from __future__ import annotations

import re

import pytest

from ember.capture.annotate import annotate
from ember.errors import UnsupportedOperatorError
from ember.plan import ir
from ember.plan.sources import Source
from ember.plan.traceable import check
from ember.plan.workload import Workload
from tests.capture.test_annotate import A, B, C, ref, scan

RAND = ir.Expr("rand()", frozenset(), deterministic=False, dtype="double")
GROUP_BY = re.escape("GROUP BY on the nondeterministic rand()")
WINDOW = "window frame over an unordered partition"
SUBQUERY = "scalar subquery that samples rows or computes a random value"


def group_by_rand(child: ir.Node) -> ir.Aggregate:
    return ir.Aggregate(child, keys=(RAND,), columns=(ir.Named(ref(A), A),))


def running_sum(child: ir.Node, ordered: bool) -> ir.Window:
    frame = ir.Frame("rows", "unbounded", "current")
    fn = ir.Expr("sum(b)", frozenset({B.id}), dtype="bigint")
    return ir.Window(child, columns=(ir.Named(fn, C),), frames=(frame,), partition=(ref(A),), order=(ref(B),) if ordered else ())


def filtered_by(sub: ir.Node) -> ir.Filter:
    return ir.Filter(scan("t", A), cond=ir.Expr("a > scalar-subquery", frozenset({A.id}), subqueries=(sub,)))


def random_scalar() -> ir.Project:
    return ir.Project(scan("s", C), columns=(ir.Named(RAND, C),))


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        (group_by_rand(scan("t", A, B)), GROUP_BY),
        (running_sum(scan("t", A, B), ordered=False), WINDOW),
        (filtered_by(random_scalar()), SUBQUERY),
        (ir.Limit(ir.Join("inner", group_by_rand(scan("t", A, B)), scan("u", C), None)), GROUP_BY),
        (filtered_by(running_sum(scan("s", A, B), ordered=False)), WINDOW),  # inside a subquery's plan
    ],
    ids=["nondeterministic group", "unordered frame", "random subquery", "under a join", "in a subquery"],
)
def test_a_plan_ember_cannot_trace_is_refused_naming_the_operator(plan: ir.Node, message: str) -> None:
    with pytest.raises(UnsupportedOperatorError, match=message):
        check(plan)
    with pytest.raises(UnsupportedOperatorError, match=message):  # capture asks the same
        annotate(plan)


@pytest.mark.parametrize(
    "plan",
    [
        running_sum(scan("t", A, B), ordered=True),
        ir.Window(scan("t", A, B), frames=(ir.Frame("rows", "unbounded", "unbounded"),), partition=(ref(A),)),
        ir.Aggregate(scan("t", A, B), keys=(ref(A),), columns=(ir.Named(ref(A), A),)),
        filtered_by(ir.Aggregate(scan("s", C), keys=(), columns=(ir.Named(ref(C), C),))),
    ],
    ids=["ordered frame", "whole partition, unordered", "deterministic group", "plain subquery"],
)
def test_a_plan_ember_can_trace_passes(plan: ir.Node) -> None:
    check(plan)


def test_only_parts_whose_rows_carry_lineage_are_refused() -> None:
    # A source the workload leaves out, an empty relation, an anti join's right side and
    # the outer values of a decorrelated subquery carry no lineage: nothing to get wrong.
    check(group_by_rand(scan("t", A, B)), Workload(sources=("u",)))
    check(group_by_rand(ir.Scan(Source("none", "none", "none", 1), (A, B))))
    check(ir.Join("anti", scan("l", C), group_by_rand(scan("r", A, B)), None))
    outer_values = ir.Aggregate(scan("t", A, B), keys=(RAND,), columns=(ir.Named(ref(A), A),), domain=True)
    check(ir.Join("inner", scan("l", C), outer_values, None))
    # ... but a scalar subquery that varies is refused wherever it is run.
    with pytest.raises(UnsupportedOperatorError, match=SUBQUERY):
        check(filtered_by(random_scalar()), Workload(sources=("u",)))


def test_inputs_are_checked_before_the_node_and_its_subqueries() -> None:
    both = group_by_rand(running_sum(filtered_by(random_scalar()), ordered=False))
    with pytest.raises(UnsupportedOperatorError, match=SUBQUERY):
        check(both)
    with pytest.raises(UnsupportedOperatorError, match=WINDOW):
        check(group_by_rand(running_sum(scan("t", A, B), ordered=False)))
