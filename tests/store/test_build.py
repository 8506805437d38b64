"""Building an index (`store.build`): a sorted side table's groups, refs resolved to their
group's rows (a rollup's too), and the check that rows come sorted, against plain Python."""

from __future__ import annotations

import itertools
from typing import cast

import duckdb
import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from ember.plan.ir import Attr
from ember.plan.slots import RefSlot, SideTable
from ember.store.build import Sets, _groups, _in_order, _in_sets, _resolve, _run_starts


@settings(deadline=None)  # its first example opens DuckDB (0.3 s on a busy machine)
@given(
    st.lists(st.tuples(st.none() | st.integers(-3, 3), st.none() | st.sampled_from(["a", "b", "é"])), max_size=30),
    st.booleans(),
)
def test_groups_of_a_sorted_table_are_its_runs_of_equal_keys(rows: list[tuple[int | None, str | None]], floating: bool) -> None:
    """Each distinct key (nulls equal) → [first row, last row + 1), the ranges refs resolve to;
    floating keys take DuckDB's path."""
    rows.sort(key=lambda r: tuple((v is not None, v) for v in r))  # NULLS FIRST, as side tables arrive
    table = pa.table({"k": pa.array([r[0] for r in rows], pa.float64() if floating else pa.int64()),
                      "s": pa.array([r[1] for r in rows], pa.string())})  # fmt: skip
    con = duckdb.connect()
    found = _groups(con, table, ["k", "s"]).to_pylist()
    expected: dict[tuple[object, ...], list[int]] = {}
    for i, r in enumerate(rows):
        key = (None if r[0] is None else float(r[0]) if floating else r[0], r[1])
        expected.setdefault(key, [i, i])[1] = i + 1
    assert len(found) == len(expected)
    assert {(g["k"], g["s"]): [g["__s"], g["__e"]] for g in found} == expected


_ROLLUP = {0: 3, 1: 2, 3: 1, 7: 0}  # grouping id → leading keys, as ROLLUP(a, b, c) numbers them
_Key = tuple[int | None, str | None, float | None]


def _rollup_key() -> st.SearchStrategy[_Key]:
    return st.tuples(st.none() | st.integers(0, 2), st.none() | st.sampled_from(["a", "é"]),
                     st.none() | st.sampled_from([0.5, float("nan")]))  # fmt: skip


def _same(a: object, b: object) -> bool:
    """Equal as a ref matches: nulls equal, NaNs equal."""
    return a == b or a is b is None or (isinstance(a, float) and isinstance(b, float) and a != a and b != b)


@settings(deadline=None)
@given(st.lists(_rollup_key(), max_size=24),
       st.lists(st.tuples(_rollup_key(), st.sampled_from([0, 1, 3, 7, 5]), st.booleans()), max_size=10),
       st.sampled_from([1, 3]))  # fmt: skip
