"""TPC-H queries written with the DataFrame API only (same output columns as the SQL)."""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F


def _rev() -> Column:
    return F.col("l_extendedprice") * (1 - F.col("l_discount"))


def q1(spark: SparkSession) -> DataFrame:
    li = spark.table("lineitem")
    return (
        li.filter(F.col("l_shipdate") <= F.date_sub(F.lit("1998-12-01").cast("date"), 90))
        .groupBy("l_returnflag", "l_linestatus")
        .agg(
            F.sum("l_quantity").alias("sum_qty"),
            F.sum(_rev()).alias("sum_disc_price"),
            F.avg("l_discount").alias("avg_disc"),
            F.count(F.lit(1)).alias("count_order"),
        )
        .orderBy("l_returnflag", "l_linestatus")
    )


def q3(spark: SparkSession) -> DataFrame:
    c = spark.table("customer").filter(F.col("c_mktsegment") == "BUILDING")
    o = spark.table("orders").filter(F.col("o_orderdate") < F.lit("1995-03-15").cast("date"))
    li = spark.table("lineitem").filter(F.col("l_shipdate") > F.lit("1995-03-15").cast("date"))
    return (
        c.join(o, c.c_custkey == o.o_custkey)
        .join(li, li.l_orderkey == o.o_orderkey)
        .groupBy("l_orderkey", "o_orderdate", "o_shippriority")
        .agg(F.sum(_rev()).alias("revenue"))
        .orderBy(F.col("revenue").desc(), "o_orderdate")
        .limit(10)
    )


def q4(spark: SparkSession) -> DataFrame:
    o = spark.table("orders").filter(
        (F.col("o_orderdate") >= F.lit("1993-07-01").cast("date"))
        & (F.col("o_orderdate") < F.lit("1993-10-01").cast("date"))
    )
    late = spark.table("lineitem").filter(F.col("l_commitdate") < F.col("l_receiptdate"))
    return (
        o.join(late, o.o_orderkey == late.l_orderkey, "left_semi")
        .groupBy("o_orderpriority")
        .agg(F.count(F.lit(1)).alias("order_count"))
        .orderBy("o_orderpriority")
    )


def q5(spark: SparkSession) -> DataFrame:
    r = spark.table("region").filter(F.col("r_name") == "ASIA")
    n = spark.table("nation")
    s = spark.table("supplier")
    c = spark.table("customer")
    o = spark.table("orders").filter(
        (F.col("o_orderdate") >= F.lit("1994-01-01").cast("date"))
        & (F.col("o_orderdate") < F.lit("1995-01-01").cast("date"))
    )
    li = spark.table("lineitem")
    return (
        r.join(n, n.n_regionkey == r.r_regionkey)
        .join(s, s.s_nationkey == n.n_nationkey)
        .join(c, c.c_nationkey == s.s_nationkey)
        .join(o, o.o_custkey == c.c_custkey)
        .join(li, (li.l_orderkey == o.o_orderkey) & (li.l_suppkey == s.s_suppkey))
        .groupBy("n_name")
        .agg(F.sum(_rev()).alias("revenue"))
        .orderBy(F.col("revenue").desc())
    )


def q6(spark: SparkSession) -> DataFrame:
    li = spark.table("lineitem")
    return li.filter(
        (F.col("l_shipdate") >= F.lit("1994-01-01").cast("date"))
        & (F.col("l_shipdate") < F.lit("1995-01-01").cast("date"))
        & F.col("l_discount").between(0.05, 0.07)
        & (F.col("l_quantity") < 24)
    ).agg(F.sum(F.col("l_extendedprice") * F.col("l_discount")).alias("revenue"))


def q10(spark: SparkSession) -> DataFrame:
    c = spark.table("customer")
    o = spark.table("orders").filter(
        (F.col("o_orderdate") >= F.lit("1993-10-01").cast("date"))
        & (F.col("o_orderdate") < F.lit("1994-01-01").cast("date"))
    )
    li = spark.table("lineitem").filter(F.col("l_returnflag") == "R")
    n = spark.table("nation")
    return (
        c.join(o, c.c_custkey == o.o_custkey)
        .join(li, li.l_orderkey == o.o_orderkey)
        .join(n, c.c_nationkey == n.n_nationkey)
        .groupBy("c_custkey", "c_name", "c_acctbal", "c_phone", "n_name", "c_address", "c_comment")
        .agg(F.sum(_rev()).alias("revenue"))
        .orderBy(F.col("revenue").desc())
        .limit(20)
    )


