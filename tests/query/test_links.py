"""A three-job pipeline linked by its files (`query.links`): raw CSV → cleaned Parquet
partitioned by day (an overwrite, an append of a second batch, an overwrite of one
partition) → a report, traced from the report to raw rows and from raw rows to the
report, in Python and with `ember run` + `ember trace`.

The oracle is pandas over the raw CSV files: which raw rows pass the cleaning, which of
them the partition overwrite replaced, and which report row each surviving one feeds.
"""

from __future__ import annotations

import gc
import json
import warnings
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ember
from ember.cli import main
from ember.query import links
from ember.query.links import Link, _shift

DAY1 = pd.DataFrame({"id": range(30), "dt": [f"d{i % 3 + 1}" for i in range(30)], "amount": [(i * 37) % 23 - 5 for i in range(30)]})
DAY2 = pd.DataFrame({"id": range(100, 120), "dt": [f"d{i % 2 + 3}" for i in range(20)], "amount": [(i * 11) % 17 - 4 for i in range(20)]})
FIX = pd.DataFrame({"id": range(200, 210), "dt": ["d2"] * 10, "amount": [i - 3 for i in range(10)]})
RAW = {"day1": DAY1, "day2": DAY2, "fix": FIX}


def clean(df: DataFrame) -> DataFrame:
    return df.where("amount > 0").select("id", "dt", (F.col("amount") * 2).alias("amt"))


def report(spark: SparkSession, folder: Path) -> DataFrame:
    return spark.read.parquet(str(folder)).groupBy("dt").agg(F.sum("amt").alias("total"), F.count("*").alias("n")).orderBy("dt")


def survivors() -> dict[str, pd.DataFrame]:
    """The oracle: per raw file, its rows (index = ember_rid) that the cleaned data holds."""
    kept = {name: df[df.amount > 0] for name, df in RAW.items()}
    kept["day1"] = kept["day1"][kept["day1"].dt != "d2"]  # the fix replaced partition d2
    return kept


def backward_oracle(day: str) -> dict[str, list[int]]:
    return {name: df.index[df.dt == day].tolist() for name, df in survivors().items()}


def forward_oracle(name: str, rid: int, days: list[str]) -> list[int]:
    kept = survivors()[name]
    return [days.index(kept.dt[rid])] if rid in kept.index else []


@pytest.fixture(scope="module")
def raw(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("raw")
    for name, df in RAW.items():
        df.to_csv(folder / f"{name}.csv", index=False)
    return folder


def read(spark: SparkSession, raw: Path, name: str) -> DataFrame:
    return spark.read.option("header", True).schema("id int, dt string, amount int").csv(str(raw / f"{name}.csv"))


@pytest.fixture(scope="module")
def pipeline(spark: SparkSession, raw: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[ember.Lineage]]]:
    out = tmp_path_factory.mktemp("pipeline") / "clean"
    a = ember.capture(clean(read(spark, raw, "day1")), write=lambda w: w.partitionBy("dt").mode("overwrite").parquet(str(out)))
    b = ember.capture(clean(read(spark, raw, "day2")), write=lambda w: w.partitionBy("dt").mode("append").parquet(str(out)))
    c = ember.capture(
        clean(read(spark, raw, "fix")),
        write=lambda w: w.partitionBy("dt").mode("overwrite").option("partitionOverwriteMode", "dynamic").parquet(str(out)),
    )
    d = ember.capture(report(spark, out))
    yield out, [a, b, c, d]


def test_backward_from_the_report_to_raw_rows(pipeline: tuple[Path, list[ember.Lineage]]) -> None:
    _, (*_, d) = pipeline
    days = d.output().column("dt").to_pylist()
    assert days == ["d1", "d2", "d3", "d4"]
    for oid, day in enumerate(days):
        t = d.backward(oids=[oid])
        want = {name: rids for name, rids in backward_oracle(day).items() if rids}
        assert set(t.sources) == {"clean", *want}, day  # the sources the trace reached
        for name, rids in want.items():
            assert t.ids(name).tolist() == rids, (day, name)
        assert t.rows("day1").column("id").to_pylist() == DAY1.id[backward_oracle(day)["day1"]].tolist()


def test_forward_from_raw_rows_to_the_report(pipeline: tuple[Path, list[ember.Lineage]]) -> None:
    _, (*_, d) = pipeline
    days = d.output().column("dt").to_pylist()
    for name, df in RAW.items():
        for rid in range(len(df)):
            assert d.forward(name, ids=[rid]).ids().tolist() == forward_oracle(name, rid, days), (name, rid)


def test_an_append_after_capture_keeps_rids_and_a_rewrite_is_stale(
    spark: SparkSession, raw: Path, pipeline: tuple[Path, list[ember.Lineage]]
) -> None:
    out, (*_, d) = pipeline
    before = {oid: d.backward(oids=[oid]).ids("clean").tolist() for oid in range(4)}
    rows = d.backward(oids=[0]).rows("clean")
    ember.capture(clean(read(spark, raw, "day2")), write=lambda w: w.partitionBy("dt").mode("append").parquet(str(out)))
    assert {oid: d.backward(oids=[oid]).ids("clean").tolist() for oid in range(4)} == before
    assert d.backward(oids=[0]).rows("clean").equals(rows), "rows are read from the files as captured"
    ember.capture(
        clean(read(spark, raw, "day1")).where("dt = 'd1'"),
        write=lambda w: w.partitionBy("dt").mode("overwrite").option("partitionOverwriteMode", "dynamic").parquet(str(out)),
    )
    with pytest.raises(ember.StaleSourceError):
        d.backward(oids=[0]).rows("clean")  # partition d1's files were replaced since the capture
    assert d.backward(oids=[0]).ids("day1").tolist() == backward_oracle("d1")["day1"], "the ids are as captured"


