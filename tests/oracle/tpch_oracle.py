"""An independent lineage oracle for the 22 TPC-H queries: hand-written DuckDB SQL.

For each query, per source table, one SQL statement returns `(k1, ..., kn, rid)` rows:
the output row's identifying values and one rid of that table in its lineage. The rid
is DuckDB's `file_row_number` (each table is one Parquet file, so it equals
`ember_rid`). Queries are written without their LIMIT, so ties at a LIMIT boundary do
not matter: only output rows ember returned are compared. Lineage semantics follow
DESIGN.md section 2 (which-provenance; semi joins add witnesses and their lineage; anti
joins add nothing; a scalar subquery adds its full lineage to every row that used it).
Nothing here uses ember's code.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import duckdb

from ember.tpch import TABLES

Lineage = dict[tuple, dict[str, set[int]]]

# Identifying output columns per query (ember's output is matched on them).
KEYS: dict[int, tuple[str, ...]] = {
    1: ("l_returnflag", "l_linestatus"),
    2: ("p_partkey", "s_name"),
    3: ("l_orderkey",),
    4: ("o_orderpriority",),
    5: ("n_name",),
    6: (),
    7: ("supp_nation", "cust_nation", "l_year"),
    8: ("o_year",),
    9: ("nation", "o_year"),
    10: ("c_custkey",),
    11: ("ps_partkey",),
    12: ("l_shipmode",),
    13: ("c_count",),
    14: (),
    15: ("s_suppkey",),
    16: ("p_brand", "p_type", "p_size"),
    17: (),
    18: ("o_orderkey",),
    19: (),
    20: ("s_name",),
    21: ("s_name",),
    22: ("cntrycode",),
}

_Q2_JOIN = """
  FROM part p, supplier s, partsupp ps, nation n, region r
  WHERE p.p_partkey = ps.ps_partkey AND s.s_suppkey = ps.ps_suppkey AND p.p_size = 15
    AND p.p_type LIKE '%BRASS' AND s.s_nationkey = n.n_nationkey AND n.n_regionkey = r.r_regionkey
    AND r.r_name = 'EUROPE'
    AND ps.ps_supplycost = (SELECT min(ps2.ps_supplycost) FROM partsupp ps2, supplier s2, nation n2, region r2
        WHERE p.p_partkey = ps2.ps_partkey AND s2.s_suppkey = ps2.ps_suppkey AND s2.s_nationkey = n2.n_nationkey
          AND n2.n_regionkey = r2.r_regionkey AND r2.r_name = 'EUROPE')"""
_Q2_MIN = f"""
  FROM partsupp ps2, supplier s2, nation n2, region r2,
       (SELECT p.p_partkey AS k1, s.s_name AS k2 {_Q2_JOIN}) o
  WHERE o.k1 = ps2.ps_partkey AND s2.s_suppkey = ps2.ps_suppkey AND s2.s_nationkey = n2.n_nationkey
    AND n2.n_regionkey = r2.r_regionkey AND r2.r_name = 'EUROPE'"""

_Q5_JOIN = """
  FROM customer c, orders o, lineitem l, supplier s, nation n, region r
  WHERE c.c_custkey = o.o_custkey AND l.l_orderkey = o.o_orderkey AND l.l_suppkey = s.s_suppkey
    AND c.c_nationkey = s.s_nationkey AND s.s_nationkey = n.n_nationkey AND n.n_regionkey = r.r_regionkey
    AND r.r_name = 'ASIA' AND o.o_orderdate >= DATE '1994-01-01' AND o.o_orderdate < DATE '1995-01-01'"""

_Q7_JOIN = """
  FROM supplier s, lineitem l, orders o, customer c, nation n1, nation n2
  WHERE s.s_suppkey = l.l_suppkey AND o.o_orderkey = l.l_orderkey AND c.c_custkey = o.o_custkey
    AND s.s_nationkey = n1.n_nationkey AND c.c_nationkey = n2.n_nationkey
    AND ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY') OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE'))
    AND l.l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'"""
_Q7_KEYS = "n1.n_name AS k1, n2.n_name AS k2, year(l.l_shipdate) AS k3"

