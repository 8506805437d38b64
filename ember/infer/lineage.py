"""Lazy lineage: nothing captured at run time (a few saved intermediates at most); traces push the traced rows' values to the sources."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ember.capture.annotate import annotate
from ember.capture.capture import run_annotated
from ember.engines import duck
from ember.engines.spark.engine import Engine
from ember.errors import EmberError
from ember.fetch.rows import check_unchanged
from ember.infer import block, duck_scan, spark
from ember.infer.exact import choices, off_path, why_rerun
from ember.infer.ids import distinct, union
from ember.infer.match import matches
from ember.infer.pushdown import Binding, Inference, ScanPlan
from ember.infer.refine import Cut, anti_cuts, cuts, refine
from ember.infer.refine import needed as needed_columns
from ember.infer.segments import Segment
from ember.plan import ir
from ember.plan.sources import OID, SAVED, Source
from ember.query.html import render
from ember.query.lineage import choose, chosen_rids
from ember.query.trace import ForwardTrace, Trace, source_by_name
from ember.store.columns import sorted_unique
from ember.store.index import LineageIndex

FORWARD_BY_BACKWARD = 16  # up to this many candidate output rows, a forward trace traces each back in-process


class InferredLineage:
    """Answers the questions `ember.capture` answers, with nothing captured at run time.

    Exact traces are the rows the inferred predicates select at each scan, refined across
    joins, where the plan makes that exact (`rerun_reason` is None: see `infer.exact`);
    else those rows joined in-process, through the intermediates the job saved where the
    plan needs them (`infer.segments`, `infer.block`); else they re-run the job restricted
    to those rows (Spark skips the rest) and trace the re-run (`exact_path` says which).
    Superset traces (`exact=False`) return the selected rows, with no re-run.
    """

    def __init__(
        self,
        engine: Engine,
        plan: ir.Node,
        output: pa.Table,
        sources: dict[str, Source],
        inference: Inference,
        exact: bool,
        iterative: bool,
        segment: Segment | None = None,
        saved: dict[str, Source] | None = None,
        candidates: Inference | None = None,
    ):
        self._engine = engine
        self._plan = plan
        self._user = output
        self._output = output.append_column(OID, pa.array(np.arange(output.num_rows, dtype=np.int64)))
        self._by_key = sources
        self._named = {s.name: s for s in sources.values() if s.kind != "none"}
        self.inference = inference
        # a forward trace's candidate output rows: `inference` with every top limit lifted
        self._candidates_by = candidates or inference
        self.exact = exact
        self.iterative = iterative
        self.mode = "infer" if exact else "infer-superset"
        self.rerun_reason = why_rerun(plan, inference)  # None: exact traces need no re-run
        # output columns whose values the top group chose by chance (`first(x)`): a re-run
        # may choose otherwise, so its rows are matched on the other columns
        self._chosen = choices(plan)[1] if exact else frozenset()
        self._segment = segment  # the plan cut at saved intermediates into exact pieces
        self._saved = saved or {}  # by stand-in key: the saved rows
        self._lookup = {**sources, **self._saved}
        self._scalars: dict[int, dict[str, np.ndarray] | None] = {}  # a scalar subquery's lineage, by piece

    @property
    def exact_path(self) -> str:
        """How an exact trace is answered: "predicates" (the pushed predicates, cut across
        joins), "joined" (those candidates joined in-process), "saved intermediates" (through
        rows the job saved), or "re-run" (the job re-run on the candidates)."""
        if self.rerun_reason is None:
            return "predicates"
        if self._segment is None:
            return "re-run"
        return "saved intermediates" if self._segment.saves else "joined"

    @property
    def saved(self) -> dict[str, pa.Table]:
        """The intermediates the job saved for exact traces, by name (empty for most plans)."""
        unique = {id(s.data): (s.name, s.data) for s in self._saved.values()}  # equal subplans share rows
        return {name: data.drop_columns([spark.RID]) for name, data in unique.values()}

    @property
    def sources(self) -> list[str]:
        return sorted(self._named)

    def output(self) -> pa.Table:
        """The job's output rows with `ember_oid` (their position)."""
        return self._output

    def backward(self, oids: Iterable[int] | None = None, where: str | None = None) -> Trace:
        """Source rows behind the chosen output rows. Output rows with equal values are
        traced together (their lineages are one answer, as in PredTrace)."""
        rows = self._user.take(pa.array(choose(self._output, "output", oids, where, OID), type=pa.int64()))
        self._check_sources()
        self._engine.activate()  # a trace may run Spark jobs: with the job's session settings, on any thread
        if not self.exact:
            return Trace(self._named, self._superset(rows, self.iterative)[0], exact=False)
        found = self._in_process(rows)
        if found is not None:
            return Trace(self._named, found)
        _, index, oids = self._rerun(rows)
        return Trace(self._named, index.backward(oids))

    def forward(self, source: str, ids: Iterable[int] | None = None, where: str | None = None) -> ForwardTrace:
        """Output rows whose lineage holds the chosen rows of `source`."""
        src = source_by_name(self._named, source)
        rids = chosen_rids(src, ids, where)
        self._check_sources()
        self._engine.activate()
        candidates = self._candidates(src, rids)
        if not self.exact or candidates.size == 0:
            return ForwardTrace(self._output, candidates, exact=self.exact)
        if candidates.size <= FORWARD_BY_BACKWARD and self.exact_path != "re-run":
            reached_by = self._reached_by(candidates, src.key, rids)
            if reached_by is not None:
                return ForwardTrace(self._output, reached_by)
        rows = self._user.take(pa.array(candidates))
        out, index, _ = self._rerun(rows)
        reached = index.forward(src.key, rids)
        _, hit = matches(self._stable(out.take(pa.array(reached, type=pa.int64()))), self._stable(rows))
        return ForwardTrace(self._output, sorted_unique([candidates[hit]]))

    def _in_process(self, rows: pa.Table) -> dict[str, np.ndarray] | None:
        """The exact lineage of `rows` by the paths that start no re-run, or None."""
        if self.rerun_reason is None:
            found, settled = self._superset(rows, True)
            return found if settled else None
        return None if self._segment is None else self._through(self._segment, rows)

    def _reached_by(self, candidates: np.ndarray, key: str, rids: np.ndarray) -> np.ndarray | None:
        """The candidate output rows whose own exact lineage holds some of `rids` (each
        traced backward in-process), or None when one would need a re-run."""
        hits = []
        for oid in candidates:
            found = self._in_process(self._user.take(pa.array([oid])))
            if found is None:
                return None
            if np.isin(rids, found.get(key, np.empty(0, np.int64))).any():
                hits.append(oid)
        return np.array(hits, dtype=np.int64)

    def explain(self) -> str:
        """What the inference found: per scan, the output columns that pin its rows."""
        names = [a.name for a in self._plan.output]
        lines = []
        for sp in self.inference.scans:
            pins = ", ".join(f"{_side(b)} = {names[b.column]}" for b in sp.bindings) or "nothing (reads all rows)"
            state = "" if sp.traced else " [no lineage: an anti join's inner side, or a subquery's domain]"
            lines.append(f"{sp.scan.source.name}: {pins}{state}")
        if self.inference.stops:
            lines.append("stopped at: " + "; ".join(self.inference.stops))
        if self.rerun_reason is None:
            how = "the predicates above, cut across joins"
        elif self._segment is not None:
            saved = ", ".join(f"{s.name} ({s.rows} rows: {', '.join(s.data.column_names[:-1])})" for s in self._saved.values())
            how = f"the predicates, cut across joins, over saved intermediates: {saved} (else a re-run: {self.rerun_reason})"
        else:
            how = f"a re-run ({self.rerun_reason})"
        lines.append(f"exact traces: {how}")
        return "\n".join(lines)

    def _check_sources(self) -> None:
        for s in self._by_key.values():
            check_unchanged(s)

    def _rerun(self, rows: pa.Table) -> tuple[pa.Table, LineageIndex, np.ndarray]:
        """The job re-run on only the scan rows the traced rows' values allow, captured, and
        the re-run's output rows equal to the traced rows."""
        nodes = {}
        for sp in self.inference.scans:
            node = spark.restriction(self._engine, self._by_key, sp, rows)
            if node is not None:
                nodes[id(sp.scan)] = node
        plan = spark.restricted(self._plan, nodes)
        names = [a.name for a in plan.output]
        out, index = run_annotated(self._engine, annotate(plan), names, self._by_key, small=True)
        found, seen = matches(self._stable(out), self._stable(rows))
        if sorted_unique([seen]).size != rows.num_rows:
            raise EmberError("ember.infer could not find a traced row again in its restricted re-run (a bug)")
        return out, index, sorted_unique([found])

    def _stable(self, rows: pa.Table) -> pa.Table:
        """Output rows without the columns whose values a run chooses by chance."""
        return rows.select([j for j in range(rows.num_columns) if j not in self._chosen]) if self._chosen else rows

    def _through(self, segment: Segment, rows: pa.Table) -> dict[str, np.ndarray] | None:
        """The exact lineage of `rows` of a piece of the plan: its predicates pick the rows of
        its sources and of its saved intermediates, and the saved rows are traced through
        the pieces below. None when some cut does not settle (the re-run answers then)."""
        picked, settled = self._selected(segment.plan, segment.inference, rows, True, evaluate=segment.evaluated)
        if not settled:
            return None
        found = _by_source(segment.inference, picked)
        for save in segment.saves:
            ids = found.pop(save.scan.source.key, None)
            if ids is None or ids.size == 0:  # None: under an anti join, its rows are no lineage
                continue
            picked = self._saved[save.scan.source.key].data.take(pa.array(ids))
            below = self._through(save.below, _positional(picked, save.node.output))
            if below is None:
                return None
            _merge(found, below)
        for scalar in segment.scalars:
            piece = scalar.piece
            if scalar.reader is not None and not picked.get(id(scalar.reader), np.empty(0)).size:
                continue  # none of the rows its filter tested is in the lineage: none used it
            if id(piece) not in self._scalars:  # one row, whatever the traced row: traced once
                nothing = pa.table({f"c{j}": pa.nulls(1) for j in range(len(piece.plan.output))})
                self._scalars[id(piece)] = self._through(piece, nothing)
            lineage = self._scalars[id(piece)]
            if lineage is None:
                return None
            _merge(found, lineage)
        return found

    def _superset(self, rows: pa.Table, iterative: bool) -> tuple[dict[str, np.ndarray], bool]:
        """Per source, the rows the predicates select (cut across joins when `iterative`), and
        whether the cuts settled; on a plan `infer.exact` accepts, that is the lineage."""
        picked, settled = self._selected(self._plan, self.inference, rows, iterative)
        return _by_source(self.inference, picked), settled

    def _selected(
        self, plan: ir.Node, inference: Inference, rows: pa.Table, iterative: bool, evaluate: bool = False
    ) -> tuple[dict[int, np.ndarray], bool]:
        """`_superset` over a piece of the plan, whose scans may be saved intermediates, per
        traced scan (by `id()`); with `evaluate`, the cut candidates are then joined
        in-process (`infer.block`)."""
        traced = [sp for sp in inference.scans if sp.traced]
        cut_list = cuts(plan) if iterative else []
        needed = needed_columns(cut_list)
        if evaluate:
            for scan, cols in block.columns(plan).items():
                needed.setdefault(scan, set()).update(cols)
        frames: dict[int, pa.Table] = {}
        drop_nulls = self.rerun_reason is None and not evaluate  # `=` never pairs nulls; elsewhere the join decides
        read_scans, read_cuts = traced, cut_list
        if evaluate:  # a left or anti join's right side keeps every partner (`infer.block`)
            off = off_path(plan)
            read_scans = [replace(sp, bindings=()) if id(sp.scan) in off else sp for sp in inference.scans]
            read_cuts = cut_list + anti_cuts(plan)
        bound = {id(sp.scan): spark.bound_values(sp.bindings, rows) for sp in read_scans}
        def first(sp: ScanPlan) -> tuple[bool, bool, int]:
            return bound[id(sp.scan)] is None, not sp.filters, self._lookup.get(sp.scan.source.key, sp.scan.source).rows

        # scans the traced values restrict are read first, then filtered ones, small before
        # large; each then reads only rows whose join keys are among those already read (the
        # cuts `refine` makes, applied while reading)
        for sp in sorted(read_scans, key=first):
            attrs = sorted(needed.get(id(sp.scan), ()), key=_attr_id)
            tuples = bound[id(sp.scan)]
            if tuples is None and not sp.filters and id(sp.scan) not in needed and not evaluate:
                continue  # every row of the scan
            source = self._lookup.get(sp.scan.source.key, sp.scan.source)
            keys = [
                (c.column, _values(frames, c)) for c in read_cuts if c.target == id(sp.scan) and all(b in frames for b, _ in c.by)
            ]
            read = duck_scan.candidates(source, sp, tuples, attrs, keys, keep_nulls=not drop_nulls)
            if read is None and source.kind == SAVED:
                return {}, False  # saved rows are read in-process only: the trace re-runs
            if read is None:
                scanned = spark.scan_rows(self._engine, self._by_key, sp, numbered=True, filters=True)
                read = scanned.candidates(scanned.selection(sp.bindings, rows), attrs)
            frames[id(sp.scan)] = read
        usable = [c for c in cut_list if all(s in frames for s in (c.target, *(b for b, _ in c.by)))]
        frames, settled = refine(usable, frames, drop_nulls=drop_nulls)
        settled = settled and len(usable) == len(cut_list)
        pinned = {b.column for sp in inference.scans for b in sp.bindings if not b.padded}
        joined = block.evaluate(plan, frames, rows, pinned) if evaluate else None
        if evaluate:
            settled = joined is not None
        found: dict[int, np.ndarray] = {}
        for sp in traced:
            table = frames.get(id(sp.scan))
            if joined is not None:
                found[id(sp.scan)] = joined.get(id(sp.scan), np.empty(0, np.int64))
            elif table is None:
                found[id(sp.scan)] = np.arange(self._lookup[sp.scan.source.key].rows, dtype=np.int64)
            else:
                found[id(sp.scan)] = distinct(table.column(spark.RID).to_numpy())
        return found, settled

    def _candidates(self, src: Source, rids: np.ndarray) -> np.ndarray:
        """Output rows whose inferred predicates the chosen source rows satisfy (a superset)."""
        hits: list[np.ndarray] = []
        for sp in self._candidates_by.of_source(src.key):
            if not sp.traced or rids.size == 0:
                continue
            scanned = spark.scan_rows(self._engine, self._by_key, sp, numbered=True, filters=True)
            table = scanned.candidates(scanned.df[spark.RID].isin(rids.tolist()), sp.scan.output)
            hits.append(_pinned(self._user, sp, table))
        return sorted_unique(hits)

    def _repr_html_(self) -> str:
        counts = [(n, s.rows) for n, s in sorted(self._named.items())]
        return render(f"ember inferred lineage ({self.mode})", counts, [("output", self._output)])

    def __repr__(self) -> str:
        kind = "exact" if self.exact else "superset"
        return f"<ember inferred lineage ({kind}): {self._user.num_rows} output rows from {', '.join(self.sources)}>"