def test_saved_stores_link_through_a_catalog(
    pipeline: tuple[Path, list[ember.Lineage]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, lins = pipeline
    for name, lin in zip("abcd", lins, strict=True):
        lin.save(str(tmp_path / "stores" / name))
    monkeypatch.setattr(links, "_process", {})  # as in another process: only the stores are there
    d = ember.load(str(tmp_path / "stores" / "d"))
    assert d.backward(oids=[0]).sources == ["clean"], "no writer known yet"
    (tmp_path / "empty").mkdir()
    with pytest.warns(UserWarning, match="links nothing"):
        d.backward(oids=[0], through=str(tmp_path / "empty"))
    catalog = ember.catalog(tmp_path / "stores")
    assert len(catalog.stores) == 3
    assert d.backward(oids=[1], through=catalog).ids("fix").tolist() == backward_oracle("d2")["fix"]
    monkeypatch.setenv("EMBER_CATALOG", str(tmp_path / "stores"))
    assert d.forward("day2", ids=[1]).ids().tolist() == forward_oracle("day2", 1, ["d1", "d2", "d3", "d4"])


def test_shift_maps_runs_both_ways() -> None:
    link = Link(None, np.array([0, 5]), np.array([10, 0]), np.array([3, 2]))  # type: ignore[arg-type]
    assert link.oids(np.array([0, 2, 3, 5, 6, 7])).tolist() == [0, 1, 10, 12]
    assert link.rids(np.array([0, 1, 10, 12, 13])).tolist() == [0, 2, 5, 6]
    assert _shift(np.array([], np.int64), np.array([0]), np.array([0]), np.array([1])).tolist() == []


JOBS = {
    "clean_a.py": "out = clean(read('day1')); out.write.partitionBy('dt').mode('overwrite').parquet(CLEAN)",
    "clean_b.py": "clean(read('day2')).write.mode('append').partitionBy('dt').parquet(CLEAN)",
    "clean_c.py": "w = clean(read('fix')).write.mode('overwrite')\nw.option('partitionOverwriteMode', 'dynamic').partitionBy('dt').parquet(CLEAN)",
    "report.py": "spark.read.parquet(CLEAN).groupBy('dt').agg(F.sum('amt').alias('total')).orderBy('dt').collect()",
}
PRELUDE = """\
import sys
from pyspark.sql import SparkSession, functions as F
spark = SparkSession.builder.getOrCreate()
RAW, CLEAN = sys.argv[1], sys.argv[2]
def read(name):
    return spark.read.option("header", True).schema("id int, dt string, amount int").csv(f"{RAW}/{name}.csv")
def clean(df):
    return df.where("amount > 0").select("id", "dt", (F.col("amount") * 2).alias("amt"))
"""


def test_ember_run_and_trace_follow_the_pipeline(
    spark: SparkSession, raw: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    runs, elsewhere = tmp_path / "runs", tmp_path / "elsewhere"
    for script, body in JOBS.items():
        (tmp_path / script).write_text(PRELUDE + body + "\n")
        store = (elsewhere if script == "report.py" else runs) / script.removesuffix(".py")
        assert main(["run", str(tmp_path / script), "--store", str(store), str(raw), str(tmp_path / "clean")]) == 0
    capsys.readouterr()
    gc.collect()
    monkeypatch.setattr(links, "_process", {})  # each `ember run` is a process of its own
    assert main(["ls", str(elsewhere / "report"), "--json"]) == 0
    entry = json.loads(capsys.readouterr().out)["entries"][0]["entry"]

    def trace(*args: str) -> dict[str, object]:
        code = main(["trace", str(elsewhere / "report"), entry, "--json", "--limit", "0", *args])
        out, err = capsys.readouterr()
        assert code == 0, err
        return {**json.loads(out), "err": err}

    alone = trace("--backward", "--oids", "1", "--ids-only")
    assert list(alone["sources"]) == ["clean"]  # type: ignore[call-overload]
    got = trace("--backward", "--oids", "1", "--ids-only", "--through", str(runs))
    want = {name: rids for name, rids in backward_oracle("d2").items() if rids}
    assert {n: s["ids"] for n, s in got["sources"].items()} == {"clean": alone["sources"]["clean"]["ids"], **want}  # type: ignore[index, union-attr]
    fix = trace("--backward", "--oids", "1", "--source", "fix", "--through", str(runs))
    assert [r["id"] for r in fix["sources"]["fix"]["rows"]] == FIX.id[backward_oracle("d2")["fix"]].tolist()  # type: ignore[index]
    forward = trace("--forward", "day2", "--ids", "2", "--through", str(runs))
    assert forward["oids"] == forward_oracle("day2", 2, ["d1", "d2", "d3", "d4"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nothing = trace("--backward", "--oids", "0", "--ids-only", "--through", str(raw))
    assert "--through links nothing" in str(nothing["err"])
    (runs / "report").mkdir()  # the report's store beside the others: found with no --through
    for item in (elsewhere / "report").iterdir():
        item.rename(runs / "report" / item.name)
    code = main(["trace", str(runs / "report"), entry, "--json", "--backward", "--oids", "3", "--ids-only"])
    assert code == 0 and json.loads(capsys.readouterr().out)["sources"]["day2"]["ids"] == backward_oracle("d4")["day2"]
