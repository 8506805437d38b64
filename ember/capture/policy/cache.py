"""Cached or computed again: a subplan both the job and a side table read."""

from __future__ import annotations

from ember.capture.policy.base import Setting
from ember.capture.policy.bounds import bounded
from ember.plan import ir


def computed_again(plan: ir.Node, setting: Setting) -> bool:
    """Whether a side table may compute a subplan the job computes too again, rather than
    read a copy the job caches. Cached where a second run could give other rows (a
    sample, a limit or a window among ties), or where it aggregates and Spark would
    compute it again (its few rows cost less to keep than to compute again); otherwise
    computed again, which reads only what the side table's keys reach (a scan and joins
    cost less to repeat than to cache whole), by DuckDB where it can (`plan` is the
    subplan as the rewrite made it, slots and all).

    >>> from ember.capture.policy.examples import everything, group_by, limit, scan
    >>> computed_again(scan("t", "a"), Setting()), computed_again(limit(scan("t", "a")), Setting())
    (True, False)
    >>> g = group_by(scan("t", "a"), "a")
    >>> computed_again(g, Setting()), computed_again(g, Setting(local=everything))
    (False, True)
    """
    return ir.repeatable(plan) and (
        not any(isinstance(n, ir.Aggregate) for n in ir.walk(plan))
        or (setting.local is not None and bounded(plan, setting.inline_rids) and setting.local(plan))
    )