def _by_source(inference: Inference, picked: dict[int, np.ndarray]) -> dict[str, np.ndarray]:
    """Per-scan rids as rids per source (a source read twice is one source)."""
    found: dict[str, np.ndarray] = {}
    for sp in inference.scans:
        if id(sp.scan) in picked:
            _merge(found, {sp.scan.source.key: picked[id(sp.scan)]})
    return found


def _merge(found: dict[str, np.ndarray], more: dict[str, np.ndarray]) -> None:
    for key, ids in more.items():
        found[key] = union(found.get(key, np.empty(0, np.int64)), ids)


def _values(frames: dict[int, pa.Table], cut: Cut) -> pa.ChunkedArray:
    """The key values a cut allows, from the candidates already read."""
    columns = [frames[scan].column(f"a{col.id}") for scan, col in cut.by]
    kind = columns[0].type  # scans read by Spark and by DuckDB may type a key differently
    return pa.chunked_array([pc.cast(chunk, kind) for c in columns for chunk in c.chunks], type=kind)


def _positional(saved: pa.Table, output: tuple[ir.Attr, ...]) -> pa.Table:
    """Saved rows laid out as their subplan's output (columns not saved are never read: null)."""
    names = set(saved.column_names)
    columns = [saved.column(a.name) if a.name in names else pa.nulls(saved.num_rows) for a in output]
    return pa.table(columns, names=[f"c{j}" for j in range(len(output))])


