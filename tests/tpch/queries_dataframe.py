"""The 22 TPC-H queries written with the PySpark DataFrame API only (no SQL strings).

Same semantics, output column names and order as the Spark SQL versions in
`devkit.tpch.QUERIES` (validation parameters, ORDER BY and LIMIT kept), so the same
oracle checks both. Subqueries are written the ways DataFrame users write them, on
purpose in several styles so ember sees several plan shapes:

* semi / anti joins (`left_semi`, `left_anti`) for EXISTS / IN / NOT EXISTS / NOT IN
  (Q4, Q16, Q18, Q20, Q21, Q22);
* a grouped aggregate joined back for a correlated scalar subquery (Q17, Q20);
* `DataFrame.scalar()` with `Column.outer()` for a correlated one (Q2);
* `DataFrame.scalar()` for uncorrelated ones (Q15, Q22) and a cross join with a global
  aggregate (Q11).

Lineage is the same under every rewrite (DESIGN.md section 2): a grouped aggregate's
group is exactly the rows the correlated scalar ranges over, and a semi join's witnesses
are the rows the EXISTS / IN finds. Numeric constants are decimal literals, as in SQL
(a float `0.06 + 0.01` is 0.06999999999999999 and would drop rows).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F


def _date(text: str) -> Column:
    return F.lit(dt.date.fromisoformat(text))


def _dec(text: str) -> Column:
    """A decimal literal, as SQL's `0.06` is."""
    return F.lit(Decimal(text))


def _volume() -> Column:
    return F.col("l_extendedprice") * (1 - F.col("l_discount"))


def q1(spark: SparkSession) -> DataFrame:
    li = spark.table("lineitem")
    return (
        li.where(F.col("l_shipdate") <= F.date_sub(_date("1998-12-01"), 90))
        .groupBy("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum("l_extendedprice").alias("sum_base_price"),
            F.sum(_volume()).alias("sum_disc_price"),
            F.sum(_volume() * (1 + F.col("l_tax"))).alias("sum_charge"),
            F.avg("l_quantity").alias("avg_qty"),
            F.avg("l_extendedprice").alias("avg_price"),
            F.avg("l_discount").alias("avg_disc"),
            F.count(F.lit(1)).alias("count_order"),
        )
        .orderBy("l_returnflag", "l_linestatus")
    )


def q2(spark: SparkSession) -> DataFrame:
    europe = spark.table("region").where(F.col("r_name") == "EUROPE")
    offers = (
        spark.table("partsupp")
        .join(spark.table("supplier"), F.col("s_suppkey") == F.col("ps_suppkey"))
        .join(spark.table("nation"), F.col("s_nationkey") == F.col("n_nationkey"))
        .join(europe, F.col("n_regionkey") == F.col("r_regionkey"))
    )
    # The correlated subquery: min(ps_supplycost) over the outer part's European offers.
    # (`select`, not `agg`: groupBy analyzes eagerly and cannot see the outer reference.)
    cheapest = (
        spark.table("partsupp").alias("ps2")
        .join(spark.table("supplier").alias("s2"), F.col("s2.s_suppkey") == F.col("ps2.ps_suppkey"))
        .join(spark.table("nation").alias("n2"), F.col("s2.s_nationkey") == F.col("n2.n_nationkey"))
        .join(spark.table("region").alias("r2"), F.col("n2.n_regionkey") == F.col("r2.r_regionkey"))
        .where((F.col("r2.r_name") == "EUROPE") & (F.col("ps2.ps_partkey") == F.col("p.p_partkey").outer()))
        .select(F.min("ps2.ps_supplycost"))
    )
    part = spark.table("part").alias("p").where(
        (F.col("p.p_size") == 15) & F.col("p.p_type").endswith("BRASS")
    )
    return (
        part.join(offers, F.col("p.p_partkey") == F.col("ps_partkey"))
        .where(F.col("ps_supplycost") == cheapest.scalar())
        .select("s_acctbal", "s_name", "n_name", "p.p_partkey", "p_mfgr", "s_address", "s_phone", "s_comment")
        .orderBy(F.col("s_acctbal").desc(), "n_name", "s_name", "p_partkey")
        .limit(100)
    )