_Q8_JOIN = """
  FROM part p, supplier s, lineitem l, orders o, customer c, nation n1, nation n2, region r
  WHERE p.p_partkey = l.l_partkey AND s.s_suppkey = l.l_suppkey AND l.l_orderkey = o.o_orderkey
    AND o.o_custkey = c.c_custkey AND c.c_nationkey = n1.n_nationkey AND n1.n_regionkey = r.r_regionkey
    AND r.r_name = 'AMERICA' AND s.s_nationkey = n2.n_nationkey
    AND o.o_orderdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31' AND p.p_type = 'ECONOMY ANODIZED STEEL'"""

_Q9_JOIN = """
  FROM part p, supplier s, lineitem l, partsupp ps, orders o, nation n
  WHERE s.s_suppkey = l.l_suppkey AND ps.ps_suppkey = l.l_suppkey AND ps.ps_partkey = l.l_partkey
    AND p.p_partkey = l.l_partkey AND o.o_orderkey = l.l_orderkey AND s.s_nationkey = n.n_nationkey
    AND p.p_name LIKE '%green%'"""
_Q9_KEYS = "n.n_name AS k1, year(o.o_orderdate) AS k2"

_Q10_JOIN = """
  FROM customer c, orders o, lineitem l, nation n
  WHERE c.c_custkey = o.o_custkey AND l.l_orderkey = o.o_orderkey AND o.o_orderdate >= DATE '1993-10-01'
    AND o.o_orderdate < DATE '1994-01-01' AND l.l_returnflag = 'R' AND c.c_nationkey = n.n_nationkey"""

_Q11_GERMANY = """
  FROM partsupp ps, supplier s, nation n
  WHERE ps.ps_suppkey = s.s_suppkey AND s.s_nationkey = n.n_nationkey AND n.n_name = 'GERMANY'"""
_Q11_OUT = f"""(SELECT ps.ps_partkey AS k1 {_Q11_GERMANY} GROUP BY ps.ps_partkey
   HAVING sum(ps.ps_supplycost * ps.ps_availqty) > (SELECT sum(ps.ps_supplycost * ps.ps_availqty) * 0.0001 {_Q11_GERMANY}))"""

_Q12_JOIN = """
  FROM orders o, lineitem l
  WHERE o.o_orderkey = l.l_orderkey AND l.l_shipmode IN ('MAIL', 'SHIP') AND l.l_commitdate < l.l_receiptdate
    AND l.l_shipdate < l.l_commitdate AND l.l_receiptdate >= DATE '1994-01-01' AND l.l_receiptdate < DATE '1995-01-01'"""

_Q13_COUNTS = """(SELECT c.c_custkey AS ck, c.rid AS crid, count(o.o_orderkey) AS c_count
   FROM customer c LEFT JOIN orders o ON c.c_custkey = o.o_custkey AND o.o_comment NOT LIKE '%special%requests%'
   GROUP BY c.c_custkey, c.rid)"""

_Q15_REV = """(SELECT l_suppkey AS supplier_no, sum(l_extendedprice * (1 - l_discount)) AS total_revenue
   FROM lineitem WHERE l_shipdate >= DATE '1996-01-01' AND l_shipdate < DATE '1996-04-01' GROUP BY l_suppkey)"""
_Q15_OUT = f"""(SELECT s.s_suppkey AS k1 FROM supplier s, {_Q15_REV} rv
   WHERE s.s_suppkey = rv.supplier_no AND rv.total_revenue = (SELECT max(total_revenue) FROM {_Q15_REV}))"""
_Q15_RANGE = "l.l_shipdate >= DATE '1996-01-01' AND l.l_shipdate < DATE '1996-04-01'"

_Q16_JOIN = """
  FROM partsupp ps, part p
  WHERE p.p_partkey = ps.ps_partkey AND p.p_brand <> 'Brand#45' AND p.p_type NOT LIKE 'MEDIUM POLISHED%'
    AND p.p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
    AND ps.ps_suppkey NOT IN (SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%')"""