def _side(b: Binding) -> str:
    return b.attr.name if b.attr is not None else (b.expr.sql if b.expr is not None else "?")


def _attr_id(a: ir.Attr) -> int:
    return a.id


def _pinned(output: pa.Table, sp: ScanPlan, rows: pa.Table) -> np.ndarray:
    """Output rows whose bound columns equal some row's scan columns."""
    if rows.num_rows == 0:
        return np.empty(0, np.int64)
    plain = [b for b in sp.bindings if b.attr is not None]  # computed columns are not re-evaluated here
    if not plain:
        return np.arange(output.num_rows, dtype=np.int64)
    out = output.rename_columns([f"c{j}" for j in range(output.num_columns)])
    out = out.append_column("_oid", pa.array(np.arange(output.num_rows, dtype=np.int64)))
    conds = []
    for b in plain:
        assert b.attr is not None
        same = f"o.c{b.column} IS NOT DISTINCT FROM r.a{b.attr.id}"
        conds.append(f"(o.c{b.column} IS NULL OR {same})" if b.padded else same)
    con = duck.connect()
    try:
        con.register("o", out)
        con.register("r", rows)
        res = con.sql(f"SELECT DISTINCT o._oid FROM o JOIN r ON {' AND '.join(conds)}").fetchnumpy()
    finally:
        con.close()
    return np.sort(res["_oid"].astype(np.int64))
