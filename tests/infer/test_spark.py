"""The Spark edge of inference (`ember.infer.spark`) on a classic session and over Spark
Connect alike: a traced row's values are compared on Spark to a computed column
re-evaluated at its scan (`k + 1`, `upper(s)`: never inverted), read directly or
through a re-run that reads only the rows they allow. The table is in memory, so no scan
is read by DuckDB; the oracle is the pure-Python one."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession

import ember
from tests.oracle import rows as o

pytestmark = pytest.mark.jvm  # a classic session's and a Connect server's, by parameter

T = [(1, "a", 5), (1, "b", 7), (2, "A", 1), (3, "c", 9), (3, "a", 4), (None, "b", 2)]  # (k, s, v)


@pytest.fixture(params=["classic", "connect"])
def session(request: pytest.FixtureRequest) -> SparkSession:
    spark: SparkSession = request.getfixturevalue("spark" if request.param == "classic" else "remote")
    spark.createDataFrame(T, "k int, s string, v int").createOrReplaceTempView("infer_t")
    return spark


def _ranked_sums() -> list[o.Row]:
    """A rank per `k` partition (its lineage: the whole partition), summed per `k + 1`."""
    ranked = o.window(o.scan("infer_t", T), lambda v: (v[0],), lambda v: v[2], lambda i, n: (0, n), lambda _, i: i + 1)
    plus = o.select(ranked, lambda v: (None if v[0] is None else v[0] + 1, v[3]))
    return o.group(plus, lambda v: (v[0],), lambda vs: (sum(v[1] for v in vs),))


def _upper_counts() -> list[o.Row]:
    kept = o.select(o.where(o.scan("infer_t", T), lambda v: v[2] > 1), lambda v: (v[1].upper(),))
    return o.group(kept, lambda v: (v[0],), lambda vs: (len(vs),))


CASES: dict[str, tuple[str, str, str, Callable[[], list[o.Row]]]] = {
    "rerun": ("SELECT k + 1 AS k1, sum(r) AS n FROM (SELECT k, rank() OVER (PARTITION BY k ORDER BY v) AS r "
              "FROM infer_t) GROUP BY k + 1", "re-run", "(k#", _ranked_sums),
    "predicates": ("SELECT upper(s) AS us, count(*) AS n FROM infer_t WHERE v > 1 GROUP BY upper(s)",
                   "predicates", "upper(s#", _upper_counts),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_computed_column_pins_its_scan(session: SparkSession, case: str) -> None:
    """Every output row traced backward, exact (equal) and superset (containing), and one
    lineage row forward."""
    sql, path, pin, oracle = CASES[case]
    want = {v: lineage for v, lineage in oracle()}
    for exact in (True, False):
        lin = ember.infer(session.sql(sql), exact=exact)
        assert lin.exact_path == path
        assert pin in lin.explain().splitlines()[0]  # the computed column is what pins the scan
        outputs = o.value_rows(lin.output().drop_columns(["ember_oid"]))
        assert sorted(outputs, key=repr) == sorted(want, key=repr)
        for oid, values in enumerate(outputs):
            got = {("infer_t", int(r)) for r in lin.backward(oids=[oid]).ids("infer_t")}
            assert got == want[values] if exact else got >= want[values], (values, sorted(got))
        if exact:
            rid = min(r for _, r in want[outputs[0]])
            reached = [oid for oid, v in enumerate(outputs) if ("infer_t", rid) in want[v]]
            assert lin.forward("infer_t", ids=[rid]).ids().tolist() == reached