_Q17_JOIN = """
  FROM lineitem l, part p
  WHERE p.p_partkey = l.l_partkey AND p.p_brand = 'Brand#23' AND p.p_container = 'MED BOX'
    AND l.l_quantity < (SELECT 0.2 * avg(l2.l_quantity) FROM lineitem l2 WHERE l2.l_partkey = p.p_partkey)"""

_Q18_JOIN = """
  FROM customer c, orders o, lineitem l
  WHERE o.o_orderkey IN (SELECT l_orderkey FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300)
    AND c.c_custkey = o.o_custkey AND o.o_orderkey = l.l_orderkey"""

_Q19_JOIN = """
  FROM lineitem l, part p
  WHERE (p.p_partkey = l.l_partkey AND p.p_brand = 'Brand#12'
         AND p.p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
         AND l.l_quantity >= 1 AND l.l_quantity <= 11 AND p.p_size BETWEEN 1 AND 5
         AND l.l_shipmode IN ('AIR', 'AIR REG') AND l.l_shipinstruct = 'DELIVER IN PERSON')
     OR (p.p_partkey = l.l_partkey AND p.p_brand = 'Brand#23'
         AND p.p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
         AND l.l_quantity >= 10 AND l.l_quantity <= 20 AND p.p_size BETWEEN 1 AND 10
         AND l.l_shipmode IN ('AIR', 'AIR REG') AND l.l_shipinstruct = 'DELIVER IN PERSON')
     OR (p.p_partkey = l.l_partkey AND p.p_brand = 'Brand#34'
         AND p.p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
         AND l.l_quantity >= 20 AND l.l_quantity <= 30 AND p.p_size BETWEEN 1 AND 15
         AND l.l_shipmode IN ('AIR', 'AIR REG') AND l.l_shipinstruct = 'DELIVER IN PERSON')"""

# Q20: partsupp rows witnessing a supplier, with the lineitem rows of their correlated sum.
_Q20_SUM = """(SELECT l_partkey, l_suppkey, sum(l_quantity) AS q FROM lineitem
   WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01' GROUP BY l_partkey, l_suppkey)"""
_Q20_WITNESS = f"""(SELECT ps.rid AS psrid, ps.ps_partkey, ps.ps_suppkey FROM partsupp ps, {_Q20_SUM} sm
   WHERE ps.ps_partkey IN (SELECT p_partkey FROM part WHERE p_name LIKE 'forest%')
     AND sm.l_partkey = ps.ps_partkey AND sm.l_suppkey = ps.ps_suppkey AND ps.ps_availqty > 0.5 * sm.q)"""
_Q20_OUT = f"""(SELECT s.s_name AS k1, s.s_suppkey AS sk, s.rid AS srid, n.rid AS nrid FROM supplier s, nation n
   WHERE s.s_suppkey IN (SELECT ps_suppkey FROM {_Q20_WITNESS})
     AND s.s_nationkey = n.n_nationkey AND n.n_name = 'CANADA')"""

_Q21_JOIN = """
  FROM supplier s, lineitem l1, orders o, nation n
  WHERE s.s_suppkey = l1.l_suppkey AND o.o_orderkey = l1.l_orderkey AND o.o_orderstatus = 'F'
    AND l1.l_receiptdate > l1.l_commitdate
    AND EXISTS (SELECT * FROM lineitem l2 WHERE l2.l_orderkey = l1.l_orderkey AND l2.l_suppkey <> l1.l_suppkey)
    AND NOT EXISTS (SELECT * FROM lineitem l3 WHERE l3.l_orderkey = l1.l_orderkey
                    AND l3.l_suppkey <> l1.l_suppkey AND l3.l_receiptdate > l3.l_commitdate)
    AND s.s_nationkey = n.n_nationkey AND n.n_name = 'SAUDI ARABIA'"""

_Q22_CODES = "('13', '31', '23', '29', '30', '18', '17')"
_Q22_JOIN = f"""
  FROM customer c
  WHERE substring(c.c_phone, 1, 2) IN {_Q22_CODES}
    AND c.c_acctbal > (SELECT avg(c_acctbal) FROM customer WHERE c_acctbal > 0.00
                       AND substring(c_phone, 1, 2) IN {_Q22_CODES})
    AND NOT EXISTS (SELECT * FROM orders WHERE o_custkey = c.c_custkey)"""


