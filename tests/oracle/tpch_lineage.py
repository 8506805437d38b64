"""An independent row-lineage oracle for the 22 TPC-H queries, hand-written in DuckDB SQL.

Each `ORACLE[n]` is one DuckDB statement (a template: `{d}` is the data folder) that
returns one row per output row of TPC-H query `n` *without its LIMIT* (ties at a LIMIT
boundary then do not matter), with the query's output columns and, for every source
table the query's lineage can reach, a column `lin_<table>`: the sorted distinct
`file_row_number`s of that table in the output row's lineage. Each table is a single
Parquet file, so `file_row_number` is ember's `ember_rid`.

Lineage is which-provenance as DESIGN.md section 2 defines it:

* filter / project: the row; inner join: both rows; outer join: the matched rows, an
  unmatched row alone; aggregate: every row of the group (after joins and filters);
* semi join (EXISTS / IN subquery): the outer row and every inner row witnessing it,
  with the witnesses' own lineage (Q18: the lineitem rows of the qualifying group;
  Q20: the partsupp witnesses, their part witnesses and their correlated sum's lineitem
  rows; Q21: the l2 rows; Q4: the late lineitem rows of the order);
* anti join (NOT EXISTS / NOT IN): the outer row only (Q16 supplier, Q21 l3, Q22
  orders contribute nothing);
* scalar subquery: the full lineage of the scalar, added to every row that used it
  (Q2 the offers under the part's min, Q11 every German partsupp/supplier/nation row,
  Q15 every lineitem row in the quarter, Q17 every lineitem row of the part's avg,
  Q20 the lineitem rows of the correlated sum, Q22 the customers under the avg);
* a table read more than once is one source: its rids are united.

The SQL is written from the TPC-H specification and these rules only; nothing here
uses ember's code or its copy of the queries.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc


def _scan(*tables: str) -> str:
    """WITH-clause entries: each table as read_parquet with its file row number as `rid`."""
    return ",\n".join(
        f"{t} AS (SELECT * EXCLUDE (file_row_number), file_row_number AS rid "
        f"FROM read_parquet('{{d}}/{t}.parquet', file_row_number = true))"
        for t in tables
    )


def _lin(expr: str) -> str:
    """A lineage list: sorted, distinct, NULLs (unmatched outer-join sides) dropped."""
    return f"list_sort(list_distinct({expr}))"


ORACLE: dict[int, str] = {}

ORACLE[1] = f"""
WITH {_scan("lineitem")}
SELECT
    l_returnflag, l_linestatus,
    sum(l_quantity) AS sum_qty,
    sum(l_extendedprice) AS sum_base_price,
    sum(l_extendedprice * (1 - l_discount)) AS sum_disc_price,
    sum(l_extendedprice * (1 - l_discount) * (1 + l_tax)) AS sum_charge,
    avg(l_quantity) AS avg_qty,
    avg(l_extendedprice) AS avg_price,
    avg(l_discount) AS avg_disc,
    count(*) AS count_order,
    {_lin("list(rid)")} AS lin_lineitem
FROM lineitem
WHERE l_shipdate <= DATE '1998-12-01' - INTERVAL 90 DAY
GROUP BY l_returnflag, l_linestatus
"""

# Q2: the correlated min(ps_supplycost) is over the part's European offers, so every
# output row also carries all of its part's European partsupp rows and their suppliers,
# nations and the region row.
ORACLE[2] = f"""
WITH {_scan("part", "supplier", "partsupp", "nation", "region")},
offer AS (
    SELECT ps.ps_partkey, ps.ps_supplycost, s.s_acctbal, s.s_name, s.s_address, s.s_phone,
           s.s_comment, n.n_name,
           ps.rid AS ps_rid, s.rid AS s_rid, n.rid AS n_rid, r.rid AS r_rid
    FROM partsupp ps
    JOIN supplier s ON s.s_suppkey = ps.ps_suppkey
    JOIN nation n ON s.s_nationkey = n.n_nationkey
    JOIN region r ON n.n_regionkey = r.r_regionkey
    WHERE r.r_name = 'EUROPE'
),
best AS (
    SELECT ps_partkey, min(ps_supplycost) AS min_cost,
           list(ps_rid) AS ps_rids, list(s_rid) AS s_rids, list(n_rid) AS n_rids,
           list(r_rid) AS r_rids
    FROM offer GROUP BY ps_partkey
)
SELECT
    o.s_acctbal, o.s_name, o.n_name, p.p_partkey, p.p_mfgr, o.s_address, o.s_phone, o.s_comment,
    [p.rid] AS lin_part,
    {_lin("list_append(b.s_rids, o.s_rid)")} AS lin_supplier,
    {_lin("list_append(b.ps_rids, o.ps_rid)")} AS lin_partsupp,
    {_lin("list_append(b.n_rids, o.n_rid)")} AS lin_nation,
    {_lin("list_append(b.r_rids, o.r_rid)")} AS lin_region