def q3(spark: SparkSession) -> DataFrame:
    customer = spark.table("customer").where(F.col("c_mktsegment") == "BUILDING")
    orders = spark.table("orders").where(F.col("o_orderdate") < _date("1995-03-15"))
    lineitem = spark.table("lineitem").where(F.col("l_shipdate") > _date("1995-03-15"))
    return (
        customer.join(orders, F.col("c_custkey") == F.col("o_custkey"))
        .join(lineitem, F.col("l_orderkey") == F.col("o_orderkey"))
        .groupBy("l_orderkey", "o_orderdate", "o_shippriority")
        .agg(F.sum(_volume()).alias("revenue"))
        .select("l_orderkey", "revenue", "o_orderdate", "o_shippriority")
        .orderBy(F.col("revenue").desc(), "o_orderdate")
        .limit(10)
    )


def q4(spark: SparkSession) -> DataFrame:
    orders = spark.table("orders").where(
        (F.col("o_orderdate") >= _date("1993-07-01")) & (F.col("o_orderdate") < F.add_months(_date("1993-07-01"), 3))
    )
    late = spark.table("lineitem").where(F.col("l_commitdate") < F.col("l_receiptdate"))
    return (
        orders.join(late, F.col("o_orderkey") == F.col("l_orderkey"), "left_semi")
        .groupBy("o_orderpriority")
        .agg(F.count(F.lit(1)).alias("order_count"))
        .orderBy("o_orderpriority")
    )


def q5(spark: SparkSession) -> DataFrame:
    asia = spark.table("region").where(F.col("r_name") == "ASIA")
    orders = spark.table("orders").where(
        (F.col("o_orderdate") >= _date("1994-01-01")) & (F.col("o_orderdate") < _date("1995-01-01"))
    )
    return (
        spark.table("customer")
        .join(orders, F.col("c_custkey") == F.col("o_custkey"))
        .join(spark.table("lineitem"), F.col("l_orderkey") == F.col("o_orderkey"))
        .join(
            spark.table("supplier"),
            (F.col("l_suppkey") == F.col("s_suppkey")) & (F.col("c_nationkey") == F.col("s_nationkey")),
        )
        .join(spark.table("nation"), F.col("s_nationkey") == F.col("n_nationkey"))
        .join(asia, F.col("n_regionkey") == F.col("r_regionkey"))
        .groupBy("n_name")
        .agg(F.sum(_volume()).alias("revenue"))
        .orderBy(F.col("revenue").desc())
    )


def q6(spark: SparkSession) -> DataFrame:
    return (
        spark.table("lineitem")
        .where(
            (F.col("l_shipdate") >= _date("1994-01-01"))
            & (F.col("l_shipdate") < _date("1995-01-01"))
            & F.col("l_discount").between(_dec("0.06") - _dec("0.01"), _dec("0.06") + _dec("0.01"))
            & (F.col("l_quantity") < 24)
        )
        .agg(F.sum(F.col("l_extendedprice") * F.col("l_discount")).alias("revenue"))
    )


