"""Comparing ember's answers with an oracle's: row matching, value checks, lineage lookups.

An oracle here is a pyarrow Table with one row per output row of a query, the query's
output columns (at least its key columns) and one list<int64> column `lin_<source>` per
source: the rids of that source in the row's lineage. Nothing here uses ember's code;
the functions take ember's *answers* (pyarrow tables, numpy arrays) as plain data.
"""

from __future__ import annotations

import datetime as dt
import math
import random
from collections import Counter, defaultdict
from collections.abc import Hashable, Iterable, Sequence
from decimal import Decimal

import numpy as np
import pyarrow as pa

OID = "ember_oid"
LIN = "lin_"


def _norm(value: object) -> Hashable:
    """A value as a hashable, comparable key part (Decimal scale and int width ignored)."""
    if isinstance(value, Decimal):
        return value.normalize() if value.is_finite() else value
    if isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)
    return value  # type: ignore[return-value]  # ints, floats and Decimals compare by value


def key_tuples(table: pa.Table, keys: Sequence[str]) -> list[tuple]:
    """The key values of every row, normalized (an empty tuple per row when no keys)."""
    if not keys:
        return [()] * table.num_rows
    columns = [table.column(k).to_pylist() for k in keys]
    return [tuple(_norm(v) for v in row) for row in zip(*columns, strict=True)]


def match_rows(ember_out: pa.Table, oracle: pa.Table, keys: Sequence[str]) -> dict[int, int]:
    """ember_oid → index of the oracle row with the same key values.

    Fails when the oracle's keys are not unique, when two ember rows share a key, or when
    an ember row has no oracle row. A query without keys (a global aggregate) has one row
    on each side.
    """
    oracle_keys = key_tuples(oracle, keys)
    index: dict[tuple, int] = {}
    for i, k in enumerate(oracle_keys):
        assert k not in index, f"oracle rows are not unique on {list(keys)}: {k}"
        index[k] = i
    oids = ember_out.column(OID).to_pylist()
    mapping: dict[int, int] = {}
    for oid, k in zip(oids, key_tuples(ember_out, keys), strict=True):
        assert k in index, f"ember output row {oid} ({dict(zip(keys, k, strict=True))}) is not in the oracle"
        assert index[k] not in mapping.values(), f"two ember rows have the key {k}"
        mapping[int(oid)] = index[k]
    return mapping


def assert_same_key_multiset(got: pa.Table, want: pa.Table, keys: Sequence[str]) -> None:
    """Both tables hold the same rows as multisets of their key columns."""
    a, b = Counter(key_tuples(got, keys)), Counter(key_tuples(want, keys))
    assert a == b, f"rows differ on {list(keys)}: only in first {list((a - b).items())[:5]}, only in second {list((b - a).items())[:5]}"


def close(a: object, b: object, rel: float = 1e-6, abs_tol: float = 1e-5) -> bool:
    """Equal values; numbers approximately (Spark's and DuckDB's decimal scales differ)."""
    if a is None or b is None:
        return a is None and b is None
    numeric = (int, float, Decimal)
    if isinstance(a, numeric) and isinstance(b, numeric) and not isinstance(a, bool):
        return math.isclose(float(a), float(b), rel_tol=rel, abs_tol=abs_tol)
    return _norm(a) == _norm(b)


def assert_values_close(
    left: pa.Table, right: pa.Table, pairs: Iterable[tuple[int, int]], columns: Sequence[str]
) -> None:
    """For each (left row, right row) pair, the named columns hold close values."""
    lcols = {c: left.column(c).to_pylist() for c in columns}
    rcols = {c: right.column(c).to_pylist() for c in columns}
    for i, j in pairs:
        for c in columns:
            a, b = lcols[c][i], rcols[c][j]
            assert close(a, b), f"column {c!r}: {a!r} != {b!r} (rows {i} / {j})"


def assert_same_rows(got: pa.Table, want: pa.Table, keys: Sequence[str]) -> None:
    """Same column names, same multiset of keys, and close values in every other column."""
    assert got.column_names == want.column_names, f"{got.column_names} != {want.column_names}"
    assert got.num_rows == want.num_rows, f"{got.num_rows} rows != {want.num_rows}"
    assert_same_key_multiset(got, want, keys)
    gk, wk = key_tuples(got, keys), key_tuples(want, keys)
    if len(set(wk)) != len(wk):  # keys do not identify rows: compare whole sorted rows
        g = sorted(map(repr, map(_row_key, got.to_pylist())))
        w = sorted(map(repr, map(_row_key, want.to_pylist())))
        assert g == w
        return
    where = {k: i for i, k in enumerate(wk)}
    assert_values_close(got, want, [(i, where[k]) for i, k in enumerate(gk)], got.column_names)


def _row_key(row: dict) -> tuple:
    return tuple(_norm(round(float(v), 4)) if isinstance(v, float | Decimal) else _norm(v) for v in row.values())


def lineage_lists(oracle: pa.Table, source: str) -> list[list[int]]:
    """Per oracle row, the rids of `source` in its lineage ([] when the oracle has no column)."""
    name = LIN + source
    if name not in oracle.column_names:
        return [[] for _ in range(oracle.num_rows)]
    return [list(v or ()) for v in oracle.column(name).to_pylist()]


def expected_backward(oracle: pa.Table, rows: Iterable[int], source: str) -> np.ndarray:
    """Sorted unique rids of `source` in the lineage of the given oracle rows."""
    lists = lineage_lists(oracle, source)
    rids = {r for i in rows for r in lists[i]}
    return np.array(sorted(rids), dtype=np.int64)


def forward_index(oracle: pa.Table, mapping: dict[int, int], source: str) -> dict[int, list[int]]:
    """rid → sorted ember_oids whose (matched) oracle row has the rid in its lineage.

    Only output rows ember returned count (`mapping` holds exactly those).
    """
    lists = lineage_lists(oracle, source)
    out: dict[int, list[int]] = defaultdict(list)
    for oid in sorted(mapping):
        for rid in lists[mapping[oid]]:
            out[rid].append(oid)
    return dict(out)


def expected_forward(index: dict[int, list[int]], rid: int) -> np.ndarray:
    return np.array(index.get(rid, []), dtype=np.int64)


def sample_forward_rids(
    oracle: pa.Table,
    mapping: dict[int, int],
    source: str,
    size: int,
    rng: random.Random,
    in_lineage: int = 15,
    outside: int = 5,
) -> list[int]:
    """Source rids to trace forward: some in the returned rows' lineage, some in the
    lineage of rows a LIMIT dropped, some in no lineage at all (within [0, size))."""
    lists = lineage_lists(oracle, source)
    kept = set(mapping.values())
    returned = {r for i in kept for r in lists[i]}
    dropped = {r for i, rids in enumerate(lists) if i not in kept for r in rids} - returned
    everything = returned | dropped
    picked = rng.sample(sorted(returned), min(in_lineage, len(returned)))
    picked += rng.sample(sorted(dropped), min(outside, len(dropped)))
    others: set[int] = set()
    tries = 0
    while len(others) < outside and tries < 50 * outside and len(everything) < size:
        tries += 1
        r = rng.randrange(size)
        if r not in everything:
            others.add(r)
    return picked + sorted(others)


def sample_oids(oids: Sequence[int], limit: int, rng: random.Random) -> list[int]:
    """All oids, or `limit` of them drawn with `rng` when there are more."""
    return sorted(rng.sample(list(oids), limit)) if len(oids) > limit else list(oids)