FROM part p
JOIN offer o ON p.p_partkey = o.ps_partkey
JOIN best b ON b.ps_partkey = p.p_partkey
WHERE p.p_size = 15 AND p.p_type LIKE '%BRASS' AND o.ps_supplycost = b.min_cost
"""

ORACLE[3] = f"""
WITH {_scan("customer", "orders", "lineitem")}
SELECT
    l.l_orderkey,
    sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
    o.o_orderdate, o.o_shippriority,
    {_lin("list(c.rid)")} AS lin_customer,
    {_lin("list(o.rid)")} AS lin_orders,
    {_lin("list(l.rid)")} AS lin_lineitem
FROM customer c
JOIN orders o ON c.c_custkey = o.o_custkey
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
WHERE c.c_mktsegment = 'BUILDING'
  AND o.o_orderdate < DATE '1995-03-15'
  AND l.l_shipdate > DATE '1995-03-15'
GROUP BY l.l_orderkey, o.o_orderdate, o.o_shippriority
"""

# Q4: EXISTS -> each counted order brings every late lineitem row of that order.
ORACLE[4] = f"""
WITH {_scan("orders", "lineitem")},
picked AS (
    SELECT o.o_orderpriority, o.rid AS o_rid, list(l.rid) AS l_rids
    FROM orders o
    JOIN lineitem l ON l.l_orderkey = o.o_orderkey AND l.l_commitdate < l.l_receiptdate
    WHERE o.o_orderdate >= DATE '1993-07-01' AND o.o_orderdate < DATE '1993-10-01'
    GROUP BY o.o_orderpriority, o.rid
)
SELECT
    o_orderpriority,
    count(*) AS order_count,
    {_lin("list(o_rid)")} AS lin_orders,
    {_lin("flatten(list(l_rids))")} AS lin_lineitem
FROM picked
GROUP BY o_orderpriority
"""

ORACLE[5] = f"""
WITH {_scan("customer", "orders", "lineitem", "supplier", "nation", "region")}
SELECT
    n.n_name,
    sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
    {_lin("list(c.rid)")} AS lin_customer,
    {_lin("list(o.rid)")} AS lin_orders,
    {_lin("list(l.rid)")} AS lin_lineitem,
    {_lin("list(s.rid)")} AS lin_supplier,
    {_lin("list(n.rid)")} AS lin_nation,
    {_lin("list(r.rid)")} AS lin_region
FROM customer c
JOIN orders o ON c.c_custkey = o.o_custkey
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
JOIN supplier s ON l.l_suppkey = s.s_suppkey AND c.c_nationkey = s.s_nationkey
JOIN nation n ON s.s_nationkey = n.n_nationkey
JOIN region r ON n.n_regionkey = r.r_regionkey
WHERE r.r_name = 'ASIA'
  AND o.o_orderdate >= DATE '1994-01-01' AND o.o_orderdate < DATE '1995-01-01'
GROUP BY n.n_name
"""

ORACLE[6] = f"""
WITH {_scan("lineitem")}
SELECT
    sum(l_extendedprice * l_discount) AS revenue,
    {_lin("list(rid)")} AS lin_lineitem