def q7(spark: SparkSession) -> DataFrame:
    n1 = spark.table("nation").select(F.col("n_nationkey").alias("n1_key"), F.col("n_name").alias("supp_nation"))
    n2 = spark.table("nation").select(F.col("n_nationkey").alias("n2_key"), F.col("n_name").alias("cust_nation"))
    lineitem = spark.table("lineitem").where(F.col("l_shipdate").between(_date("1995-01-01"), _date("1996-12-31")))
    pair = ((F.col("supp_nation") == "FRANCE") & (F.col("cust_nation") == "GERMANY")) | (
        (F.col("supp_nation") == "GERMANY") & (F.col("cust_nation") == "FRANCE")
    )
    return (
        spark.table("supplier")
        .join(lineitem, F.col("s_suppkey") == F.col("l_suppkey"))
        .join(spark.table("orders"), F.col("o_orderkey") == F.col("l_orderkey"))
        .join(spark.table("customer"), F.col("c_custkey") == F.col("o_custkey"))
        .join(n1, F.col("s_nationkey") == F.col("n1_key"))
        .join(n2, F.col("c_nationkey") == F.col("n2_key"))
        .where(pair)
        .select("supp_nation", "cust_nation", F.year("l_shipdate").alias("l_year"), _volume().alias("volume"))
        .groupBy("supp_nation", "cust_nation", "l_year")
        .agg(F.sum("volume").alias("revenue"))
        .orderBy("supp_nation", "cust_nation", "l_year")
    )


def q8(spark: SparkSession) -> DataFrame:
    n1 = spark.table("nation").select(F.col("n_nationkey").alias("n1_key"), F.col("n_regionkey").alias("n1_region"))
    n2 = spark.table("nation").select(F.col("n_nationkey").alias("n2_key"), F.col("n_name").alias("nation"))
    america = spark.table("region").where(F.col("r_name") == "AMERICA")
    part = spark.table("part").where(F.col("p_type") == "ECONOMY ANODIZED STEEL")
    orders = spark.table("orders").where(F.col("o_orderdate").between(_date("1995-01-01"), _date("1996-12-31")))
    all_nations = (
        part.join(spark.table("lineitem"), F.col("p_partkey") == F.col("l_partkey"))
        .join(spark.table("supplier"), F.col("s_suppkey") == F.col("l_suppkey"))
        .join(orders, F.col("l_orderkey") == F.col("o_orderkey"))
        .join(spark.table("customer"), F.col("o_custkey") == F.col("c_custkey"))
        .join(n1, F.col("c_nationkey") == F.col("n1_key"))
        .join(america, F.col("n1_region") == F.col("r_regionkey"))
        .join(n2, F.col("s_nationkey") == F.col("n2_key"))
        .select(F.year("o_orderdate").alias("o_year"), _volume().alias("volume"), "nation")
    )
    brazil = F.when(F.col("nation") == "BRAZIL", F.col("volume")).otherwise(0)
    return (
        all_nations.groupBy("o_year")
        .agg((F.sum(brazil) / F.sum("volume")).alias("mkt_share"))
        .orderBy("o_year")
    )


def q9(spark: SparkSession) -> DataFrame:
    green = spark.table("part").where(F.col("p_name").contains("green"))
    profit = (
        spark.table("lineitem")
        .join(green, F.col("p_partkey") == F.col("l_partkey"))
        .join(spark.table("supplier"), F.col("s_suppkey") == F.col("l_suppkey"))
        .join(
            spark.table("partsupp"),
            (F.col("ps_suppkey") == F.col("l_suppkey")) & (F.col("ps_partkey") == F.col("l_partkey")),
        )
        .join(spark.table("orders"), F.col("o_orderkey") == F.col("l_orderkey"))
        .join(spark.table("nation"), F.col("s_nationkey") == F.col("n_nationkey"))
        .select(
            F.col("n_name").alias("nation"),
            F.year("o_orderdate").alias("o_year"),
            (_volume() - F.col("ps_supplycost") * F.col("l_quantity")).alias("amount"),
        )
    )
    return (
        profit.groupBy("nation", "o_year")
        .agg(F.sum("amount").alias("sum_profit"))
        .orderBy("nation", F.col("o_year").desc())
    )


def q10(spark: SparkSession) -> DataFrame:
    orders = spark.table("orders").where(
        (F.col("o_orderdate") >= _date("1993-10-01")) & (F.col("o_orderdate") < F.add_months(_date("1993-10-01"), 3))
    )
    returned = spark.table("lineitem").where(F.col("l_returnflag") == "R")
    return (
        spark.table("customer")
        .join(orders, F.col("c_custkey") == F.col("o_custkey"))
        .join(returned, F.col("l_orderkey") == F.col("o_orderkey"))
        .join(spark.table("nation"), F.col("c_nationkey") == F.col("n_nationkey"))
        .groupBy("c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment")
        .agg(F.sum(_volume()).alias("revenue"))
        .select("c_custkey", "c_name", "revenue", "c_acctbal", "n_name", "c_address", "c_phone", "c_comment")
        .orderBy(F.col("revenue").desc())
        .limit(20)
    )