def _per_source(keys: str, join: str, **aliases: str) -> dict[str, list[str]]:
    """One statement per (alias → table): the join's key values and that alias's rid."""
    out: dict[str, list[str]] = defaultdict(list)
    for alias, table in aliases.items():
        out[table].append(f"SELECT {keys}, {alias}.rid {join}")
    return out


def _merge(*parts: dict[str, list[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for part in parts:
        for table, sqls in part.items():
            out[table].extend(sqls)
    return out


ORACLE: dict[int, dict[str, list[str]]] = {
    1: _per_source(
        "l.l_returnflag AS k1, l.l_linestatus AS k2",
        "FROM lineitem l WHERE l.l_shipdate <= DATE '1998-09-02'",
        l="lineitem",
    ),
    2: _merge(
        _per_source("p.p_partkey AS k1, s.s_name AS k2", _Q2_JOIN, p="part", s="supplier", ps="partsupp", n="nation", r="region"),
        _per_source("o.k1, o.k2", _Q2_MIN, ps2="partsupp", s2="supplier", n2="nation", r2="region"),
    ),
    3: _per_source(
        "l.l_orderkey AS k1",
        """FROM customer c, orders o, lineitem l WHERE c.c_mktsegment = 'BUILDING' AND c.c_custkey = o.o_custkey
           AND l.l_orderkey = o.o_orderkey AND o.o_orderdate < DATE '1995-03-15' AND l.l_shipdate > DATE '1995-03-15'""",
        c="customer", o="orders", l="lineitem",
    ),
    4: _per_source(
        "o.o_orderpriority AS k1",
        """FROM orders o, lineitem l WHERE o.o_orderdate >= DATE '1993-07-01' AND o.o_orderdate < DATE '1993-10-01'
           AND l.l_orderkey = o.o_orderkey AND l.l_commitdate < l.l_receiptdate""",
        o="orders", l="lineitem",
    ),
    5: _per_source("n.n_name AS k1", _Q5_JOIN, c="customer", o="orders", l="lineitem", s="supplier", n="nation", r="region"),
    6: _per_source(
        "0 AS k0",
        """FROM lineitem l WHERE l.l_shipdate >= DATE '1994-01-01' AND l.l_shipdate < DATE '1995-01-01'
           AND l.l_discount BETWEEN 0.05 AND 0.07 AND l.l_quantity < 24""",
        l="lineitem",
    ),
    7: _per_source(_Q7_KEYS, _Q7_JOIN, s="supplier", l="lineitem", o="orders", c="customer", n1="nation", n2="nation"),
    8: _per_source(
        "year(o.o_orderdate) AS k1", _Q8_JOIN,
        p="part", s="supplier", l="lineitem", o="orders", c="customer", n1="nation", n2="nation", r="region",
    ),
    9: _per_source(_Q9_KEYS, _Q9_JOIN, p="part", s="supplier", l="lineitem", ps="partsupp", o="orders", n="nation"),
    10: _per_source("c.c_custkey AS k1", _Q10_JOIN, c="customer", o="orders", l="lineitem", n="nation"),
    # Every output row carries the HAVING threshold's lineage: all German rows (its own group among them).
    11: _per_source("out.k1", f"FROM {_Q11_OUT} out, " + _Q11_GERMANY.split("FROM", 1)[1].lstrip(),
                    ps="partsupp", s="supplier", n="nation"),
    12: _per_source("l.l_shipmode AS k1", _Q12_JOIN, o="orders", l="lineitem"),
    13: {
        "customer": [f"SELECT t.c_count AS k1, t.crid FROM {_Q13_COUNTS} t"],
        "orders": [
            f"""SELECT t.c_count AS k1, o.rid FROM {_Q13_COUNTS} t, orders o
                WHERE o.o_custkey = t.ck AND o.o_comment NOT LIKE '%special%requests%'"""
        ],
    },
    14: _per_source(
        "0 AS k0",
        """FROM lineitem l, part p WHERE l.l_partkey = p.p_partkey AND l.l_shipdate >= DATE '1995-09-01'
           AND l.l_shipdate < DATE '1995-10-01'""",
        l="lineitem", p="part",
    ),
    15: {
        "supplier": [f"SELECT o.k1, s.rid FROM {_Q15_OUT} o, supplier s WHERE s.s_suppkey = o.k1"],
        "lineitem": [f"SELECT o.k1, l.rid FROM {_Q15_OUT} o, lineitem l WHERE {_Q15_RANGE}"],
    },
    16: _per_source("p.p_brand AS k1, p.p_type AS k2, p.p_size AS k3", _Q16_JOIN, ps="partsupp", p="part"),
    17: _merge(
        _per_source("0 AS k0", _Q17_JOIN, l="lineitem", p="part"),
        _per_source(
            "0 AS k0",
            _Q17_JOIN.replace("FROM lineitem l, part p", "FROM lineitem l, part p, lineitem l2x")
            + " AND l2x.l_partkey = p.p_partkey",
            l2x="lineitem",
        ),
    ),
    18: _per_source("o.o_orderkey AS k1", _Q18_JOIN, c="customer", o="orders", l="lineitem"),
    19: _per_source("0 AS k0", _Q19_JOIN, l="lineitem", p="part"),
    20: {
        "supplier": [f"SELECT k1, srid FROM {_Q20_OUT}"],
        "nation": [f"SELECT k1, nrid FROM {_Q20_OUT}"],
        "partsupp": [f"SELECT o.k1, w.psrid FROM {_Q20_OUT} o, {_Q20_WITNESS} w WHERE w.ps_suppkey = o.sk"],
        "part": [
            f"""SELECT o.k1, p.rid FROM {_Q20_OUT} o, {_Q20_WITNESS} w, part p
                WHERE w.ps_suppkey = o.sk AND p.p_partkey = w.ps_partkey AND p.p_name LIKE 'forest%'"""
        ],
        "lineitem": [
            f"""SELECT o.k1, l.rid FROM {_Q20_OUT} o, {_Q20_WITNESS} w, lineitem l
                WHERE w.ps_suppkey = o.sk AND l.l_partkey = w.ps_partkey AND l.l_suppkey = w.ps_suppkey
                  AND l.l_shipdate >= DATE '1994-01-01' AND l.l_shipdate < DATE '1995-01-01'"""
        ],
    },
    21: _merge(
        _per_source("s.s_name AS k1", _Q21_JOIN, s="supplier", l1="lineitem", o="orders", n="nation"),
        _per_source(
            "s.s_name AS k1",
            _Q21_JOIN.replace("FROM supplier s,", "FROM lineitem l2w, supplier s,")
            + " AND l2w.l_orderkey = l1.l_orderkey AND l2w.l_suppkey <> l1.l_suppkey",
            l2w="lineitem",
        ),
    ),
    22: {
        "customer": [
            f"SELECT substring(c.c_phone, 1, 2) AS k1, c.rid {_Q22_JOIN}",
            f"""SELECT o.k1, c2.rid FROM (SELECT DISTINCT substring(c.c_phone, 1, 2) AS k1 {_Q22_JOIN}) o, customer c2
                WHERE c2.c_acctbal > 0.00 AND substring(c2.c_phone, 1, 2) IN {_Q22_CODES}""",
        ],
    },
}


def connect(data: Path) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection where every TPC-H table has its rows' file_row_number as `rid`."""
    con = duckdb.connect()
    for t in TABLES:
        path = str(data / f"{t}.parquet").replace("'", "''")
        con.execute(
            f"CREATE VIEW {t} AS SELECT * EXCLUDE (file_row_number), file_row_number AS rid "
            f"FROM read_parquet('{path}', file_row_number = true)"
        )
    return con


def oracle(con: duckdb.DuckDBPyConnection, n: int) -> Lineage:
    """Output row key → source table → rids, for TPC-H query `n`."""
    result: Lineage = defaultdict(lambda: defaultdict(set))
    width = len(KEYS[n])
    for table, statements in ORACLE[n].items():
        for sql in statements:
            for row in con.execute(sql).fetchall():
                key = tuple(row[:width]) if width else ()
                result[key][table].add(int(row[-1]))
    return result