FROM lineitem
WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
  AND l_discount BETWEEN 0.05 AND 0.07
  AND l_quantity < 24
"""

# Q7: nation is read twice (n1, n2): one source, rids united.
ORACLE[7] = f"""
WITH {_scan("supplier", "lineitem", "orders", "customer", "nation")}
SELECT
    n1.n_name AS supp_nation,
    n2.n_name AS cust_nation,
    year(l.l_shipdate) AS l_year,
    sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
    {_lin("list(s.rid)")} AS lin_supplier,
    {_lin("list(l.rid)")} AS lin_lineitem,
    {_lin("list(o.rid)")} AS lin_orders,
    {_lin("list(c.rid)")} AS lin_customer,
    {_lin("list_concat(list(n1.rid), list(n2.rid))")} AS lin_nation
FROM supplier s
JOIN lineitem l ON s.s_suppkey = l.l_suppkey
JOIN orders o ON o.o_orderkey = l.l_orderkey
JOIN customer c ON c.c_custkey = o.o_custkey
JOIN nation n1 ON s.s_nationkey = n1.n_nationkey
JOIN nation n2 ON c.c_nationkey = n2.n_nationkey
WHERE ((n1.n_name = 'FRANCE' AND n2.n_name = 'GERMANY')
    OR (n1.n_name = 'GERMANY' AND n2.n_name = 'FRANCE'))
  AND l.l_shipdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'
GROUP BY n1.n_name, n2.n_name, year(l.l_shipdate)
"""

ORACLE[8] = f"""
WITH {_scan("part", "supplier", "lineitem", "orders", "customer", "nation", "region")}
SELECT
    year(o.o_orderdate) AS o_year,
    sum(CASE WHEN n2.n_name = 'BRAZIL' THEN l.l_extendedprice * (1 - l.l_discount) ELSE 0 END)
        / sum(l.l_extendedprice * (1 - l.l_discount)) AS mkt_share,
    {_lin("list(p.rid)")} AS lin_part,
    {_lin("list(s.rid)")} AS lin_supplier,
    {_lin("list(l.rid)")} AS lin_lineitem,
    {_lin("list(o.rid)")} AS lin_orders,
    {_lin("list(c.rid)")} AS lin_customer,
    {_lin("list_concat(list(n1.rid), list(n2.rid))")} AS lin_nation,
    {_lin("list(r.rid)")} AS lin_region
FROM part p
JOIN lineitem l ON p.p_partkey = l.l_partkey
JOIN supplier s ON s.s_suppkey = l.l_suppkey
JOIN orders o ON l.l_orderkey = o.o_orderkey
JOIN customer c ON o.o_custkey = c.c_custkey
JOIN nation n1 ON c.c_nationkey = n1.n_nationkey
JOIN region r ON n1.n_regionkey = r.r_regionkey
JOIN nation n2 ON s.s_nationkey = n2.n_nationkey
WHERE r.r_name = 'AMERICA'
  AND o.o_orderdate BETWEEN DATE '1995-01-01' AND DATE '1996-12-31'
  AND p.p_type = 'ECONOMY ANODIZED STEEL'
GROUP BY year(o.o_orderdate)
"""

ORACLE[9] = f"""
WITH {_scan("part", "supplier", "lineitem", "partsupp", "orders", "nation")}
SELECT
    n.n_name AS nation,
    year(o.o_orderdate) AS o_year,
    sum(l.l_extendedprice * (1 - l.l_discount) - ps.ps_supplycost * l.l_quantity) AS sum_profit,
    {_lin("list(p.rid)")} AS lin_part,
    {_lin("list(s.rid)")} AS lin_supplier,
    {_lin("list(l.rid)")} AS lin_lineitem,
    {_lin("list(ps.rid)")} AS lin_partsupp,
    {_lin("list(o.rid)")} AS lin_orders,
    {_lin("list(n.rid)")} AS lin_nation
