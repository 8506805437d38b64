"""The guess that a window's order has no ties, so its rows need not be cached.

A ROWS frame's rows depend on how the engine orders rows that tie in the window's
ORDER BY, so a side table that computed the window again could see other frames than
the job did: annotate caches such a window where both read it (`ir.Shared`). Caching a large window costs the job dearly, while a
running total is most often ordered by a key its partition never repeats (a date per
item), and then the positions are the same in every engine. So the capture guesses
that no row ties (`ir.Window.untied`) and keeps the guess only where DuckDB computes the
window again for every side table that does (`held`): each of its reads checks that no
two rows of a partition it computes tie (`capture.local`), and a tie, or a read left to
Spark, raises `Tied`, and the capture runs again with the window cached.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ember.plan import ir
from ember.plan.slots import Annotated, SideTable

_FLOATING = ("float", "double")


class Tied(Exception):
    """Rows of a window partition tie in its order, or a side table computing the window
    again is left to Spark, which does not check: the window's positions may differ."""


def untied(plan: ir.Node) -> ir.Node:
    """The plan with every window whose positions would force a cache marked `untied`,
    where its order is on columns both engines order alike (no floats: Spark folds -0.0
    and NaNs) and no frame bound is a value offset (whether DuckDB can compute it is
    `held`'s question)."""
    children = tuple(untied(c) for c in plan.children)
    node = ir.with_children(plan, children) if any(c is not o for c, o in zip(children, plan.children, strict=True)) else plan
    if isinstance(node, ir.Window) and _guessable(node):
        return replace(node, untied=True)
    return node


def _guessable(window: ir.Window) -> bool:
    """A ROWS frame's rows depend on how ties break (a RANGE frame's do not, nor does a
    whole partition's: neither window is cached for its positions)."""
    return (
        any(not f.ordered_alike for f in window.frames)
        and bool(window.order)
        and not window.python
        and not any(ir.dtype_of(e) in _FLOATING for e in window.partition + window.order)
        and not any(b.startswith("value ") for f in window.frames for b in (f.lower, f.upper))
    )


def computes_again(table_plan: ir.Node) -> bool:
    """Whether a side table's plan computes an untied window itself (not a cached one)."""
    if isinstance(table_plan, ir.Shared):
        return False
    if isinstance(table_plan, ir.Window) and table_plan.untied:
        return True
    return any(computes_again(c) for c in table_plan.children)


def held(annotated: Annotated, readable: Callable[[SideTable], bool]) -> bool:
    """Whether every side table that computes an untied window again is one DuckDB reads
    (`readable`), whose rows come back to the driver: the guess is then checked wherever
    it matters."""
    return all(t.bounded and readable(t) for t in annotated.tables if computes_again(t.plan))
