"""Notebook rendering: counts per source and the first rows, for every lineage object."""

from __future__ import annotations

from pyspark.sql import SparkSession

import ember


def test_lineage_and_traces_render_counts_and_first_rows(spark: SparkSession) -> None:
    src = spark.createDataFrame([(k % 3, f"r{k}") for k in range(9)], "g int, tag string")
    df = ember.source(src, "events").groupBy("g").count()
    lin = ember.capture(df)
    page = lin._repr_html_()
    assert "events" in page and "<table" in page and ">9<" in page
    trace = lin.backward(oids=[0])
    page = trace._repr_html_()
    assert ">3<" in page and "r" in page and "first" not in page  # 3 rows: all shown
    fwd = lin.forward("events", ids=[0])._repr_html_()
    assert "forward" in fwd and ">1<" in fwd
    lazy = ember.infer(df, exact=False)
    assert "superset" in lazy.backward(oids=[0])._repr_html_()
    assert "inferred" in lazy._repr_html_()