FROM lineitem l
JOIN supplier s ON s.s_suppkey = l.l_suppkey
JOIN partsupp ps ON ps.ps_suppkey = l.l_suppkey AND ps.ps_partkey = l.l_partkey
JOIN part p ON p.p_partkey = l.l_partkey
JOIN orders o ON o.o_orderkey = l.l_orderkey
JOIN nation n ON s.s_nationkey = n.n_nationkey
WHERE p.p_name LIKE '%green%'
GROUP BY n.n_name, year(o.o_orderdate)
"""

ORACLE[10] = f"""
WITH {_scan("customer", "orders", "lineitem", "nation")}
SELECT
    c.c_custkey, c.c_name,
    sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
    c.c_acctbal, n.n_name, c.c_address, c.c_phone, c.c_comment,
    {_lin("list(c.rid)")} AS lin_customer,
    {_lin("list(o.rid)")} AS lin_orders,
    {_lin("list(l.rid)")} AS lin_lineitem,
    {_lin("list(n.rid)")} AS lin_nation
FROM customer c
JOIN orders o ON c.c_custkey = o.o_custkey
JOIN lineitem l ON l.l_orderkey = o.o_orderkey
JOIN nation n ON c.c_nationkey = n.n_nationkey
WHERE o.o_orderdate >= DATE '1993-10-01' AND o.o_orderdate < DATE '1994-01-01'
  AND l.l_returnflag = 'R'
GROUP BY c.c_custkey, c.c_name, c.c_acctbal, c.c_phone, n.n_name, c.c_address, c.c_comment
"""

# Q11: the HAVING threshold is a scalar over every German offer, so each output row
# carries all German partsupp rows, their suppliers and the GERMANY nation row.
ORACLE[11] = f"""
WITH {_scan("partsupp", "supplier", "nation")},
german AS (
    SELECT ps.ps_partkey, ps.ps_supplycost * ps.ps_availqty AS v,
           ps.rid AS ps_rid, s.rid AS s_rid, n.rid AS n_rid
    FROM partsupp ps
    JOIN supplier s ON ps.ps_suppkey = s.s_suppkey
    JOIN nation n ON s.s_nationkey = n.n_nationkey
    WHERE n.n_name = 'GERMANY'
),
threshold AS (
    SELECT sum(v) * 0.0001 AS t, list(ps_rid) AS ps_rids, list(s_rid) AS s_rids,
           list(n_rid) AS n_rids
    FROM german
),
grp AS (
    SELECT ps_partkey, sum(v) AS value, list(ps_rid) AS ps_rids, list(s_rid) AS s_rids,
           list(n_rid) AS n_rids
    FROM german GROUP BY ps_partkey
)
SELECT
    g.ps_partkey, g.value,
    {_lin("list_concat(g.ps_rids, t.ps_rids)")} AS lin_partsupp,
    {_lin("list_concat(g.s_rids, t.s_rids)")} AS lin_supplier,
    {_lin("list_concat(g.n_rids, t.n_rids)")} AS lin_nation
FROM grp g, threshold t
WHERE g.value > t.t
"""

ORACLE[12] = f"""
WITH {_scan("orders", "lineitem")}
SELECT
    l.l_shipmode,
    sum(CASE WHEN o.o_orderpriority = '1-URGENT' OR o.o_orderpriority = '2-HIGH'
             THEN 1 ELSE 0 END) AS high_line_count,
    sum(CASE WHEN o.o_orderpriority <> '1-URGENT' AND o.o_orderpriority <> '2-HIGH'
             THEN 1 ELSE 0 END) AS low_line_count,
    {_lin("list(o.rid)")} AS lin_orders,
    {_lin("list(l.rid)")} AS lin_lineitem
FROM orders o
JOIN lineitem l ON o.o_orderkey = l.l_orderkey
WHERE l.l_shipmode IN ('MAIL', 'SHIP')
  AND l.l_commitdate < l.l_receiptdate
  AND l.l_shipdate < l.l_commitdate
  AND l.l_receiptdate >= DATE '1994-01-01' AND l.l_receiptdate < DATE '1995-01-01'
