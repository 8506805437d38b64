"""Several Python threads on one SparkSession, as a notebook server or a web app runs them:
each thread's captures and traces give that job's own lineage, the same as when run one
after another; Defer captures overlap; one lineage (still being built, or loaded from a
store) is traced from many threads at once.

The serial answers are checked against an oracle computed with pandas from the in-code
tables; the threaded answers against the serial ones. Thread counts and rounds are small:
the module takes about a minute on two cores."""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ember
from ember.query.lineage import Lineage

THREADS = 4
REGIONS = ["n", "s", "e"]


def orders() -> pd.DataFrame:
    oid = np.arange(40)
    return pd.DataFrame({"oid": oid, "cid": oid % 7, "amount": (oid * 13) % 17})


def customers() -> pd.DataFrame:
    cid = np.arange(7)
    return pd.DataFrame({"cid": cid, "name": [f"c{i}" for i in cid], "region": [REGIONS[i % 3] for i in cid]})


def items() -> pd.DataFrame:
    iid = np.arange(90)
    return pd.DataFrame({"iid": iid, "oid": iid % 40, "qty": iid % 5})


# --- the jobs, and their lineage by the oracle: per output row (in the job's order), per source the rids


def by_region() -> list[dict[str, list[int]]]:
    o, c = orders(), customers()
    region = dict(zip(c.cid, c.region, strict=True))
    return [
        {"orders": [i for i in o.index if region[o.cid[i]] == r], "customers": [i for i in c.index if c.region[i] == r]}
        for r in sorted(REGIONS)
    ]


def by_name() -> list[dict[str, list[int]]]:
    o, c, it = orders(), customers(), items()
    cid_of_order = dict(zip(o.oid, o.cid, strict=True))
    out = []
    for cid in sorted(c.cid, key=lambda x: c.name[x]):
        rows = [i for i in it.index if cid_of_order[it.oid[i]] == cid]
        out.append({"items": rows, "orders": sorted({int(it.oid[i]) for i in rows}), "customers": [int(cid)]})
    return out


def big_orders() -> list[dict[str, list[int]]]:
    o = orders()
    return [{"orders": [int(i)]} for i in o.index if o.amount[i] > 8]


def buyers() -> list[dict[str, list[int]]]:
    o, c = orders(), customers()
    return [
        {"customers": [int(i)], "orders": [int(j) for j in o.index if o.cid[j] == i and o.amount[j] > 12]}
        for i in c.index
        if ((o.cid == i) & (o.amount > 12)).any()
    ]


ORACLES: dict[str, Callable[[], list[dict[str, list[int]]]]] = {
    "by_region": by_region, "by_name": by_name, "big_orders": big_orders, "buyers": buyers,
}  # fmt: skip


@pytest.fixture(scope="module")
def jobs(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Callable[[], DataFrame]]:
    root = tmp_path_factory.mktemp("threads")
    pq.write_table(pa.Table.from_pandas(orders(), preserve_index=False), root / "orders.parquet", row_group_size=8)
    customers().to_csv(root / "customers.csv", index=False)
    o = spark.read.parquet(str(root / "orders.parquet"))
    c = spark.read.csv(str(root / "customers.csv"), header=True, schema="cid long, name string, region string")
    it = ember.source(spark.createDataFrame(items()), "items")
    return {
        "by_region": lambda: o.join(c, "cid").groupBy("region").agg(F.sum("amount").alias("total")).orderBy("region"),
        "by_name": lambda: it.join(o, "oid").join(c, "cid").groupBy("name").agg(F.sum("qty").alias("q")).orderBy("name"),
        "big_orders": lambda: o.filter("amount > 8").select("oid", "amount").orderBy("oid"),
        "buyers": lambda: c.join(o.filter("amount > 12"), "cid", "left_semi").orderBy("cid"),
    }


Answers = dict[str, Any]


def answers(lin: Any, rows: bool = False) -> Answers:
    """Every output row traced backward, every source row forward (and the rows, if asked)."""
    out: Answers = {"output": lin.output().drop_columns(["ember_oid"]).to_pylist()}
    for oid in range(lin.output().num_rows):
        t = lin.backward(oids=[oid])
        out[f"back {oid}"] = {s: t.ids(s).tolist() for s in t.sources}
        if rows:
            out[f"rows {oid}"] = {s: t.rows(s).to_pylist() for s in t.sources}
    n = {"orders": 40, "customers": 7, "items": 90}
    for s in lin.sources:
        for rid in range(0, n[s], 3):
            out[f"fwd {s} {rid}"] = lin.forward(s, ids=[rid]).ids().tolist()
    return out


@pytest.fixture(scope="module")
def serial(jobs: dict[str, Callable[[], DataFrame]]) -> dict[str, Answers]:
    """Each job captured and traced alone, on the main thread, checked against the oracle."""
    found = {}
    for name, make in jobs.items():
        lin = ember.capture(make(), strategy="inject")
        got = answers(lin)
        expected = ORACLES[name]()
        assert len(expected) == lin.output().num_rows, name
        for oid, lineage in enumerate(expected):
            assert got[f"back {oid}"] == {s: ids for s, ids in lineage.items() if ids}, (name, oid)
        found[name] = got
    return found


def in_threads(calls: list[Callable[[], Any]], threads: int = THREADS) -> list[Any]:
    """Runs the calls on a pool of threads, all released at once; their results in order."""
    start = threading.Barrier(min(threads, len(calls)))

    def released(call: Callable[[], Any]) -> Any:
        with contextlib.suppress(threading.BrokenBarrierError):
            start.wait(timeout=60)
        return call()

    with ThreadPoolExecutor(threads) as pool:
        return [f.result() for f in [pool.submit(released, c) for c in calls]]


