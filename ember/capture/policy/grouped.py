"""Where the groups of a grouped map and the partitions of a partition map go.

A grouped map's function sees its whole group, so each output row's lineage is the group
(each input's, cogrouped): a side table keyed by the group's keys, read by DuckDB after
the job where it can read the input again, else computed by Spark. A partition map's
function sees its whole partition: where its input's rids can come back through the
driver, the wrapped function reports the rids of the rows it reads itself (no second
job); else its input is cached and a Spark job lists the cached partitions.
"""

from __future__ import annotations

from ember.capture.policy.base import Placement, Setting, Site
from ember.capture.policy.bounds import bounded
from ember.plan import ir


def place_inputs(node: ir.GroupMap, site: Site, setting: Setting) -> tuple[Placement, ...]:
    """Where the groups of each of a grouped map's inputs go.

    >>> from ember.capture.policy.examples import everything, limit, scan
    >>> t = scan("t", "a")
    >>> m = ir.GroupMap((t, limit(t)), keys=((t.attrs[0],), (t.attrs[0],)), function=ir.Expr("f", frozenset()), attrs=())
    >>> [p.kind for p in place_inputs(m, (), Setting(local=everything))]
    ['duck_after', 'spark']
    """
    placed = []
    for i, child in enumerate(node.inputs):
        if setting.reads_again(child):
            placed.append(Placement((*site, i), "duck_after", "DuckDB reads the input again after the job"))
        else:
            why = "DuckDB cannot read the input again (or a second run could give other rows): Spark computes the groups"
            placed.append(Placement((*site, i), "spark", why))
    return tuple(placed)


def may_report(node: ir.PartitionMap, setting: Setting) -> bool:
    """Whether a partition map's wrapped function may report the rids it reads: allowed
    (`Setting.reported`: not after a task ended before its function read them all), and
    its input's rids come back through the driver. It reports rids only: the rewrite
    reports where its input's slots are all plain rids.

    >>> from ember.capture.policy.examples import scan
    >>> m = ir.PartitionMap((scan("t", "a"),), keys=((),), function=ir.Expr("f", frozenset()), attrs=())
    >>> may_report(m, Setting()), may_report(m, Setting(reported=False)), may_report(m, Setting(inline_rids=2))
    (True, False, False)
    """
    (child,) = node.inputs
    return setting.reported and bounded(child, setting.inline_rids)