GROUP BY l.l_shipmode
"""

# Q13: left outer join; a customer without (matching) orders is in the lineage alone.
ORACLE[13] = f"""
WITH {_scan("customer", "orders")},
c_orders AS (
    SELECT c.c_custkey, count(o.o_orderkey) AS c_count,
           list(c.rid) AS c_rids, list(o.rid) AS o_rids
    FROM customer c
    LEFT JOIN orders o
      ON c.c_custkey = o.o_custkey AND o.o_comment NOT LIKE '%special%requests%'
    GROUP BY c.c_custkey
)
SELECT
    c_count,
    count(*) AS custdist,
    {_lin("flatten(list(c_rids))")} AS lin_customer,
    {_lin("flatten(list(o_rids))")} AS lin_orders
FROM c_orders
GROUP BY c_count
"""

ORACLE[14] = f"""
WITH {_scan("lineitem", "part")}
SELECT
    100.00 * sum(CASE WHEN p.p_type LIKE 'PROMO%' THEN l.l_extendedprice * (1 - l.l_discount)
                      ELSE 0 END)
        / sum(l.l_extendedprice * (1 - l.l_discount)) AS promo_revenue,
    {_lin("list(l.rid)")} AS lin_lineitem,
    {_lin("list(p.rid)")} AS lin_part
FROM lineitem l
JOIN part p ON l.l_partkey = p.p_partkey
WHERE l.l_shipdate >= DATE '1995-09-01' AND l.l_shipdate < DATE '1995-10-01'
"""

# Q15: revenue0 is read twice (lineitem is one source); the max's lineage is every
# lineitem row of the quarter, so each output row carries all of them.
ORACLE[15] = f"""
WITH {_scan("supplier", "lineitem")},
revenue0 AS (
    SELECT l_suppkey AS supplier_no,
           sum(l_extendedprice * (1 - l_discount)) AS total_revenue,
           list(rid) AS l_rids
    FROM lineitem
    WHERE l_shipdate >= DATE '1996-01-01' AND l_shipdate < DATE '1996-04-01'
    GROUP BY l_suppkey
),
top AS (
    SELECT max(total_revenue) AS m, flatten(list(l_rids)) AS l_rids FROM revenue0
)
SELECT
    s.s_suppkey, s.s_name, s.s_address, s.s_phone, r.total_revenue,
    [s.rid] AS lin_supplier,
    {_lin("list_concat(r.l_rids, t.l_rids)")} AS lin_lineitem
FROM supplier s
JOIN revenue0 r ON s.s_suppkey = r.supplier_no
JOIN top t ON r.total_revenue = t.m
"""

# Q16: NOT IN over supplier is an anti join: supplier is not in the lineage.
ORACLE[16] = f"""
WITH {_scan("partsupp", "part", "supplier")}
SELECT
    p.p_brand, p.p_type, p.p_size,
    count(DISTINCT ps.ps_suppkey) AS supplier_cnt,
    {_lin("list(ps.rid)")} AS lin_partsupp,
    {_lin("list(p.rid)")} AS lin_part
FROM partsupp ps
JOIN part p ON p.p_partkey = ps.ps_partkey
WHERE p.p_brand <> 'Brand#45'
  AND p.p_type NOT LIKE 'MEDIUM POLISHED%'
  AND p.p_size IN (49, 14, 23, 45, 19, 3, 36, 9)
  AND ps.ps_suppkey NOT IN (
      SELECT s_suppkey FROM supplier WHERE s_comment LIKE '%Customer%Complaints%')
GROUP BY p.p_brand, p.p_type, p.p_size
"""

# Q17: each qualifying lineitem row also brings every lineitem row of its part's avg.
ORACLE[17] = f"""
WITH {_scan("lineitem", "part")},
part_avg AS (
    SELECT l_partkey, 0.2 * avg(l_quantity) AS lim, list(rid) AS l_rids
    FROM lineitem GROUP BY l_partkey
),
used AS (
    SELECT l.l_extendedprice, l.rid AS l_rid, p.rid AS p_rid, a.l_rids
    FROM lineitem l
    JOIN part p ON p.p_partkey = l.l_partkey
    JOIN part_avg a ON a.l_partkey = p.p_partkey
    WHERE p.p_brand = 'Brand#23' AND p.p_container = 'MED BOX' AND l.l_quantity < a.lim
)
SELECT
    sum(l_extendedprice) / 7.0 AS avg_yearly,
    {_lin("list_concat(list(l_rid), flatten(list(l_rids)))")} AS lin_lineitem,
    {_lin("list(p_rid)")} AS lin_part