def q12(spark: SparkSession) -> DataFrame:
    o = spark.table("orders")
    li = spark.table("lineitem").filter(
        F.col("l_shipmode").isin("MAIL", "SHIP")
        & (F.col("l_commitdate") < F.col("l_receiptdate"))
        & (F.col("l_shipdate") < F.col("l_commitdate"))
        & (F.col("l_receiptdate") >= F.lit("1994-01-01").cast("date"))
        & (F.col("l_receiptdate") < F.lit("1995-01-01").cast("date"))
    )
    high = F.col("o_orderpriority").isin("1-URGENT", "2-HIGH")
    return (
        o.join(li, o.o_orderkey == li.l_orderkey)
        .groupBy("l_shipmode")
        .agg(
            F.sum(F.when(high, 1).otherwise(0)).alias("high_line_count"),
            F.sum(F.when(~high, 1).otherwise(0)).alias("low_line_count"),
        )
        .orderBy("l_shipmode")
    )


def q13(spark: SparkSession) -> DataFrame:
    c = spark.table("customer")
    o = spark.table("orders").filter(~F.col("o_comment").like("%special%requests%"))
    counts = c.join(o, c.c_custkey == o.o_custkey, "left").groupBy("c_custkey").agg(
        F.count("o_orderkey").alias("c_count")
    )
    return (
        counts.groupBy("c_count")
        .agg(F.count(F.lit(1)).alias("custdist"))
        .orderBy(F.col("custdist").desc(), F.col("c_count").desc())
    )


def q14(spark: SparkSession) -> DataFrame:
    li = spark.table("lineitem").filter(
        (F.col("l_shipdate") >= F.lit("1995-09-01").cast("date"))
        & (F.col("l_shipdate") < F.lit("1995-10-01").cast("date"))
    )
    p = spark.table("part")
    promo = F.when(F.col("p_type").startswith("PROMO"), _rev()).otherwise(0)
    return li.join(p, li.l_partkey == p.p_partkey).agg(
        (100.0 * F.sum(promo) / F.sum(_rev())).alias("promo_revenue")
    )


def q18(spark: SparkSession) -> DataFrame:
    li = spark.table("lineitem")
    big = li.groupBy("l_orderkey").agg(F.sum("l_quantity").alias("q")).filter(F.col("q") > 300)
    o = spark.table("orders")
    c = spark.table("customer")
    return (
        o.join(big, o.o_orderkey == big.l_orderkey, "left_semi")
        .join(c, c.c_custkey == o.o_custkey)
        .join(li, li.l_orderkey == o.o_orderkey)
        .groupBy("c_name", "c_custkey", "o_orderkey", "o_orderdate", "o_totalprice")
        .agg(F.sum("l_quantity").alias("sum_qty"))
        .orderBy(F.col("o_totalprice").desc(), "o_orderdate")
        .limit(100)
    )


def q22(spark: SparkSession) -> DataFrame:
    codes = ["13", "31", "23", "29", "30", "18", "17"]
    c = spark.table("customer").withColumn("cntrycode", F.substring("c_phone", 1, 2))
    avg_bal = c.filter((F.col("c_acctbal") > 0) & F.col("cntrycode").isin(codes)).agg(F.avg("c_acctbal"))
    o = spark.table("orders")
    picked = c.filter(F.col("cntrycode").isin(codes) & (F.col("c_acctbal") > avg_bal.scalar()))
    return (
        picked.join(o, picked.c_custkey == o.o_custkey, "left_anti")
        .groupBy("cntrycode")
        .agg(F.count(F.lit(1)).alias("numcust"), F.sum("c_acctbal").alias("totacctbal"))
        .orderBy("cntrycode")
    )


DF: dict[int, Callable[[SparkSession], DataFrame]] = {
    1: q1, 3: q3, 4: q4, 5: q5, 6: q6, 10: q10, 12: q12, 13: q13, 14: q14, 18: q18, 22: q22,
}