def q11(spark: SparkSession) -> DataFrame:
    german = (
        spark.table("partsupp")
        .join(spark.table("supplier"), F.col("ps_suppkey") == F.col("s_suppkey"))
        .join(spark.table("nation").where(F.col("n_name") == "GERMANY"), F.col("s_nationkey") == F.col("n_nationkey"))
        .select("ps_partkey", (F.col("ps_supplycost") * F.col("ps_availqty")).alias("v"))
    )
    threshold = german.agg((F.sum("v") * _dec("0.0001")).alias("threshold"))
    return (
        german.groupBy("ps_partkey")
        .agg(F.sum("v").alias("value"))
        .crossJoin(threshold)
        .where(F.col("value") > F.col("threshold"))
        .select("ps_partkey", "value")
        .orderBy(F.col("value").desc())
    )


def q12(spark: SparkSession) -> DataFrame:
    lineitem = spark.table("lineitem").where(
        F.col("l_shipmode").isin("MAIL", "SHIP")
        & (F.col("l_commitdate") < F.col("l_receiptdate"))
        & (F.col("l_shipdate") < F.col("l_commitdate"))
        & (F.col("l_receiptdate") >= _date("1994-01-01"))
        & (F.col("l_receiptdate") < _date("1995-01-01"))
    )
    urgent = (F.col("o_orderpriority") == "1-URGENT") | (F.col("o_orderpriority") == "2-HIGH")
    not_urgent = (F.col("o_orderpriority") != "1-URGENT") & (F.col("o_orderpriority") != "2-HIGH")
    return (
        spark.table("orders")
        .join(lineitem, F.col("o_orderkey") == F.col("l_orderkey"))
        .groupBy("l_shipmode")
        .agg(
            F.sum(F.when(urgent, 1).otherwise(0)).alias("high_line_count"),
            F.sum(F.when(not_urgent, 1).otherwise(0)).alias("low_line_count"),
        )
        .orderBy("l_shipmode")
    )


def q13(spark: SparkSession) -> DataFrame:
    c_orders = (
        spark.table("customer")
        .join(
            spark.table("orders"),
            (F.col("c_custkey") == F.col("o_custkey")) & ~F.col("o_comment").like("%special%requests%"),
            "left",
        )
        .groupBy("c_custkey")
        .agg(F.count("o_orderkey").alias("c_count"))
    )
    return (
        c_orders.groupBy("c_count")
        .agg(F.count(F.lit(1)).alias("custdist"))
        .orderBy(F.col("custdist").desc(), F.col("c_count").desc())
    )


def q14(spark: SparkSession) -> DataFrame:
    lineitem = spark.table("lineitem").where(
        (F.col("l_shipdate") >= _date("1995-09-01")) & (F.col("l_shipdate") < F.add_months(_date("1995-09-01"), 1))
    )
    promo = F.when(F.col("p_type").like("PROMO%"), _volume()).otherwise(0)
    return lineitem.join(spark.table("part"), F.col("l_partkey") == F.col("p_partkey")).agg(
        (_dec("100.00") * F.sum(promo) / F.sum(_volume())).alias("promo_revenue")
    )


def q15(spark: SparkSession) -> DataFrame:
    revenue0 = (
        spark.table("lineitem")
        .where((F.col("l_shipdate") >= _date("1996-01-01")) & (F.col("l_shipdate") < _date("1996-04-01")))
        .groupBy(F.col("l_suppkey").alias("supplier_no"))
        .agg(F.sum(_volume()).alias("total_revenue"))
    )
    top = revenue0.agg(F.max("total_revenue")).scalar()
    return (
        spark.table("supplier")
        .join(revenue0, F.col("s_suppkey") == F.col("supplier_no"))
        .where(F.col("total_revenue") == top)
        .select("s_suppkey", "s_name", "s_address", "s_phone", "total_revenue")
        .orderBy("s_suppkey")
    )