FROM used
"""

# Q18: IN (grouped lineitem): the witness is the order's group, i.e. all its lineitem rows.
ORACLE[18] = f"""
WITH {_scan("customer", "orders", "lineitem")},
big AS (
    SELECT l_orderkey, list(rid) AS l_rids
    FROM lineitem GROUP BY l_orderkey HAVING sum(l_quantity) > 300
)
SELECT
    c.c_name, c.c_custkey, o.o_orderkey, o.o_orderdate, o.o_totalprice,
    sum(l.l_quantity) AS "sum(l_quantity)",
    {_lin("list(c.rid)")} AS lin_customer,
    {_lin("list(o.rid)")} AS lin_orders,
    {_lin("list_concat(list(l.rid), flatten(list(b.l_rids)))")} AS lin_lineitem
FROM customer c
JOIN orders o ON c.c_custkey = o.o_custkey
JOIN big b ON b.l_orderkey = o.o_orderkey
JOIN lineitem l ON o.o_orderkey = l.l_orderkey
GROUP BY c.c_name, c.c_custkey, o.o_orderkey, o.o_orderdate, o.o_totalprice
"""

ORACLE[19] = f"""
WITH {_scan("lineitem", "part")}
SELECT
    sum(l.l_extendedprice * (1 - l.l_discount)) AS revenue,
    {_lin("list(l.rid)")} AS lin_lineitem,
    {_lin("list(p.rid)")} AS lin_part
FROM lineitem l
JOIN part p ON p.p_partkey = l.l_partkey
WHERE (p.p_brand = 'Brand#12'
       AND p.p_container IN ('SM CASE', 'SM BOX', 'SM PACK', 'SM PKG')
       AND l.l_quantity >= 1 AND l.l_quantity <= 11
       AND p.p_size BETWEEN 1 AND 5
       AND l.l_shipmode IN ('AIR', 'AIR REG')
       AND l.l_shipinstruct = 'DELIVER IN PERSON')
   OR (p.p_brand = 'Brand#23'
       AND p.p_container IN ('MED BAG', 'MED BOX', 'MED PKG', 'MED PACK')
       AND l.l_quantity >= 10 AND l.l_quantity <= 20
       AND p.p_size BETWEEN 1 AND 10
       AND l.l_shipmode IN ('AIR', 'AIR REG')
       AND l.l_shipinstruct = 'DELIVER IN PERSON')
   OR (p.p_brand = 'Brand#34'
       AND p.p_container IN ('LG CASE', 'LG BOX', 'LG PACK', 'LG PKG')
       AND l.l_quantity >= 20 AND l.l_quantity <= 30
       AND p.p_size BETWEEN 1 AND 15
       AND l.l_shipmode IN ('AIR', 'AIR REG')
       AND l.l_shipinstruct = 'DELIVER IN PERSON')
"""

# Q20: a supplier's witnesses are its qualifying partsupp rows; each brings its 'forest'
# part row (the inner IN's witness) and the lineitem rows of its correlated sum.
ORACLE[20] = f"""
WITH {_scan("supplier", "nation", "partsupp", "part", "lineitem")},
forest AS (
    SELECT p_partkey, rid AS p_rid FROM part WHERE p_name LIKE 'forest%'
),
shipped AS (
    SELECT l_partkey, l_suppkey, 0.5 * sum(l_quantity) AS half, list(rid) AS l_rids
    FROM lineitem
    WHERE l_shipdate >= DATE '1994-01-01' AND l_shipdate < DATE '1995-01-01'
    GROUP BY l_partkey, l_suppkey
),
witness AS (
    SELECT ps.ps_suppkey, list(ps.rid) AS ps_rids, list(f.p_rid) AS p_rids,
           flatten(list(sh.l_rids)) AS l_rids
    FROM partsupp ps
    JOIN forest f ON f.p_partkey = ps.ps_partkey
    JOIN shipped sh ON sh.l_partkey = ps.ps_partkey AND sh.l_suppkey = ps.ps_suppkey
    WHERE ps.ps_availqty > sh.half
    GROUP BY ps.ps_suppkey
)
SELECT
    s.s_name, s.s_address,
    [s.rid] AS lin_supplier,
    [n.rid] AS lin_nation,
    {_lin("w.ps_rids")} AS lin_partsupp,
    {_lin("w.p_rids")} AS lin_part,
    {_lin("w.l_rids")} AS lin_lineitem
