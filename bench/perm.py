"""A Perm-style baseline, as a yardstick only: each aggregate carries its group's source
rids as an array column through the shuffle (the annotation rewrite ember avoids).

Hand-written for the aggregate-heavy TPC-H queries the issue names; `*_p` views add each
table's rid (`_metadata.row_index`, one file per table) as `<prefix>_rid`.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from devkit.tpch import QUERIES

PREFIX = {"lineitem": "l", "orders": "o", "customer": "c", "nation": "n"}


def register(spark: SparkSession, data: Path) -> None:
    for table, p in PREFIX.items():
        df = spark.read.parquet(str(data / f"{table}.parquet"))
        df.select("*", F.col("_metadata.row_index").alias(f"{p}_rid")).createOrReplaceTempView(f"{table}_p")


def _rewrite(n: int, provenance: str) -> str:
    sql = QUERIES[n][-1]
    for table in PREFIX:
        sql = sql.replace(f" {table},", f" {table}_p,").replace(f" {table}\n", f" {table}_p\n")
    head, rest = sql.split("\nFROM", 1)
    return f"{head}, {provenance}\nFROM{rest}"


PERM: dict[int, str] = {
    1: _rewrite(1, "collect_list(l_rid) AS prov"),
    3: _rewrite(3, "collect_list(struct(c_rid, o_rid, l_rid)) AS prov"),
    10: _rewrite(10, "collect_list(struct(c_rid, o_rid, l_rid, n_rid)) AS prov"),
    12: _rewrite(12, "collect_list(struct(o_rid, l_rid)) AS prov"),
    13: """
SELECT c_count, count(*) AS custdist, flatten(collect_list(prov)) AS prov
FROM (
  SELECT c_custkey, count(o_orderkey) AS c_count, collect_list(struct(c_rid, o_rid)) AS prov
  FROM customer_p LEFT OUTER JOIN orders_p ON c_custkey = o_custkey AND o_comment NOT LIKE '%special%requests%'
  GROUP BY c_custkey
) AS c_orders
GROUP BY c_count
ORDER BY custdist DESC, c_count DESC""",
    18: """
SELECT c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice, sum(l_quantity),
       collect_list(struct(c_rid, o_rid, l_rid)) AS prov, first(s.witnesses) AS witnesses
FROM customer_p, orders_p, lineitem_p,
     (SELECT l_orderkey AS big, collect_list(l_rid) AS witnesses FROM lineitem_p
      GROUP BY l_orderkey HAVING sum(l_quantity) > 300) AS s
WHERE o_orderkey = s.big AND c_custkey = o_custkey AND o_orderkey = l_orderkey
GROUP BY c_name, c_custkey, o_orderkey, o_orderdate, o_totalprice
ORDER BY o_totalprice DESC, o_orderdate
LIMIT 100""",
}


def perm_query(spark: SparkSession, n: int) -> DataFrame:
    return spark.sql(PERM[n])