def q16(spark: SparkSession) -> DataFrame:
    part = spark.table("part").where(
        (F.col("p_brand") != "Brand#45")
        & ~F.col("p_type").startswith("MEDIUM POLISHED")
        & F.col("p_size").isin(49, 14, 23, 45, 19, 3, 36, 9)
    )
    complaints = spark.table("supplier").where(F.col("s_comment").like("%Customer%Complaints%"))
    return (
        spark.table("partsupp")
        .join(part, F.col("p_partkey") == F.col("ps_partkey"))
        .join(complaints, F.col("ps_suppkey") == F.col("s_suppkey"), "left_anti")
        .groupBy("p_brand", "p_type", "p_size")
        .agg(F.countDistinct("ps_suppkey").alias("supplier_cnt"))
        .orderBy(F.col("supplier_cnt").desc(), "p_brand", "p_type", "p_size")
    )


def q17(spark: SparkSession) -> DataFrame:
    part = spark.table("part").where((F.col("p_brand") == "Brand#23") & (F.col("p_container") == "MED BOX"))
    per_part = (
        spark.table("lineitem")
        .groupBy(F.col("l_partkey").alias("agg_partkey"))
        .agg((_dec("0.2") * F.avg("l_quantity")).alias("small_qty"))
    )
    return (
        spark.table("lineitem")
        .join(part, F.col("p_partkey") == F.col("l_partkey"))
        .join(per_part, F.col("agg_partkey") == F.col("p_partkey"))
        .where(F.col("l_quantity") < F.col("small_qty"))
        .agg((F.sum("l_extendedprice") / _dec("7.0")).alias("avg_yearly"))
    )


def q18(spark: SparkSession) -> DataFrame:
    big = (
        spark.table("lineitem")
        .groupBy(F.col("l_orderkey").alias("big_orderkey"))
        .agg(F.sum("l_quantity").alias("q"))
        .where(F.col("q") > 300)
    )
    return (
        spark.table("customer")
        .join(spark.table("orders"), F.col("c_custkey") == F.col("o_custkey"))
        .join(big, F.col("o_orderkey") == F.col("big_orderkey"), "left_semi")
        .join(spark.table("lineitem"), F.col("o_orderkey") == F.col("l_orderkey"))
        .groupBy("c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice")
        .agg(F.sum("l_quantity").alias("sum(l_quantity)"))
        .orderBy(F.col("o_totalprice").desc(), "o_orderdate")
        .limit(100)
    )


def q19(spark: SparkSession) -> DataFrame:
    air = F.col("l_shipmode").isin("AIR", "AIR REG") & (F.col("l_shipinstruct") == "DELIVER IN PERSON")

    def branch(brand: str, containers: tuple[str, ...], qty: int, size: int) -> Column:
        return (
            (F.col("p_brand") == brand)
            & F.col("p_container").isin(*containers)
            & (F.col("l_quantity") >= qty)
            & (F.col("l_quantity") <= qty + 10)
            & F.col("p_size").between(1, size)
            & air
        )

    pick = (
        branch("Brand#12", ("SM CASE", "SM BOX", "SM PACK", "SM PKG"), 1, 5)
        | branch("Brand#23", ("MED BAG", "MED BOX", "MED PKG", "MED PACK"), 10, 10)
        | branch("Brand#34", ("LG CASE", "LG BOX", "LG PACK", "LG PKG"), 20, 15)
    )
    return (
        spark.table("lineitem")
        .join(spark.table("part"), F.col("p_partkey") == F.col("l_partkey"))
        .where(pick)
        .agg(F.sum(_volume()).alias("revenue"))
    )