FROM supplier s
JOIN nation n ON s.s_nationkey = n.n_nationkey
JOIN witness w ON w.ps_suppkey = s.s_suppkey
WHERE n.n_name = 'CANADA'
"""

# Q21: lineitem is read three times; l1 and the EXISTS witnesses l2 are in the lineage,
# the NOT EXISTS side l3 is not.
ORACLE[21] = f"""
WITH {_scan("supplier", "lineitem", "orders", "nation")},
waiting AS (
    SELECT s.s_name, s.rid AS s_rid, l1.rid AS l1_rid, o.rid AS o_rid, n.rid AS n_rid,
           l1.l_orderkey, l1.l_suppkey
    FROM supplier s
    JOIN lineitem l1 ON s.s_suppkey = l1.l_suppkey
    JOIN orders o ON o.o_orderkey = l1.l_orderkey
    JOIN nation n ON s.s_nationkey = n.n_nationkey
    WHERE o.o_orderstatus = 'F'
      AND l1.l_receiptdate > l1.l_commitdate
      AND n.n_name = 'SAUDI ARABIA'
      AND NOT EXISTS (
          SELECT 1 FROM lineitem l3
          WHERE l3.l_orderkey = l1.l_orderkey AND l3.l_suppkey <> l1.l_suppkey
            AND l3.l_receiptdate > l3.l_commitdate)
),
witness AS (
    SELECT w.l1_rid, list(l2.rid) AS l2_rids
    FROM waiting w
    JOIN lineitem l2 ON l2.l_orderkey = w.l_orderkey AND l2.l_suppkey <> w.l_suppkey
    GROUP BY w.l1_rid
)
SELECT
    w.s_name,
    count(*) AS numwait,
    {_lin("list(w.s_rid)")} AS lin_supplier,
    {_lin("list_concat(list(w.l1_rid), flatten(list(x.l2_rids)))")} AS lin_lineitem,
    {_lin("list(w.o_rid)")} AS lin_orders,
    {_lin("list(w.n_rid)")} AS lin_nation
FROM waiting w
JOIN witness x ON x.l1_rid = w.l1_rid
GROUP BY w.s_name
"""

# Q22: the uncorrelated avg's customers join every output row; orders (NOT EXISTS) do not.
ORACLE[22] = f"""
WITH {_scan("customer", "orders")},
coded AS (
    SELECT *, substring(c_phone, 1, 2) AS cntrycode FROM customer
    WHERE substring(c_phone, 1, 2) IN ('13', '31', '23', '29', '30', '18', '17')
),
average AS (
    SELECT avg(c_acctbal) AS a, list(rid) AS c_rids FROM coded WHERE c_acctbal > 0.00
),
custsale AS (
    SELECT c.cntrycode, count(*) AS numcust, sum(c.c_acctbal) AS totacctbal,
           list(c.rid) AS c_rids
    FROM coded c, average a
    WHERE c.c_acctbal > a.a
      AND NOT EXISTS (SELECT 1 FROM orders o WHERE o.o_custkey = c.c_custkey)
    GROUP BY c.cntrycode
)
SELECT
    s.cntrycode, s.numcust, s.totacctbal,
    {_lin("list_concat(s.c_rids, a.c_rids)")} AS lin_customer
