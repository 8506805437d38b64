"""The capture rewrite: a pure function from a plan to a plan whose rows carry lineage.

Every row of the rewritten plan carries *slots* next to its own columns:

- a rid slot holds the `ember_rid` of one source row in the row's lineage (null if none,
  e.g. the missing side of an outer join);
- a ref slot points at a group of rows of a *side table*: the rows of an aggregate's
  input that form this row's group, a semi join's witnesses, the rows of a scalar
  subquery. It holds the group's key values (matched null-safely against the side
  table's keys) and a `present` flag that is null where the ref does not apply.

Side tables are themselves plans whose rows carry slots, so lineage stays normalized
(Smoke's rid index, not Perm's repeated tuples): an aggregate's output row holds one
ref, not the list of its input rows. Indexes are composed from slots and side tables
after the job (`store.index`).

A side table is its own Spark job, unless it can ride in the job's result: an aggregate
whose output rows reach the result one for one (only projections, filters, sorts, limits
and unions above it) carries its group's rows as a list column instead (a *list slot*),
so the job's result is already the side table grouped by output row and no second job
runs. Its input rows each land in one group's list, so an aggregate below it (and below
only such operators) carries its groups as lists too, nested in the outer lists. The
same holds within a scalar subquery, whose rows are its side table's result. Below
a join a list would be copied into every row the output row meets, so there the side
table stays separate. So does a group list too large for the driver to receive with
the result (`inline_rids`), and one that costs more to carry than to read afterwards:
lists make Spark aggregate with its slower object-based operator, which a
count(DISTINCT) repeats over four aggregation stages (TPC-H Q16), a LIMIT or a HAVING
above the aggregate drops groups whose lists were built all the same (Q3, Q10, Q11,
Q21), a global aggregate gathers one list of all its input on one task (Q6, Q14, Q19),
and an aggregate under a listing one has its lists nested in the outer lists (Q13), and an
aggregate over a join whose groups all reach the result makes every joined scan carry
its rids through the join's shuffles (Q5, Q7, Q8, Q9, Q12). Where DuckDB can read such an
aggregate's input (`capture.local_sides`), its groups become a side table DuckDB reads
(`local`): after the job, only the groups that reach the result; or beside the job,
whole, where every group reaches it (`whole`: a global aggregate's one group, a distinct
count's groups with no filter or limit above, an inner aggregate's groups in the lists
of one whose groups all reach it, a join's groups, and an aggregate's groups that reach
it through no operator that drops a row: a full join's sides, a left join's kept side, a
union, the input of a table read whole, as TPC-DS Q97's two channels' groups below its
count).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ember.capture.rollup import rollup
from ember.errors import UnsupportedOperatorError
from ember.plan import ir
from ember.plan.ir import walk
from ember.plan.slots import (
    FRESH_IDS_FROM,
    GROUPS,
    Annotated,
    ListSlot,
    RefSlot,
    RidSlot,
    SideTable,
    Slot,
    slot_attrs,
)
from ember.plan.sources import Source
from ember.plan.workload import Workload

# Joins whose output holds both sides' columns, so either side's key can be read above it.
_BOTH_SIDES = ("inner", "cross", "left", "right", "full")

# Operators that pass each input row to the output at most once (no join, no group):
# a list slot made below them reaches the result without being copied.
_ONE_FOR_ONE = (ir.Project, ir.Filter, ir.Limit, ir.Passthrough, ir.Union)

# How many rows lineage may hold to come back through the driver's result channel (Spark
# caps a result at `spark.driver.maxResultSize`, 1 GiB by default); past it, an aggregate's
# groups become a side table, and side tables are written to files by the executors.
INLINE_RIDS = 32_000_000


@dataclass
class _Rewriter:
    workload: Workload = field(default_factory=Workload)
    keyed: frozenset[tuple[str, str]] = frozenset()  # (source key, column) unique in that source
    local: Callable[[ir.Node], bool] | None = None  # whether DuckDB can read a subplan after the job
    limited: frozenset[int] = frozenset()  # id() of aggregates reaching the result under a LIMIT or HAVING
    by_key: set[int] = field(default_factory=set)  # id() of scans a join above names by key
    inline_rids: int = 0
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(FRESH_IDS_FROM))
    tables: list[SideTable] = field(default_factory=list)
    # Whether the rows of the node being rewritten reach the result one for one, and
    # whether its children's rows will (they do if it passes them on one for one).
    at_result: bool = True
    reaches_result: bool = True
    # Whether every row of the node being rewritten reaches the result (none dropped above
    # it), and whether its children's rows all will.
    every_row: bool = True
    keeps_every_row: bool = True
    nested: bool = False  # rewriting the input of an aggregate that lists its groups
    # Rewriting the input of one DuckDB reads after the job: a rid costs DuckDB nothing, and
    # a scan named by key would cost turning the keys into rids afterwards.
    read_after: bool = False
    # Whether a partition map's wrapped function may report the rids it reads (else its
    # input is cached and listed by a side-table job).
    reported: bool = True
    subquery: bool = False  # rewriting a scalar subquery's plan (its table is a job of its own)
    # Whether a rollup's groups may be indexed from its expand's input: every table comes
    # back through the driver, where `store.index` resolves refs to a set's leading keys.
    compact: bool = False
    at_trace: int | None = None  # scanned rows past which a table read whole is left to traces

    def fresh(self, like: str, dtype: str, nullable: bool = True) -> ir.Attr:
        i = next(self.ids)
        return ir.Attr(i, f"__ember_{like}_{i}", dtype, nullable)

    def table(
        self,
        plan: ir.Node,
        keys: tuple[ir.Attr, ...],
        slots: tuple[Slot, ...],
        why: str,
        order: tuple[ir.Attr, ...] = (),
        inline: bool = False,
        local: bool = False,
        whole: bool = False,
        aggregated: ir.Node | None = None,
        reported: bool = False,
        prefixes: tuple[tuple[int, int], ...] = (),
    ) -> int:
        t = SideTable(
            len(self.tables), plan, keys, slots, why, order, inline, local, self.bounded(plan), whole, self.keyed,
            aggregated, reported, prefixes,
        )  # fmt: skip
        self.tables.append(t)
        return t.id

    def shared(self, plan: ir.Node) -> ir.Node:
        """A subplan that both the job and a side table read: cached once if a second run
        could give other rows, or if it aggregates and Spark would compute it again (its few
        rows cost less to keep than to compute again); otherwise recomputed, which reads
        only what the side table's keys reach (a scan and joins cost less to repeat than to
        cache whole), by DuckDB where it can (Q20's witnesses, over a correlated sum)."""
        if isinstance(plan, ir.Shared):
            return plan
        if ir.repeatable(plan) and (
            not any(isinstance(n, ir.Aggregate) for n in walk(plan))
            or (self.local is not None and self.bounded(plan) and self.local(plan))
        ):
            return plan
        return ir.Shared(plan, key=next(self.ids))

    def bounded(self, plan: ir.Node) -> bool:
        """Whether rows made from `plan` can come back through the driver's result channel
        (else Spark writes them to files and the executors index them: `capture.sides`)."""
        return self.inline_rids > 0 and input_rows(plan) <= self.inline_rids

    @staticmethod
    def job_input(original: ir.Node, side: ir.Node) -> ir.Node:
        """What the job reads of a subplan whose slots only a side table reads (`side`, the
        rewritten subplan as the table reads it): the cached plan, which the job fills, or
        else the subplan as it was, since a rid the job would drop still costs Spark a read
        of each Parquet row's position."""
        return side if isinstance(side, ir.Shared) else original

    # --- the rewrite ---------------------------------------------------------
    def rewrite(self, node: ir.Node) -> tuple[ir.Node, tuple[Slot, ...]]:
        """`node` rewritten so its output is its own columns followed by its slots."""
        method = getattr(self, f"_{type(node).__name__}")
        here = self.at_result = self.reaches_result
        every = self.every_row = self.keeps_every_row
        self.reaches_result = here and isinstance(node, _ONE_FOR_ONE)
        self.keeps_every_row = every and _keeps_every_row(node)
        try:
            new, slots = method(node)
            # A subquery's rows are its side table's: they reach that job's result one for one.
            self.reaches_result, self.keeps_every_row = True, False
            new, slots = self._with_subqueries(node, new, slots)
        finally:
            self.reaches_result, self.keeps_every_row = here, every
        return self._normalized(node.output, new, slots), slots

    def _normalized(self, output: tuple[ir.Attr, ...], new: ir.Node, slots: tuple[Slot, ...]) -> ir.Node:
        want = output + slot_attrs(slots)
        if new.output == want:
            return new
        return ir.Project(new, columns=_columns(want))

    def _with_subqueries(
        self, node: ir.Node, new: ir.Node, slots: tuple[Slot, ...]
    ) -> tuple[ir.Node, tuple[Slot, ...]]:
        """Rows of a node that evaluates a scalar subquery get that subquery's whole lineage."""
        subqueries = [s for e in node.expressions() for s in e.subqueries]
        if not subqueries:
            return new, slots
        extra: list[Slot] = []
        for sub in subqueries:
            if ir.varies(sub):
                raise UnsupportedOperatorError(
                    f"ember cannot trace a scalar subquery that samples rows or computes a random value "
                    f"({ir.outline(sub)}): its lineage would come from another run than its value"
                )
            subquery, self.subquery = self.subquery, True
            try:
                plan, sub_slots = self.rewrite(sub)
            finally:
                self.subquery = subquery
            if not sub_slots:  # nothing of it is captured
                continue
            if len(sub_slots) == 1 and isinstance(sub_slots[0], RefSlot) and not sub_slots[0].keys and _one_group(sub):
                # Its one row's lineage is its global aggregate's side table: pointed at directly.
                extra.append(RefSlot(sub_slots[0].table, (), self.fresh("present", "boolean")))
                continue
            tid = self.table(_keep(plan, slot_attrs(sub_slots)), (), sub_slots, "scalar subquery")
            extra.append(RefSlot(tid, (), self.fresh("present", "boolean")))
        columns = _columns(new.output) + tuple(
            ir.Named(ir.Constant(True, s.present), s.present) for s in extra if isinstance(s, RefSlot)
        )
        return ir.Project(new, columns=columns), (*slots, *extra)

    def _Scan(self, node: ir.Scan) -> tuple[ir.Node, tuple[Slot, ...]]:
        if node.source.kind == "none" or not self.workload.keeps(node.source.name) or id(node) in self.by_key:
            return node, ()
        only = self.workload.where.get(node.source.name)
        rid = self.fresh("rid", "bigint", nullable=only is not None)
        return ir.Numbered(node, rid=rid, only=only), (RidSlot(node.source.key, rid),)

    def _unary(self, node: ir.Unary) -> tuple[ir.Node, tuple[Slot, ...]]:
        child, slots = self.rewrite(node.child)
        return replace(node, child=child), slots

    _Filter = _unary
    _Limit = _unary
    _Passthrough = _unary

    def _Project(self, node: ir.Project) -> tuple[ir.Node, tuple[Slot, ...]]:
        child, slots = self.rewrite(node.child)
        keep = _columns(slot_attrs(slots))
        return replace(node, child=child, columns=node.columns + keep), slots

    def _Generate(self, node: ir.Generate) -> tuple[ir.Node, tuple[Slot, ...]]:
        child, slots = self.rewrite(node.child)
        return replace(node, child=child, kept=node.kept + slot_attrs(slots)), slots

    def _Expand(self, node: ir.Expand) -> tuple[ir.Node, tuple[Slot, ...]]:
        child, slots = self.rewrite(node.child)
        renamed = tuple(self._renamed(s) for s in slots)
        passed = tuple(ir.ColumnRef(a) for a in slot_attrs(slots))
        return (
            replace(
                node,
                child=child,
                projections=tuple(p + passed for p in node.projections),
                attrs=node.attrs + slot_attrs(renamed),
            ),
            renamed,
        )

    def _renamed(self, slot: Slot) -> Slot:
        if isinstance(slot, RidSlot):
            return replace(slot, attr=self.fresh("rid", slot.attr.dtype, slot.attr.nullable))
        if isinstance(slot, ListSlot):
            return replace(slot, attr=self.fresh("list", slot.attr.dtype))
        keys = tuple(self.fresh("key", k.dtype) for k in slot.keys)
        lo, hi = (self.fresh("lo", "bigint"), self.fresh("hi", "bigint")) if slot.lo is not None else (None, None)
        return replace(slot, keys=keys, present=self.fresh("present", "boolean"), lo=lo, hi=hi)

    def _Join(self, node: ir.Join) -> tuple[ir.Node, tuple[Slot, ...]]:
        """A scan whose rows reach this join with a column it equates that is unique in the
        scan's source needs no rid: above the join, that column's value names the row
        (Smoke's rid through a key-foreign key join, without the rid in the scan's shuffles)."""
        sides = () if self.read_after else _readable_sides(node)
        found = [k for k in (self._keyed(node, left) for left in sides) if k is not None]
        new, slots = self._joined(node)
        if not found:
            return new, slots
        columns = _columns(new.output) + tuple(c for _, c in found)
        return ir.Project(new, columns=columns), (*slots, *(s for s, _ in found))

    def _keyed(self, join: ir.Join, left: bool) -> tuple[RidSlot, ir.Named] | None:
        """Claims one scan under the join's `left` (or right) side to be named by key."""
        for scan, column, attr in keyed_scans(join, left):
            if id(scan) not in self.by_key and self._nameable(scan.source, column):
                self.by_key.add(id(scan))
                slot = RidSlot(scan.source.key, self.fresh("keyed", attr.dtype), key_column=column)
                return slot, ir.Named(ir.ColumnRef(attr), slot.attr)
        return None

    def _nameable(self, source: Source, column: str) -> bool:
        """Whether `column`'s value may name `source`'s rows: unique in it, and no workload
        `where` (whose rows must keep a rid that is null outside the predicate)."""
        return (source.key, column) in self.keyed and self.workload.keeps(source.name) and source.name not in self.workload.where

    def _joined(self, node: ir.Join) -> tuple[ir.Node, tuple[Slot, ...]]:
        every = self.every_row  # an outer join passes each row of its kept sides on
        self.keeps_every_row = every and node.kind in ("left", "full", "existence")
        left, lslots = self.rewrite(node.left)
        if node.kind == "anti":
            return replace(node, left=left), lslots
        witness = self._keyed_witness(node) if node.kind == "semi" else None
        if witness is not None:
            semi = replace(node, left=left)
            return witness.marked(semi), (*lslots, witness.slot)
        self.keeps_every_row = every and node.kind in ("right", "full")
        right, rslots = self.rewrite(node.right)
        if node.kind not in ("semi", "existence"):
            return replace(node, left=left, right=right), lslots + rslots
        if not rslots:  # the witnesses carry no captured source
            return replace(node, left=left), lslots
        # The side table reads the right side again (cached if a second run could differ).
        right = self.shared(right)
        # Witnesses of a left row depend only on the left columns the condition reads: the
        # side table joins the values of those that the fetched lineage holds (`ir.Keys`)
        # with the right side, so it never computes the left side again.
        probe = tuple(a for a in node.left.output if node.cond is not None and a.id in node.cond.refs)
        joined: ir.Node = right
        if probe:
            joined = ir.Join("inner", ir.Keys(attrs=probe), right, node.cond)
        elif node.cond is not None:
            joined = ir.Filter(right, cond=node.cond)
        keys = tuple(self.fresh("key", a.dtype) for a in probe)
        side = ir.Project(
            joined,
            columns=tuple(ir.Named(ir.ColumnRef(a), k) for a, k in zip(probe, keys, strict=True))
            + _columns(slot_attrs(rslots)),
        )
        tid = self.table(side, keys, rslots, f"{node.kind} join witnesses")
        # The row's own copies of its probe values are the ref's keys.
        probe_keys = tuple(self.fresh("key", a.dtype) for a in probe)
        present = self.fresh("present", "boolean")
        semi = replace(node, left=left, right=self.job_input(node.right, right))
        marked = ir.Project(
            semi,
            columns=_columns(semi.output)
            + tuple(ir.Named(ir.ColumnRef(a), k) for a, k in zip(probe, probe_keys, strict=True))
            + (ir.Named(ir.Constant(True, present), present),),
        )
        return marked, (*lslots, RefSlot(tid, probe_keys, present))

    def _keyed_witness(self, join: ir.Join) -> _Witness | None:
        """A semi join on a column unique in the one source its right side reads has one
        witness per kept row: the source row holding the row's probe value. That value
        names it (as a key slot), so the right side gets no rid and no side table runs."""
        for scan, column, probe in witness_scans(join):
            if self._nameable(scan.source, column):
                return _Witness(RidSlot(scan.source.key, self.fresh("keyed", probe.dtype), key_column=column), probe)
        return None

    def _read_after(self, node: ir.Aggregate) -> bool:
        """Whether the aggregate's groups are read by DuckDB rather than listed in the result
        (see the module doc): listing them costly, its input readable. A scalar subquery's
        aggregate is read so too: its list would have Spark compute the subquery's table
        as a job of its own (TPC-DS Q44's average, Q54's months)."""
        # Read from the expression's text: a cost guess only, either way the lineage is the same.
        distinct = any("(distinct " in c.expr.sql.lower() for c in node.columns if isinstance(c.expr, ir.Expr))
        costly = (
            not node.keys
            or id(node) in self.limited
            or distinct
            or self.nested
            or self.subquery
            or self._joined_whole(node)
        )
        return costly and self.local is not None and not self._restricted(node.child) and self.local(node.child)

    def _joined_whole(self, node: ir.Aggregate) -> bool:
        """Whether every group of an aggregate over joins of three or more scans reaches the
        result, and the driver could take them all: then DuckDB reads them beside the job.
        Listed, they make every joined scan read each row's position and carry it through
        every shuffle of the joins; DuckDB reads the same joins in-process, on the cycles
        Spark leaves idle between its stages (TPC-H Q5, Q7, Q8, Q9:
        docs/benchmarks/capture-history.md).
        Fewer scans keep their lists: over one scan they add one column to it, which DuckDB
        would read all over again (Q1); over one join, one rid (or a join key naming the
        row) rides through one shuffle, less work than DuckDB reading both sides whole on
        the job's cores — unless the join scans more than `at_trace` rows, where the table
        is left to the traces that reach it (`store.later`) and nothing is read or carried
        at capture (Q12: its `lineitem` positions cost the job as much as Perm's lists).
        So does an aggregate whose only join is a semi join (Q4: its witnesses are a table
        of their own, the lists hold the left side's rids alone), and one over another
        aggregate, whose groups its lists nest (Q13's customers per count of orders)."""
        grouped = any(isinstance(n, ir.Aggregate) for n in walk(node.child))
        scans = _listing_scans(node.child)
        traced = self.at_trace is not None and input_rows(node.child) > self.at_trace
        joins = scans > 2 or (scans == 2 and traced)
        return self.every_row and joins and not grouped and self.bounded(node.child)

    def _local(self, plan: ir.Node) -> bool:
        """Whether DuckDB can read `plan` after the job, giving the rows the job read."""
        return self.local is not None and ir.repeatable(plan) and not self._restricted(plan) and self.local(plan)

    def _restricted(self, plan: ir.Node) -> bool:
        """Whether a workload `where` keeps only some rows of a source `plan` reads (their
        rids are computed by Spark)."""
        return any(isinstance(n, ir.Scan) and n.source.name in self.workload.where for n in walk(plan))

    def _Aggregate(self, node: ir.Aggregate) -> tuple[ir.Node, tuple[Slot, ...]]:
        if node.domain:  # its rows carry no lineage: nothing below it is captured
            return node, ()
        # Every group reaches the result though not one for one (below a full join, or in
        # the input of a table read whole): DuckDB reads them all, beside the job.
        reached = not self.at_result and self.every_row and self._local(node.child)
        after = reached or (self.at_result and self._read_after(node))
        # Spark runs no aggregate function (a list) beside a pandas UDAF in one aggregate
        inline = self.at_result and not after and self.bounded(node.child) and not node.python
        whole = after and self.every_row
        self.reaches_result = inline  # each input row lands in one group's list
        self.keeps_every_row = (inline or whole) and self.every_row  # and every group is kept
        nested, self.nested = self.nested, inline
        read_after, self.read_after = self.read_after, after
        # A rollup whose groups are a side table is indexed from its expand's input (`capture.rollup`).
        shape = rollup(node) if self.compact and not inline else None
        try:
            child, slots = self.rewrite(node.child if shape is None else shape.expand.child)
        finally:
            self.nested, self.read_after = nested, read_after
        if not slots:
            return replace(node, child=child if shape is None else node.child), ()
        for k in node.keys:
            if isinstance(k, ir.Expr) and not k.deterministic:
                raise UnsupportedOperatorError(f"ember cannot trace a GROUP BY on the nondeterministic {k.sql}")
        if inline:
            attrs = slot_attrs(slots)
            tid = self.table(_keep(child, attrs), (), slots, "aggregate groups, listed in the result", inline=True)
            item = attrs[0].dtype if len(attrs) == 1 else "struct<" + ",".join(f"{a.name}:{a.dtype}" for a in attrs) + ">"
            rows = self.fresh("list", f"array<{item}>", False)
            collected = ir.Named(ir.Collected(attrs), rows)
            return replace(node, child=child, columns=(*node.columns, collected)), (ListSlot(tid, rows),)
        side_child = child if after else self.shared(child)  # DuckDB reads its own input
        grouped = node.keys if shape is None else tuple(ir.ColumnRef(a) for a in shape.keys)
        side_keys = tuple(self.fresh("key", ir.dtype_of(k)) for k in grouped)
        side = ir.Project(
            side_child,
            columns=tuple(ir.Named(k, a) for k, a in zip(grouped, side_keys, strict=True)) + _columns(slot_attrs(slots)),
        )
        if shape is None:
            job_child = self.job_input(node.child, side_child)
        else:
            job_child = replace(shape.expand, child=self.job_input(shape.expand.child, side_child))
        prefixes = () if shape is None else shape.prefixes
        tid = self.table(side, side_keys, slots, GROUPS, local=after, whole=whole, aggregated=job_child, prefixes=prefixes)
        out_keys = tuple(self.fresh("key", ir.dtype_of(k)) for k in node.keys)
        present = self.fresh("present", "boolean")
        columns = (
            node.columns
            + tuple(ir.Named(k, a) for k, a in zip(node.keys, out_keys, strict=True))
            + (ir.Named(ir.Constant(True, present), present),)
        )
        job = replace(node, child=job_child, columns=columns)
        return job, (RefSlot(tid, out_keys, present),)

    def _Union(self, node: ir.Union) -> tuple[ir.Node, tuple[Slot, ...]]:
        rewritten = [self.rewrite(c) for c in node.inputs]
        per_child: list[tuple[Slot, ...]] = [
            () if i in node.blind else s for i, (_, s) in enumerate(rewritten)
        ]
        # Union outputs take the first input's attributes, so slots are named by that input.
        first_names: list[Slot] = []
        for i, slots in enumerate(per_child):
            first_names.extend(slots if i == 0 else tuple(self._renamed(s) for s in slots))
        all_attrs = slot_attrs(tuple(first_names))
        inputs = []
        offset = 0
        for i, ((plan, _), slots) in enumerate(zip(rewritten, per_child, strict=True)):
            own = slot_attrs(slots)
            cols = list(_columns(node.inputs[i].output))
            for j, a in enumerate(all_attrs):
                if offset <= j < offset + len(own):
                    src = own[j - offset]
                    cols.append(ir.Named(ir.ColumnRef(src), src if i == 0 else replace(a, id=next(self.ids))))
                else:
                    cols.append(ir.Named(ir.Constant(None, a), a if i == 0 else replace(a, id=next(self.ids))))
            offset += len(own)
            inputs.append(ir.Project(plan, columns=tuple(cols)))
        return replace(node, inputs=tuple(inputs), attrs=node.attrs + all_attrs), tuple(first_names)

    def _Window(self, node: ir.Window) -> tuple[ir.Node, tuple[Slot, ...]]:
        child, slots = self.rewrite(node.child)
        if not slots:
            return replace(node, child=child), ()
        frames = list(dict.fromkeys(node.frames))
        partial = [f for f in frames if not f.partition_wide]
        if partial and not node.order:
            raise UnsupportedOperatorError("ember cannot trace a window frame over an unordered partition")
        extra: list[ir.Named] = []
        bounds: dict[ir.Frame, tuple[ir.Attr, ir.Attr]] = {}
        pos = self.fresh("pos", "bigint")
        if partial:
            extra.append(ir.Named(ir.FrameCount("pos"), pos))
        for f in partial:
            bounds[f] = (self.fresh("lo", "bigint"), self.fresh("hi", "bigint"))
            extra += [ir.Named(ir.FrameCount("lo", f), bounds[f][0]), ir.Named(ir.FrameCount("hi", f), bounds[f][1])]
        window: ir.Node = replace(node, child=child, columns=node.columns + tuple(extra))
        # Frame positions, and a partition whose rows a second run could choose otherwise (a
        # sample, a limit among ties), must mean the same rows in the job and in the side
        # table; a RANGE frame's do, and an untied window's (`capture.untie`).
        if (any(not f.ordered_alike for f in partial) and not node.untied) or not ir.repeatable(node.child):
            window = ir.Shared(window, key=next(self.ids))
        side_keys = tuple(self.fresh("key", p.dtype) for p in node.partition)
        side = ir.Project(
            window,
            columns=tuple(ir.Named(p, k) for p, k in zip(node.partition, side_keys, strict=True))
            + ((ir.Named(ir.ColumnRef(pos), pos),) if partial else ())
            + _columns(slot_attrs(slots)),
        )
        tid = self.table(side, side_keys, slots, "window partitions", (pos,) if partial else ())
        refs: list[RefSlot] = []
        columns = list(_columns(window.output))
        if any(f.partition_wide for f in frames):
            refs.append(self._window_ref(tid, node.partition, columns, None))
        refs += [self._window_ref(tid, node.partition, columns, bounds[f]) for f in partial]
        return ir.Project(window, columns=tuple(columns)), (*slots, *refs)

    def _GroupMap(self, node: ir.GroupMap) -> tuple[ir.Node, tuple[Slot, ...]]:
        """A group's rows (each input's, cogrouped) are a side table keyed by the group's keys,
        as an aggregate's are; the function is wrapped to return its group's keys with each
        row it makes (the appended `attrs`), since nothing else in its output tells the group.
        Where DuckDB can read an input again, it reads the groups the result kept after the
        job; else a Spark job computes them."""
        local = [self._local(c) for c in node.inputs]
        rewritten = []
        for c, after in zip(node.inputs, local, strict=True):
            read_after, self.read_after = self.read_after, after
            try:
                rewritten.append(self.rewrite(c))
            finally:
                self.read_after = read_after
        if not any(slots for _, slots in rewritten):
            return replace(node, inputs=tuple(c for c, _ in rewritten)), ()
        out_keys = tuple(self.fresh("key", k.dtype) for k in node.keys[0])
        inputs: list[ir.Node] = []
        refs: list[RefSlot] = []
        columns: list[ir.Named] = []
        for (child, slots), original, keys, after in zip(rewritten, node.inputs, node.keys, local, strict=True):
            if not slots:
                inputs.append(child)
                continue
            side_child = child if after else self.shared(child)
            side_keys = tuple(self.fresh("key", k.dtype) for k in keys)
            side = ir.Project(
                side_child,
                columns=tuple(ir.Named(ir.ColumnRef(k), a) for k, a in zip(keys, side_keys, strict=True))
                + _columns(slot_attrs(slots)),
            )
            tid = self.table(side, side_keys, slots, "grouped map groups", local=after)
            # The function gets every column of its input: a cached input's slots are cut off.
            inputs.append(_keep(self.job_input(original, side_child), original.output))
            ref_keys = out_keys if not refs else tuple(self.fresh("key", k.dtype) for k in out_keys)
            present = self.fresh("present", "boolean")
            columns += [ir.Named(ir.ColumnRef(k), r) for k, r in zip(out_keys, ref_keys, strict=True) if r is not k]
            columns.append(ir.Named(ir.Constant(True, present), present))
            refs.append(RefSlot(tid, ref_keys, present))
        job = replace(node, inputs=tuple(inputs), attrs=node.attrs + out_keys)
        return ir.Project(job, columns=(*_columns(job.output), *columns)), tuple(refs)

    def _PartitionMap(self, node: ir.PartitionMap) -> tuple[ir.Node, tuple[Slot, ...]]:
        """A partition's rows are a side table keyed by a number naming the partition, which
        the wrapped function appends to the rows it returns. Where the input's slots are
        rids, the function gets them as more columns (last) and reports those of the rows
        it read itself, keyed by a number it draws (`reported`: no second job). Else the
        input is cached and the job hands the function its partition's number as one more
        column; the side table lists the cached partitions by the same number (a second run
        could cut partitions otherwise)."""
        (original,) = node.inputs
        read_after, self.read_after = self.read_after, False
        try:
            child, slots = self.rewrite(original)
        finally:
            self.read_after = read_after
        if not slots:
            return replace(node, inputs=(child,)), ()
        reported = (
            self.reported
            and self.bounded(child)  # its rids come back to the driver
            and all(isinstance(s, RidSlot) and s.key_column is None for s in slots)
        )
        dtype = "bigint" if reported else "int"  # a drawn number, or Spark's partition id
        side_key, out_key = self.fresh("key", dtype), self.fresh("key", dtype)
        read = child if reported else ir.Shared(child, key=next(self.ids))  # what the side table lists
        side = ir.Project(read, columns=(ir.Named(ir.PartitionId(), side_key), *_columns(slot_attrs(slots))))
        tid = self.table(side, (side_key,), slots, "partition map partitions", reported=reported)
        if reported:
            job = replace(node, inputs=(_keep(child, original.output + slot_attrs(slots)),), reports=tid)
        else:
            number = ir.Named(ir.PartitionId(), self.fresh("key", dtype))
            job = replace(node, inputs=(ir.Project(read, columns=(*_columns(original.output), number)),))
        job = replace(job, attrs=(*node.attrs, out_key))
        present = self.fresh("present", "boolean")
        columns = (*_columns(job.output), ir.Named(ir.Constant(True, present), present))
        return ir.Project(job, columns=columns), (RefSlot(tid, (out_key,), present),)

    def _window_ref(
        self,
        tid: int,
        partition: tuple[ir.Expr, ...],
        columns: list[ir.Named],
        bounds: tuple[ir.Attr, ir.Attr] | None,
    ) -> RefSlot:
        keys = tuple(self.fresh("key", p.dtype) for p in partition)
        present = self.fresh("present", "boolean")
        columns += [ir.Named(p, k) for p, k in zip(partition, keys, strict=True)]
        columns.append(ir.Named(ir.Constant(True, present), present))
        if bounds is None:
            return RefSlot(tid, keys, present)
        return RefSlot(tid, keys, present, *bounds)


@dataclass(frozen=True)
class _Witness:
    """A semi join's one witness per row, named by the row's own `probe` value."""

    slot: RidSlot
    probe: ir.Attr  # the left column the join equates with the witness's unique column

    def marked(self, semi: ir.Join) -> ir.Node:
        columns = _columns(semi.output)
        return ir.Project(semi, columns=(*columns, ir.Named(ir.ColumnRef(self.probe), self.slot.attr)))


def join_key_columns(plan: ir.Node) -> set[tuple[ir.Scan, str]]:
    """(scan, column) of every join column in `plan` that could name the scan's rows, if
    the column is unique in its source."""
    found: set[tuple[ir.Scan, str]] = set()
    for join in walk(plan):
        if isinstance(join, ir.Join):
            candidates = [c for left in _readable_sides(join) for c in keyed_scans(join, left)] + witness_scans(join)
            found.update((scan, column) for scan, column, _ in candidates)
    return found


def witness_scans(join: ir.Join) -> list[tuple[ir.Scan, str, ir.Attr]]:
    """(scan, its column, the left attribute equated with it) for a semi join whose right
    side is one Parquet scan under filters and projections, on a column it reads as is.
    Only plain equalities: a null-safe one or another condition could match other rows."""
    if join.kind != "semi" or join.theta or not all(_plain_scan_step(n) for n in walk(join.right)):
        return []
    left = {a.id: a for a in join.left.output}
    found = []
    for lid, rid in sorted(join.equi):
        hit = _reading_scan(join.right, rid)
        if hit is not None:
            found.append((*hit, left[lid]))
    return found


def _plain_scan_step(node: ir.Node) -> bool:
    return isinstance(node, ir.Filter | ir.Project | ir.Scan) and not any(e.subqueries for e in node.expressions())


def _readable_sides(join: ir.Join) -> tuple[bool, ...]:
    """The sides (left: True) whose columns the join's output holds."""
    return (True, False) if join.kind in _BOTH_SIDES else (True,)


def keyed_scans(join: ir.Join, left: bool) -> list[tuple[ir.Scan, str, ir.Attr]]:
    """(scan, its column, the join side's attribute) for each column the join equates that
    its side reads straight from a Parquet scan, through filters, column projections and
    joins that keep the column: each joined row holds that scan row's value of it (null
    where an outer join padded the scan's side)."""
    side = join.left if left else join.right
    by_id = {a.id: a for a in side.output}
    found: list[tuple[ir.Scan, str, ir.Attr]] = []
    for top in sorted({a if left else b for a, b in join.equi} & by_id.keys()):
        hit = _reading_scan(side, top)
        if hit is not None:
            found.append((*hit, by_id[top]))
    return found


def _reading_scan(node: ir.Node, attr: int) -> tuple[ir.Scan, str] | None:
    """The Parquet scan and column that `node`'s output attribute `attr` is read from unchanged."""
    while not isinstance(node, ir.Scan):
        if any(e.subqueries for e in node.expressions()):
            return None
        if isinstance(node, ir.Project):
            below = {c.attr.id: ir.column_of(c.expr) for c in node.columns}.get(attr)
            if below is None:
                return None
            attr, node = below, node.child
        elif isinstance(node, ir.Filter):
            node = node.child
        elif isinstance(node, ir.Join) and node.kind != "existence":
            node = node.left if any(a.id == attr for a in node.left.output) else node.right
            if not any(a.id == attr for a in node.output):
                return None
        else:
            return None
    if node.source.kind != "parquet":
        return None
    return next(((node, a.name) for a in node.attrs if a.id == attr), None)


def _listing_scans(plan: ir.Node) -> int:
    """The scans whose rids an aggregate over `plan` would list: not those under a semi or
    anti join's right side, whose rows are witnesses in a table of their own."""
    if isinstance(plan, ir.Scan):
        return 1
    if isinstance(plan, ir.Join) and plan.kind in ("semi", "anti"):
        return _listing_scans(plan.left)
    return sum(_listing_scans(c) for c in plan.children)


def input_rows(plan: ir.Node) -> int:
    """A generous guess at how many rows a plan makes: the rows of every scan in it (exact
    over one source, and a join on a key keeps its larger side's count); a text source not
    counted yet is guessed at one row per eight bytes, an in-memory one not collected yet
    at none (it is on the driver already)."""
    total = 0
    for n in walk(plan):
        if isinstance(n, ir.Scan):
            total += max(n.source.rows, 0) or sum(f.size for f in n.source.files) // 8
    return total


def _one_group(plan: ir.Node) -> bool:
    """Whether `plan` is a global aggregate under projections: exactly one row."""
    while isinstance(plan, ir.Project) and not any(e.subqueries for e in plan.expressions()):
        plan = plan.child
    return isinstance(plan, ir.Aggregate) and not plan.keys


def _limited(plan: ir.Node) -> frozenset[int]:
    """id() of the aggregates whose rows reach the result through a LIMIT or a filter (a
    HAVING), and otherwise one for one: some of their groups are dropped, whose lists
    would be built for nothing."""
    found: set[int] = set()
    todo = [(plan, False)]
    while todo:
        node, limited = todo.pop()
        if isinstance(node, ir.Aggregate) and limited:
            found.add(id(node))
        elif isinstance(node, _ONE_FOR_ONE):
            limited = limited or (isinstance(node, ir.Limit) and node.kind != "Offset") or isinstance(node, ir.Filter)
            todo += [(c, limited) for c in node.children]
    return frozenset(found)


def _keeps_every_row(node: ir.Node) -> bool:
    """Whether `node` passes every input row on to its output (a filter, limit, join, sample
    or UDTF may drop some)."""
    if isinstance(node, ir.Passthrough):
        return node.kind in ("sort", "repartition", "observe", "python udf", "pandas udf", ir.SEQUENCE)
    return isinstance(node, ir.Project | ir.Union)


def _columns(attrs: tuple[ir.Attr, ...]) -> tuple[ir.Named, ...]:
    return tuple(ir.Named(ir.ColumnRef(a), a) for a in attrs)


def _keep(plan: ir.Node, attrs: tuple[ir.Attr, ...]) -> ir.Node:
    if plan.output == attrs:
        return plan
    return ir.Project(plan, columns=_columns(attrs))


def annotate(
    plan: ir.Node,
    workload: Workload | None = None,
    inline_rids: int | None = None,
    keyed: frozenset[tuple[str, str]] = frozenset(),
    local: Callable[[ir.Node], bool] | None = None,
    reported: bool = True,
    at_trace: int | None = None,
) -> Annotated:
    """The capture rewrite of a whole plan. `keyed`: (source key, column) pairs known unique
    and never null in their source, which name a joined row without its rid. `local`:
    whether DuckDB can read a subplan's rows after the job (None: nothing is read so).
    `reported`: whether partition maps may report the rids they read (`_PartitionMap`).
    `at_trace`: scanned rows past which a table read whole is left to traces (None: none is)."""
    rw = _Rewriter(
        workload or Workload(),
        keyed,
        local=local,
        limited=_limited(plan),
        inline_rids=INLINE_RIDS if inline_rids is None else inline_rids,
        reported=reported,
        at_trace=at_trace,
    )
    rw.compact = rw.bounded(plan)
    new, slots = rw.rewrite(plan)
    return Annotated(new, slots, tuple(rw.tables), rw.inline_rids)