def test_captures_and_traces_on_many_threads_are_each_their_own(
    jobs: dict[str, Callable[[], DataFrame]], serial: dict[str, Answers]
) -> None:
    def run(name: str, strategy: str) -> tuple[str, Answers]:
        lin = ember.capture(jobs[name](), strategy=strategy)  # type: ignore[arg-type]
        return name, answers(lin)

    calls = [lambda n=n, s=s: run(n, s) for s in ("inject", "defer") for n in jobs]  # type: ignore[misc]
    for name, got in in_threads(calls):
        assert got == serial[name], name


def test_overlapping_defer_captures_traced_before_they_are_ready(
    jobs: dict[str, Callable[[], DataFrame]], serial: dict[str, Answers]
) -> None:
    started = in_threads([lambda n=n: (n, ember.capture(jobs[n](), strategy="defer")) for n in jobs for _ in range(2)])  # type: ignore[misc]
    assert all(lin.mode == "defer" for _, lin in started)
    traced = in_threads([lambda n=n, lin=lin: (n, answers(lin)) for n, lin in started], threads=len(started))  # type: ignore[misc]
    for name, got in traced:
        assert got == serial[name], name


def test_one_lineage_traced_from_many_threads(jobs: dict[str, Callable[[], DataFrame]], serial: dict[str, Answers]) -> None:
    lin = ember.capture(jobs["by_name"](), strategy="defer")  # traced while its background capture runs
    reference = answers(ember.capture(jobs["by_name"](), strategy="inject"), rows=True)
    results = in_threads([lambda: answers(lin, rows=True)] * 8, threads=8)
    assert all(r == reference for r in results)
    sql = "SELECT qty, count(*) AS n FROM items GROUP BY qty ORDER BY qty"
    wheres = in_threads(
        [lambda: (lin.backward(where="q > 40").ids("items").tolist(),
                  lin.forward("customers", where="region = 'n'").ids().tolist(),
                  lin.backward(oids=[0]).query(sql).output().to_pylist())] * 6,
        threads=6,
    )  # fmt: skip
    assert all(w == wheres[0] for w in wheres)
    big = {o for o, row in enumerate(reference["output"]) if row["q"] > 40}
    assert wheres[0][0] == sorted({i for o in big for i in serial["by_name"][f"back {o}"]["items"]})


def test_a_loaded_store_is_traced_with_rows_from_threads_without_a_session(
    jobs: dict[str, Callable[[], DataFrame]], serial: dict[str, Answers], tmp_path: Path
) -> None:
    """A store loaded without a session reads its CSV source's rows on Spark at the first
    fetch: on a worker thread too, which has no active session of its own."""
    ember.capture(jobs["by_region"]()).save(str(tmp_path / "s"))
    reference = answers(ember.load(str(tmp_path / "s")), rows=True)
    assert {k: v for k, v in reference.items() if not k.startswith("rows")} == serial["by_region"]
    loaded = ember.load(str(tmp_path / "s"))  # no spark: none counted yet
    results = in_threads([lambda: answers(loaded, rows=True)] * THREADS)
    assert all(r == reference for r in results)


def test_inferred_lineage_traced_from_many_threads(jobs: dict[str, Callable[[], DataFrame]], serial: dict[str, Answers]) -> None:
    """Inferred lineages whose traces run Spark jobs (a restricted re-run) and in-process ones."""
    lins = in_threads([lambda n=n: ember.infer(jobs[n]()) for n in ("by_region", "buyers")])  # type: ignore[misc]
    for lin, name in zip(lins, ("by_region", "buyers"), strict=True):
        results = in_threads([lambda lin=lin: answers(lin)] * THREADS)  # type: ignore[misc]
        assert all(r == serial[name] for r in results), (name, lin.exact_path)


def test_a_lineage_settling_while_threads_ask_if_it_is_ready() -> None:
    """`ready`, `wait` and traces read the state a deferred capture settles: asked from many
    threads while it settles, none sees it half settled."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        for _ in range(30):
            job: Future[Any] = Future()
            lin = Lineage(pa.table({"x": [1]}), job, [], "defer", "Scan t")
            stop = threading.Event()
            errors: list[BaseException] = []

            def ask(lin: Lineage = lin, stop: threading.Event = stop, errors: list[BaseException] = errors) -> None:
                try:
                    while not stop.is_set():
                        lin.wait(timeout=0)
                        if lin.ready:
                            assert lin.index_bytes == 7
                except BaseException as e:  # any error is the finding
                    errors.append(e)

            threads = [threading.Thread(target=ask) for _ in range(6)]
            for t in threads:
                t.start()
            job.set_result((SimpleNamespace(nbytes=7), [], ()))
            for _ in range(200):
                assert lin.index_bytes == 7
            stop.set()
            for t in threads:
                t.join()
            assert not errors, errors[:1]
    finally:
        sys.setswitchinterval(old)


@pytest.fixture(autouse=True)
def _no_leftover_threads() -> Iterator[None]:
    before = {t for t in threading.enumerate() if not t.name.startswith("ember-")}
    yield
    left = {t for t in threading.enumerate() if not t.name.startswith("ember-")} - before
    assert not {t for t in left if t.is_alive() and not t.daemon}, left
