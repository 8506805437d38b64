"""The pre-pass: every placement decision of a plan, made before the rewrite reads them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

from ember.capture.policy.aggregate import compact, place_aggregate
from ember.capture.policy.base import Placement, Setting, Site
from ember.capture.policy.grouped import may_report, place_inputs
from ember.capture.policy.keyed import ByKey, claim, readable_sides, witness
from ember.capture.policy.reach import Reach, limited
from ember.capture.rollup import Rollup, rollup
from ember.plan import ir


@dataclass(frozen=True)
class Placements:
    """The policy's decisions for one plan, by site (`base`).

    `aggregates`: where each aggregate's groups go. `grouped`: where each grouped map's
    inputs' groups go. `keyed`: the scans each join names by key (claimed left side
    first). `witnesses`: the semi joins whose witness is named by key. `unnamed`: id() of
    the scans those joins name by key, which carry no rid. `reports`: the partition maps
    whose function may report its rids. `compact`: whether rollups are indexed from their
    expand's input."""

    aggregates: Mapping[Site, Placement] = field(default_factory=dict)
    grouped: Mapping[Site, tuple[Placement, ...]] = field(default_factory=dict)
    keyed: Mapping[Site, tuple[ByKey, ...]] = field(default_factory=dict)
    witnesses: Mapping[Site, ByKey] = field(default_factory=dict)
    unnamed: frozenset[int] = frozenset()
    reports: frozenset[Site] = frozenset()
    compact: bool = False

    def rollup(self, node: ir.Aggregate, placed: Placement) -> Rollup | None:
        """The rollup whose group table is indexed from its expand's input (`capture.rollup`),
        where `node` is one and its groups are not listed: the rewrite reads its groups
        from the expand's input (at the aggregate's site + (0, 0))."""
        return _rolled_up(node, placed, self.compact)


def place(plan: ir.Node, setting: Setting) -> Placements:
    """Where the lineage of every aggregate, grouped map and key-named scan of `plan` goes.

    The walk meets the nodes the rewrite meets, in its order (a join claims the scans it
    names by key before the joins below it do), with the reach of each (`Reach`).

    >>> from ember.capture.policy.examples import everything, group_by, join, limit, scan
    >>> g = group_by(scan("t", "a"), "a")
    >>> {site: p.kind for site, p in place(limit(g), Setting()).aggregates.items()}
    {(0,): 'list'}
    >>> {site: p.kind for site, p in place(limit(g), Setting(local=everything)).aggregates.items()}
    {(0,): 'duck_after'}
    >>> nested = group_by(group_by(scan("t", "a", "b"), "a", "b"), "a")
    >>> {site: p.kind for site, p in place(nested, Setting(local=everything)).aggregates.items()}
    {(): 'list', (0,): 'duck_beside'}
    >>> under_join = join(g, scan("u", "c"), "a", "c")
    >>> {site: p.kind for site, p in place(under_join, Setting()).aggregates.items()}
    {(0,): 'spark'}
    """
    walk = _Walk(setting, limited(plan), compact(plan, setting))
    walk.visit(plan, (), Reach())
    return Placements(
        walk.aggregates, walk.grouped, walk.keyed, walk.witnesses, frozenset(walk.claimed), frozenset(walk.reports),
        walk.compact,
    )  # fmt: skip


@dataclass
class _Walk:
    setting: Setting
    limited: frozenset[int]
    compact: bool
    aggregates: dict[Site, Placement] = field(default_factory=dict)
    grouped: dict[Site, tuple[Placement, ...]] = field(default_factory=dict)
    keyed: dict[Site, tuple[ByKey, ...]] = field(default_factory=dict)
    witnesses: dict[Site, ByKey] = field(default_factory=dict)
    claimed: set[int] = field(default_factory=set)
    reports: set[Site] = field(default_factory=set)

    def visit(self, node: ir.Node, site: Site, reach: Reach) -> None:
        visit: Callable[[ir.Node, Site, Reach], None] = getattr(self, f"_{type(node).__name__}", self._inputs)
        visit(node, site, reach)
        inner = reach.in_subquery()
        for j, sub in enumerate(s for e in node.expressions() for s in e.subqueries):
            self.visit(sub, (*site, ~j), inner)

    def _inputs(self, node: ir.Node, site: Site, reach: Reach) -> None:
        below = reach.below(node)
        for i, child in enumerate(node.children):
            self.visit(child, (*site, i), below)

    def _Join(self, node: ir.Join, site: Site, reach: Reach) -> None:
        # Inside a subplan DuckDB reads after the job a rid costs nothing, and a key would
        # cost turning it into a rid afterwards.
        sides = () if reach.read_after else readable_sides(node)
        found = [k for k in (claim(node, site, left, self.setting, self.claimed) for left in sides) if k is not None]
        if found:
            self.keyed[site] = tuple(found)
        below = reach.below(node)  # an outer join passes each row of its kept sides on
        self.visit(node.left, (*site, 0), replace(below, every_row=reach.every_row and node.kind in ("left", "full", "existence")))
        if node.kind == "anti":
            return  # its right side's rows are no lineage
        named = witness(node, site, self.setting) if node.kind == "semi" else None
        if named is not None:
            self.witnesses[site] = named
            return
        self.visit(node.right, (*site, 1), replace(below, every_row=reach.every_row and node.kind in ("right", "full")))

    def _Aggregate(self, node: ir.Aggregate, site: Site, reach: Reach) -> None:
        if node.domain:  # its rows carry no lineage: nothing below it is captured
            return
        placed = self.aggregates[site] = place_aggregate(node, site, reach, self.setting, self.limited, self.compact)
        inline, whole = placed.listed, placed.whole
        # Each input row lands in one group's list; every group is kept where it is listed or read whole.
        below = replace(
            reach,
            one_for_one=inline,
            every_row=(inline or whole) and reach.every_row,
            listed=inline,
            read_after=placed.read_after,
        )
        shape = _rolled_up(node, placed, self.compact)
        if shape is None:
            self.visit(node.child, (*site, 0), below)
        else:  # its groups are read from the expand's input
            self.visit(shape.expand.child, (*site, 0, 0), below)

    def _GroupMap(self, node: ir.GroupMap, site: Site, reach: Reach) -> None:
        placed = self.grouped[site] = place_inputs(node, site, self.setting)
        below = reach.below(node)
        for i, (child, p) in enumerate(zip(node.inputs, placed, strict=True)):
            self.visit(child, (*site, i), replace(below, read_after=p.read_after))

    def _PartitionMap(self, node: ir.PartitionMap, site: Site, reach: Reach) -> None:
        if may_report(node, self.setting):
            self.reports.add(site)
        self.visit(node.inputs[0], (*site, 0), replace(reach.below(node), read_after=False))


def _rolled_up(node: ir.Aggregate, placed: Placement, compact: bool) -> Rollup | None:
    return rollup(node) if compact and not placed.listed else None