def test_a_ref_to_a_rollup_group_finds_the_rows_equal_on_its_leading_keys(
    rows: list[_Key], refs: list[tuple[_Key, int, bool]], floating_keys: int
) -> None:
    """`_in_sets` against a scan: each present ref of a known grouping id → the run of rows
    equal on its set's leading keys (nulls and NaNs equal), or no hit where there is none;
    a float key takes DuckDB's runs."""
    keys = 2 + (floating_keys == 3)
    rows = sorted(rows, key=lambda r: tuple((v is not None, v != v, v if v is not None and v == v else 0) for v in r[:keys]))
    table = pa.table({"a": pa.array([r[0] for r in rows], pa.int64()), "b": pa.array([r[1] for r in rows], pa.string()),
                      "c": pa.array([r[2] for r in rows], pa.float64())}).select(list(range(keys)))  # fmt: skip
    prefixes = {gid: min(n, keys) for gid, n in _ROLLUP.items() if gid != 0 or keys == 3}
    con = duckdb.connect()
    sets = Sets(table, _run_starts(con, table, table.column_names, set(prefixes.values()) - {0}), prefixes)
    probe = pa.table({"a": pa.array([k[0] for k, _, _ in refs], pa.int64()), "b": pa.array([k[1] for k, _, _ in refs], pa.string()),
                      "c": pa.array([k[2] for k, _, _ in refs], pa.float64())}).select(list(range(keys)))  # fmt: skip
    probe = probe.append_column("g", pa.array([g for _, g, _ in refs], pa.int32()))
    present = np.array([p for _, _, p in refs], dtype=bool)
    rn, start, end = _in_sets(con, probe, present, sets, len(rows))
    expected = {}
    for i, (key, gid, there) in enumerate(refs):
        if not there or gid not in prefixes:
            continue
        at = [j for j, r in enumerate(rows) if all(_same(key[c], r[c]) for c in range(prefixes[gid]))]
        if prefixes[gid] == 0:  # the grand total: every row, none if there are none
            expected[i] = (0, len(rows))
        elif at:
            assert at == list(range(at[0], at[-1] + 1))  # the oracle's own check: equal rows are contiguous
            expected[i] = (at[0], at[-1] + 1)
    assert dict(zip(rn.tolist(), zip(start.tolist(), end.tolist(), strict=True), strict=True)) == expected


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.none() | st.integers(-2, 2), st.none() | st.sampled_from(["a", "b", "é"]), st.integers(0, 3)),
             max_size=12),
    st.booleans(),
)  # fmt: skip
def test_rows_are_in_order_exactly_when_sorting_keeps_them(rows: list[tuple[int | None, str | None, int]], sort: bool) -> None:
    """`_in_order` against Python's sort by the same columns, NULLS FIRST: rows a sort would
    move are never taken as sorted, and sorted rows are (a side table then skips DuckDB's sort)."""
    def key(r: tuple[int | None, str | None, int]) -> tuple[tuple[bool, object], ...]:
        return tuple((v is not None, v if v is not None else 0) for v in r)

    if sort:
        rows = sorted(rows, key=key)
    table = pa.table({"k": pa.array([r[0] for r in rows], pa.int64()), "s": pa.array([r[1] for r in rows], pa.string()),
                      "r": pa.array([r[2] for r in rows], pa.int64())})  # fmt: skip
    expected = all(key(a) <= key(b) for a, b in itertools.pairwise(rows))
    assert _in_order(table, ["k", "s", "r"]) == expected
    assert _in_order(table, ["k"]) == all(key(a)[:1] <= key(b)[:1] for a, b in itertools.pairwise(rows))
    floating = table.set_column(0, "k", table.column("k").cast(pa.float64()))
    assert not _in_order(floating, ["k", "s"]) or len(rows) < 2  # floats are left to DuckDB's sort


@settings(deadline=None)
@given(
    st.lists(st.tuples(st.none() | st.sampled_from(["a", "b", "é"]), st.integers(0, 2), st.booleans()), max_size=20),
    st.lists(st.none() | st.sampled_from(["a", "b", "c"]), unique=True, max_size=4),
    st.sampled_from(["one key", "two keys", "other type"]),
)
def test_refs_resolve_to_the_range_of_the_group_with_equal_keys(
    rows: list[tuple[str | None, int, bool]], keys: list[str | None], shape: str
) -> None:
    """`_resolve` against a dict lookup (nulls equal, absent or not present → empty range),
    on both paths: Arrow's lookup for one key of one type, DuckDB's join otherwise."""
    one = shape != "two keys"
    probe_type = pa.large_string() if shape == "other type" else pa.string()
    arrow = pa.table({
        "k": pa.array([r[0] for r in rows], probe_type),
        "n": pa.array([r[1] for r in rows], pa.int64()),
        "p": pa.array([1 if r[2] else None for r in rows], pa.int8()),
    })  # fmt: skip
    group_keys = [(k, i % 3) for i, k in enumerate(keys)]
    ranges = [(3 * i, 3 * i + 1 + i % 2) for i in range(len(keys))]
    columns = {"g0": pa.array([k for k, _ in group_keys], pa.string())}
    if not one:
        columns["g1"] = pa.array([n for _, n in group_keys], pa.int64())
    groups = pa.table({**columns, "__s": [s for s, _ in ranges], "__e": [e for _, e in ranges]})
    attrs = [Attr(1, "k", "string"), Attr(2, "n", "bigint")][: 1 if one else 2]
    slot = RefSlot(0, tuple(attrs), Attr(3, "p", "tinyint"))
    start, end = _resolve(duckdb.connect(), arrow, slot, groups, cast(SideTable, None), 3 * len(keys) + 2)
    where = {key if not one else key[:1]: r for key, r in zip(group_keys, ranges, strict=True)}
    expected = [where.get((k, n) if not one else (k,), (0, 0)) if present else (0, 0) for k, n, present in rows]
    assert list(zip(start.tolist(), end.tolist(), strict=True)) == expected
