"""The capture rewrite: a pure function from a plan to a plan whose rows carry lineage.

Every row of the rewritten plan carries *slots* next to its own columns:

- a rid slot holds the `ember_rid` of one source row in the row's lineage (null if none,
  e.g. the missing side of an outer join), or its value of a column unique in its source
  that names the row as well (`policy.keyed`);
- a ref slot points at a group of rows of a *side table*: the rows of an aggregate's
  input that form this row's group, a semi join's witnesses, the rows of a scalar
  subquery. It holds the group's key values (matched null-safely against the side
  table's keys) and a `present` flag that is null where the ref does not apply;
- a list slot carries such a group in the row itself, where the group's side table rides
  in the job's result (`policy.aggregate`).

Side tables are themselves plans whose rows carry slots, so lineage stays normalized
(Smoke's rid index, not Perm's repeated tuples): an aggregate's output row holds one
ref, not the list of its input rows. Indexes are composed from slots and side tables
after the job (`store.index`).

`annotate` first refuses what ember cannot trace (`plan.traceable`), then decides where
each aggregate's and side table's lineage goes (`capture.policy`: a pre-pass, pure), then
rewrites the plan (`_Rewriter`): the mechanism, which adds the slots through the IR
where the placements say, and asks the policy only about subplans it has made (whether
a side table computes one again, whether its rows come back through the driver).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from ember.capture.policy import (
    INLINE_RIDS,
    Placements,
    Setting,
    Site,
    bounded,
    computed_again,
    input_rows,
    join_key_columns,
    keyed_scans,
    place,
    witness_scans,
)
from ember.capture.policy.keyed import ByKey
from ember.plan import ir
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
from ember.plan.traceable import check
from ember.plan.workload import Workload

__all__ = ["INLINE_RIDS", "annotate", "input_rows", "join_key_columns", "keyed_scans", "witness_scans"]

Rewritten = tuple[ir.Node, tuple[Slot, ...]]


@dataclass(frozen=True)
class Here:
    """The rewrite's context: the site of the node being rewritten (`policy.base`), at
    which it reads the placements the policy made."""

    site: Site = ()

    def at(self, *steps: int) -> Here:
        """The context of the input (`i`) or the scalar subquery (`~j`) at `steps` below."""
        return replace(self, site=(*self.site, *steps))


@dataclass
class _Rewriter:
    """The rewrite: a visitor (`_<Node class>` methods) over the plan and an immutable
    context. It only accumulates what it makes: fresh attribute ids and side tables."""

    setting: Setting
    placements: Placements
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(FRESH_IDS_FROM))
    tables: list[SideTable] = field(default_factory=list)

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
            len(self.tables), plan, keys, slots, why, order, inline, local,
            bounded(plan, self.setting.inline_rids), whole, self.setting.keyed, aggregated, reported, prefixes,
        )  # fmt: skip
        self.tables.append(t)
        return t.id

    def shared(self, plan: ir.Node) -> ir.Node:
        """A subplan that both the job and a side table read: as it is where the side table
        may compute it again (`policy.cache`), else cached once."""
        if isinstance(plan, ir.Shared) or computed_again(plan, self.setting):
            return plan
        return ir.Shared(plan, key=next(self.ids))

    @staticmethod
    def job_input(original: ir.Node, side: ir.Node) -> ir.Node:
        """What the job reads of a subplan whose slots only a side table reads (`side`, the
        rewritten subplan as the table reads it): the cached plan, which the job fills, or
        else the subplan as it was, since a rid the job would drop still costs Spark a read
        of each Parquet row's position."""
        return side if isinstance(side, ir.Shared) else original

    # --- the rewrite ---------------------------------------------------------
    def rewrite(self, node: ir.Node, here: Here) -> Rewritten:
        """`node` rewritten so its output is its own columns followed by its slots."""
        method: Callable[[ir.Node, Here], Rewritten] = getattr(self, f"_{type(node).__name__}")
        new, slots = method(node, here)
        new, slots = self._with_subqueries(node, new, slots, here)
        return self._normalized(node.output, new, slots), slots

    def _normalized(self, output: tuple[ir.Attr, ...], new: ir.Node, slots: tuple[Slot, ...]) -> ir.Node:
        want = output + slot_attrs(slots)
        if new.output == want:
            return new
        return ir.Project(new, columns=_columns(want))

    def _with_subqueries(self, node: ir.Node, new: ir.Node, slots: tuple[Slot, ...], here: Here) -> Rewritten:
        """Rows of a node that evaluates a scalar subquery get that subquery's whole lineage."""
        subqueries = [s for e in node.expressions() for s in e.subqueries]
        if not subqueries:
            return new, slots
        extra: list[Slot] = []
        for j, sub in enumerate(subqueries):
            plan, sub_slots = self.rewrite(sub, here.at(~j))
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

    def _Scan(self, node: ir.Scan, here: Here) -> Rewritten:
        workload = self.setting.workload
        if node.source.kind == "none" or not workload.keeps(node.source.name) or id(node) in self.placements.unnamed:
            return node, ()
        only = workload.where.get(node.source.name)
        rid = self.fresh("rid", "bigint", nullable=only is not None)
        return ir.Numbered(node, rid=rid, only=only), (RidSlot(node.source.key, rid),)

    def _unary(self, node: ir.Unary, here: Here) -> Rewritten:
        child, slots = self.rewrite(node.child, here.at(0))
        return replace(node, child=child), slots

    _Filter = _unary
    _Limit = _unary
    _Passthrough = _unary

    def _Project(self, node: ir.Project, here: Here) -> Rewritten:
        child, slots = self.rewrite(node.child, here.at(0))
        keep = _columns(slot_attrs(slots))
        return replace(node, child=child, columns=node.columns + keep), slots

    def _Generate(self, node: ir.Generate, here: Here) -> Rewritten:
        child, slots = self.rewrite(node.child, here.at(0))
        return replace(node, child=child, kept=node.kept + slot_attrs(slots)), slots

    def _Expand(self, node: ir.Expand, here: Here) -> Rewritten:
        child, slots = self.rewrite(node.child, here.at(0))
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

    def _Join(self, node: ir.Join, here: Here) -> Rewritten:
        """The scans the policy names by key under this join get no rid; the join's output
        carries their key column as a key slot instead (`policy.keyed`)."""
        found = [self._key_slot(k) for k in self.placements.keyed.get(here.site, ())]
        new, slots = self._joined(node, here)
        if not found:
            return new, slots
        columns = _columns(new.output) + tuple(c for _, c in found)
        return ir.Project(new, columns=columns), (*slots, *(s for s, _ in found))

    def _key_slot(self, named: ByKey) -> tuple[RidSlot, ir.Named]:
        slot = RidSlot(named.scan.source.key, self.fresh("keyed", named.attr.dtype), key_column=named.column)
        return slot, ir.Named(ir.ColumnRef(named.attr), slot.attr)

    def _joined(self, node: ir.Join, here: Here) -> Rewritten:
        left, lslots = self.rewrite(node.left, here.at(0))
        if node.kind == "anti":
            return replace(node, left=left), lslots
        named = self.placements.witnesses.get(here.site)
        if named is not None:  # one witness per row, named by the row's own probe value
            slot, column = self._key_slot(named)
            semi = replace(node, left=left)
            return ir.Project(semi, columns=(*_columns(semi.output), column)), (*lslots, slot)
        right, rslots = self.rewrite(node.right, here.at(1))
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

    def _Aggregate(self, node: ir.Aggregate, here: Here) -> Rewritten:
        """Its groups go where the policy placed them: a list in its output rows, or a side
        table (DuckDB's reads its own input; Spark's reads what the job reads)."""
        if node.domain:  # its rows carry no lineage: nothing below it is captured
            return node, ()
        placed = self.placements.aggregates[here.site]
        inline, after = placed.listed, placed.read_after
        # A rollup whose groups are a side table is indexed from its expand's input (`capture.rollup`).
        shape = self.placements.rollup(node, placed)
        if shape is None:
            child, slots = self.rewrite(node.child, here.at(0))
        else:
            child, slots = self.rewrite(shape.expand.child, here.at(0, 0))
        if not slots:
            return replace(node, child=child if shape is None else node.child), ()
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
        tid = self.table(
            side, side_keys, slots, GROUPS, local=after, whole=placed.whole, aggregated=job_child, prefixes=prefixes
        )
        out_keys = tuple(self.fresh("key", ir.dtype_of(k)) for k in node.keys)
        present = self.fresh("present", "boolean")
        columns = (
            node.columns
            + tuple(ir.Named(k, a) for k, a in zip(node.keys, out_keys, strict=True))
            + (ir.Named(ir.Constant(True, present), present),)
        )
        job = replace(node, child=job_child, columns=columns)
        return job, (RefSlot(tid, out_keys, present),)

    def _Union(self, node: ir.Union, here: Here) -> Rewritten:
        rewritten = [self.rewrite(c, here.at(i)) for i, c in enumerate(node.inputs)]
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

    def _Window(self, node: ir.Window, here: Here) -> Rewritten:
        """A window's partitions are a side table Spark computes, keyed by the partition's
        values; a frame narrower than the partition is a range of positions in it."""
        child, slots = self.rewrite(node.child, here.at(0))
        if not slots:
            return replace(node, child=child), ()
        frames = list(dict.fromkeys(node.frames))
        partial = [f for f in frames if not f.partition_wide]
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

    def _GroupMap(self, node: ir.GroupMap, here: Here) -> Rewritten:
        """A group's rows (each input's, cogrouped) are a side table keyed by the group's keys,
        as an aggregate's are; the function is wrapped to return its group's keys with each
        row it makes (the appended `attrs`), since nothing else in its output tells the group.
        The policy places each input's groups (`policy.grouped`)."""
        local = [p.read_after for p in self.placements.grouped[here.site]]
        rewritten = [self.rewrite(c, here.at(i)) for i, c in enumerate(node.inputs)]
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

    def _PartitionMap(self, node: ir.PartitionMap, here: Here) -> Rewritten:
        """A partition's rows are a side table keyed by a number naming the partition, which
        the wrapped function appends to the rows it returns. Where the policy lets it report
        (`policy.grouped`) and the input's slots are plain rids, the function gets them as
        more columns (last) and reports those of the rows it read itself, keyed by a number
        it draws (`reported`: no second job). Else the input is cached and the job hands the
        function its partition's number as one more column; the side table lists the cached
        partitions by the same number (a second run could cut partitions otherwise)."""
        (original,) = node.inputs
        child, slots = self.rewrite(original, here.at(0))
        if not slots:
            return replace(node, inputs=(child,)), ()
        reported = here.site in self.placements.reports and all(
            isinstance(s, RidSlot) and s.key_column is None for s in slots
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


def _one_group(plan: ir.Node) -> bool:
    """Whether `plan` is a global aggregate under projections: exactly one row."""
    while isinstance(plan, ir.Project) and not any(e.subqueries for e in plan.expressions()):
        plan = plan.child
    return isinstance(plan, ir.Aggregate) and not plan.keys


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
    `at_trace`: scanned rows past which a table read whole is left to traces (None: none is).
    Raises `UnsupportedOperatorError` for a plan ember cannot trace (`plan.traceable`)."""
    workload = workload or Workload()
    check(plan, workload)
    setting = Setting(workload, INLINE_RIDS if inline_rids is None else inline_rids, at_trace, local, keyed, reported)
    rw = _Rewriter(setting, place(plan, setting))
    new, slots = rw.rewrite(plan, Here())
    return Annotated(new, slots, tuple(rw.tables), setting.inline_rids)