FROM custsale s, average a
"""

# Output columns that identify an output row (unique within the oracle's result).
KEYS: dict[int, list[str]] = {
    1: ["l_returnflag", "l_linestatus"],
    2: ["p_partkey", "s_name"],
    3: ["l_orderkey"],
    4: ["o_orderpriority"],
    5: ["n_name"],
    6: [],
    7: ["supp_nation", "cust_nation", "l_year"],
    8: ["o_year"],
    9: ["nation", "o_year"],
    10: ["c_custkey"],
    11: ["ps_partkey"],
    12: ["l_shipmode"],
    13: ["c_count"],
    14: [],
    15: ["s_suppkey"],
    16: ["p_brand", "p_type", "p_size"],
    17: [],
    18: ["o_orderkey"],
    19: [],
    20: ["s_name"],
    21: ["s_name"],
    22: ["cntrycode"],
}

# Tables each query's lineage can reach (one `lin_<table>` column each).
SOURCES: dict[int, list[str]] = {
    1: ["lineitem"],
    2: ["part", "supplier", "partsupp", "nation", "region"],
    3: ["customer", "orders", "lineitem"],
    4: ["orders", "lineitem"],
    5: ["customer", "orders", "lineitem", "supplier", "nation", "region"],
    6: ["lineitem"],
    7: ["supplier", "lineitem", "orders", "customer", "nation"],
    8: ["part", "supplier", "lineitem", "orders", "customer", "nation", "region"],
    9: ["part", "supplier", "lineitem", "partsupp", "orders", "nation"],
    10: ["customer", "orders", "lineitem", "nation"],
    11: ["partsupp", "supplier", "nation"],
    12: ["orders", "lineitem"],
    13: ["customer", "orders"],
    14: ["lineitem", "part"],
    15: ["supplier", "lineitem"],
    16: ["partsupp", "part"],
    17: ["lineitem", "part"],
    18: ["customer", "orders", "lineitem"],
    19: ["lineitem", "part"],
    20: ["supplier", "nation", "partsupp", "part", "lineitem"],
    21: ["supplier", "lineitem", "orders", "nation"],
    22: ["customer"],
}

# Tables a query reads only on the anti side of NOT EXISTS / NOT IN: never in its lineage.
ANTI_ONLY: dict[int, list[str]] = {16: ["supplier"], 22: ["orders"]}

# Global aggregates: exactly one output row, even over no input (then its lineage is empty).
GLOBAL = frozenset(n for n, keys in KEYS.items() if not keys)


def _sql(n: int, data_dir: Path | str, replacements: Sequence[tuple[str, str]]) -> str:
    text = ORACLE[n]
    for old, new in replacements:
        assert text.count(old) == 1, f"Q{n} oracle: {old!r} occurs {text.count(old)} times"
        text = text.replace(old, new)
    folder = str(Path(data_dir).resolve()).replace("'", "''")
    return text.replace("{d}", folder)


def oracle(
    con: duckdb.DuckDBPyConnection,
    data_dir: Path | str,
    n: int,
    replacements: Sequence[tuple[str, str]] = (),
) -> pa.Table:
    """Query `n`'s output rows (no LIMIT) with a `lin_<table>` rid list per source table.

    `replacements` re-parameterize the query: (old, new) text replacements, each `old`
    occurring once in the oracle's SQL (the same ones apply to the Spark SQL).
    Rows are sorted by KEYS[n]; a NULL lineage list (a global aggregate over no rows)
    becomes an empty list, and every `lin_` column is list<int64>.
    """
    relation = con.sql(_sql(n, data_dir, replacements))
    fetch = getattr(relation, "to_arrow_table", None) or relation.arrow  # duckdb 2 / duckdb 1
    table = fetch()
    for source in SOURCES[n]:
        name = f"lin_{source}"
        column = table.column(name)
        empty = pa.array([[]] * len(table), pa.list_(pa.int64()))
        filled = pc.if_else(pc.is_null(column), empty, column.cast(pa.list_(pa.int64())))
        table = table.set_column(table.schema.get_field_index(name), name, filled)
    if KEYS[n]:
        table = table.sort_by([(k, "ascending") for k in KEYS[n]])
    return table