def q20(spark: SparkSession) -> DataFrame:
    forest = spark.table("part").where(F.col("p_name").startswith("forest"))
    shipped = (
        spark.table("lineitem")
        .where((F.col("l_shipdate") >= _date("1994-01-01")) & (F.col("l_shipdate") < _date("1995-01-01")))
        .groupBy("l_partkey", "l_suppkey")
        .agg((_dec("0.5") * F.sum("l_quantity")).alias("half_qty"))
    )
    candidates = (
        spark.table("partsupp")
        .join(forest, F.col("ps_partkey") == F.col("p_partkey"), "left_semi")
        .join(shipped, (F.col("l_partkey") == F.col("ps_partkey")) & (F.col("l_suppkey") == F.col("ps_suppkey")))
        .where(F.col("ps_availqty") > F.col("half_qty"))
    )
    return (
        spark.table("supplier")
        .join(candidates, F.col("s_suppkey") == F.col("ps_suppkey"), "left_semi")
        .join(spark.table("nation").where(F.col("n_name") == "CANADA"), F.col("s_nationkey") == F.col("n_nationkey"))
        .select("s_name", "s_address")
        .orderBy("s_name")
    )


def q21(spark: SparkSession) -> DataFrame:
    l1 = spark.table("lineitem").alias("l1").where(F.col("l1.l_receiptdate") > F.col("l1.l_commitdate"))
    l2 = spark.table("lineitem").alias("l2")
    l3 = spark.table("lineitem").alias("l3").where(F.col("l3.l_receiptdate") > F.col("l3.l_commitdate"))

    def same_order_other_supplier(other: str) -> Column:
        return (F.col(f"{other}.l_orderkey") == F.col("l1.l_orderkey")) & (
            F.col(f"{other}.l_suppkey") != F.col("l1.l_suppkey")
        )

    waiting = l1.join(l2, same_order_other_supplier("l2"), "left_semi").join(
        l3, same_order_other_supplier("l3"), "left_anti"
    )
    return (
        spark.table("supplier")
        .join(waiting, F.col("s_suppkey") == F.col("l1.l_suppkey"))
        .join(spark.table("orders").where(F.col("o_orderstatus") == "F"), F.col("o_orderkey") == F.col("l1.l_orderkey"))
        .join(spark.table("nation").where(F.col("n_name") == "SAUDI ARABIA"), F.col("s_nationkey") == F.col("n_nationkey"))
        .groupBy("s_name")
        .agg(F.count(F.lit(1)).alias("numwait"))
        .orderBy(F.col("numwait").desc(), "s_name")
        .limit(100)
    )


def q22(spark: SparkSession) -> DataFrame:
    codes = ("13", "31", "23", "29", "30", "18", "17")
    customer = spark.table("customer")
    average = (
        customer.where((F.col("c_acctbal") > _dec("0.00")) & F.substring("c_phone", 1, 2).isin(*codes))
        .agg(F.avg("c_acctbal"))
        .scalar()
    )
    custsale = (
        customer.where(F.substring("c_phone", 1, 2).isin(*codes) & (F.col("c_acctbal") > average))
        .join(spark.table("orders"), F.col("o_custkey") == F.col("c_custkey"), "left_anti")
        .select(F.substring("c_phone", 1, 2).alias("cntrycode"), "c_acctbal")
    )
    return (
        custsale.groupBy("cntrycode")
        .agg(F.count(F.lit(1)).alias("numcust"), F.sum("c_acctbal").alias("totacctbal"))
        .orderBy("cntrycode")
    )


DF: dict[int, Callable[[SparkSession], DataFrame]] = {
    1: q1, 2: q2, 3: q3, 4: q4, 5: q5, 6: q6, 7: q7, 8: q8, 9: q9, 10: q10, 11: q11,
    12: q12, 13: q13, 14: q14, 15: q15, 16: q16, 17: q17, 18: q18, 19: q19, 20: q20,
    21: q21, 22: q22,
}
