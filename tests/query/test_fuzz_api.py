"""Fuzzing the public API's arguments: whatever a caller passes, ember answers exactly or
refuses in one line (an `EmberError`, or a `TypeError` / `ValueError` raised by ember's own
checks), never with a py4j, DuckDB or numpy traceback, and never with another answer.

One small job is captured, saved, loaded and inferred once for the module; every example
then calls its traces with generated arguments (ids of every shape and dtype, `where=`
text, source names, pages, SQL) and checks the answer against an oracle computed with
pandas from the in-code tables. Example counts come from the Hypothesis profile
(tests/conftest.py)."""

from __future__ import annotations

import json
import os
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

import ember
from ember.errors import EmberError, IdOutOfRangeError

EMBER = str(Path(ember.__file__).parent)
N_ORDERS, N_CUSTOMERS = 40, 7
REGIONS = ["n", "s", "e"]
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _orders() -> pd.DataFrame:
    oid = np.arange(N_ORDERS)
    return pd.DataFrame({"oid": oid, "cid": oid % N_CUSTOMERS, "amount": (oid * 13) % 17})


def _customers() -> pd.DataFrame:
    cid = np.arange(N_CUSTOMERS)
    return pd.DataFrame({"cid": cid, "name": [f"c{i}" for i in cid], "region": [REGIONS[i % 3] for i in cid]})


class Job:
    """The job's output and its lineage by the oracle: per output row, the rids of each source."""

    def __init__(self, output: pa.Table):
        orders, customers = _orders(), _customers()
        self.output = output.to_pandas()
        self.regions: list[str] = list(self.output["region"])
        region_of = dict(zip(customers["cid"], customers["region"], strict=True))
        self.back = {
            j: {
                "orders": [int(i) for i in orders.index if region_of[orders["cid"][i]] == r],
                "customers": [int(i) for i in customers.index if customers["region"][i] == r],
            }
            for j, r in enumerate(self.regions)
        }
        self.rows = {"orders": N_ORDERS, "customers": N_CUSTOMERS}

    def backward(self, oids: list[int]) -> dict[str, list[int]]:
        found: dict[str, set[int]] = {"orders": set(), "customers": set()}
        for o in oids:
            for s, ids in self.back[o].items():
                found[s] |= set(ids)
        return {s: sorted(ids) for s, ids in found.items()}

    def forward(self, source: str, rids: list[int]) -> list[int]:
        return sorted({o for o, srcs in self.back.items() for r in rids if r in srcs[source]})


@pytest.fixture(scope="module")
def job_df(spark: SparkSession, tmp_path_factory: pytest.TempPathFactory) -> DataFrame:
    path = tmp_path_factory.mktemp("fuzz") / "orders.parquet"
    pq.write_table(pa.Table.from_pandas(_orders(), preserve_index=False), path, row_group_size=8)
    orders = spark.read.parquet(str(path))
    customers = spark.createDataFrame(_customers())
    ember.source(customers, "customers")
    joined = orders.join(customers, "cid").groupBy("region").agg(F.sum("amount").alias("total"), F.count("*").alias("n"))
    return joined.orderBy("region")


@pytest.fixture(scope="module")
def captured(job_df: DataFrame) -> ember.Lineage:
    return ember.capture(job_df)


@pytest.fixture(scope="module")
def loaded(captured: ember.Lineage, tmp_path_factory: pytest.TempPathFactory) -> ember.Lineage:
    path = tmp_path_factory.mktemp("fuzz-store") / "store"
    captured.save(str(path))
    return ember.load(str(path))


@pytest.fixture(scope="module")
def inferred(job_df: DataFrame) -> ember.InferredLineage:
    lin = ember.infer(job_df)
    assert lin.exact_path == "predicates"  # traces stay in-process: cheap examples
    return lin


@pytest.fixture(scope="module")
def job(captured: ember.Lineage) -> Job:
    return Job(captured.output().drop_columns(["ember_oid"]))


# --- the spec: which arguments are ids, independently of ember's code ----------------------


class Bad(Exception):
    """What a call must raise: `kind` is "type" (TypeError, ValueError or EmberError) or
    "range" (IdOutOfRangeError)."""

    def __init__(self, kind: str):
        self.kind = kind


def expected_ids(value: Any, bound: int) -> list[int]:
    """The ids `value` names (sorted unique), or raises `Bad` saying how ember must refuse it."""
    if isinstance(value, str | bytes | bytearray):
        raise Bad("type")
    if isinstance(value, pa.Array | pa.ChunkedArray):
        if value.null_count or not pa.types.is_integer(value.type):
            raise Bad("type" if value.null_count or len(value) else "none")
        value = value.to_pylist()
    if isinstance(value, np.ndarray):
        if value.ndim != 1:
            raise Bad("type")
        if value.size == 0:
            return []
        if value.dtype.kind not in "iuO":
            raise Bad("type")
        value = value.tolist()
    try:
        items = list(value)
    except TypeError:
        raise Bad("type") from None
    if any(isinstance(v, bool | np.bool_) or not isinstance(v, int | np.integer) for v in items):
        raise Bad("type")
    ints = sorted({int(v) for v in items})
    if any(v < 0 or v >= bound for v in ints):
        raise Bad("range")
    return ints


def outcome(call: Callable[[], Any]) -> tuple[str, Any]:
    """("ok", result) or ("error", the exception), after checking the error is a clean one."""
    try:
        return "ok", call()
    except (EmberError, TypeError, ValueError) as e:
        check_clean(e)
        return "error", e


def check_clean(e: BaseException) -> None:
    text = str(e)
    assert text and "\n" not in text.strip(), f"{type(e).__name__} of more than one line: {text!r}"
    assert isinstance(e, EmberError) or type(e).__module__ == "builtins", f"an engine's error got through: {type(e)!r}: {text}"
    for word in ("Traceback", "py4j", "LINE 1", "JVM", "org.apache"):
        assert word not in text, f"{word!r} in the message: {text!r}"
    where = traceback.extract_tb(e.__traceback__)[-1].filename
    assert where.startswith(EMBER), f"{type(e).__name__} raised outside ember ({where}): {text}"


def check(call: Callable[[], Any], expect: Callable[[], Any], compare: Callable[[Any, Any], None]) -> None:
    """`call` must give `compare`-equal answers to the spec's `expect`, or both must fail alike."""
    try:
        wanted = expect()
    except Bad as bad:
        kind, got = outcome(call)
        assert kind == "error", f"accepted an argument the spec refuses ({bad.kind}): {got!r}"
        if bad.kind == "range":
            assert isinstance(got, IdOutOfRangeError), f"out of range, but {type(got).__name__}: {got}"
        return
    kind, got = outcome(call)
    assert kind == "ok", f"refused a valid argument: {type(got).__name__}: {got}"
    compare(got, wanted)


# --- strategies -------------------------------------------------------------------------


class Fresh:
    """A generator of ids, made anew for each use (one use exhausts it)."""

    def __init__(self, items: list[int]):
        self.items = items

    def __repr__(self) -> str:
        return f"(x for x in {self.items!r})"


class Huge:
    """Many ids: all valid (a list), or an array holding one bad id."""

    def __init__(self, bound: int, valid: bool):
        self.bound, self.valid = bound, valid

    def make(self) -> Any:
        if self.valid:
            return list(range(self.bound)) * (200_000 // self.bound)
        return np.arange(-1, 200_000)

    def __repr__(self) -> str:
        return f"Huge({self.bound}, valid={self.valid})"


def made(value: Any) -> Any:
    if isinstance(value, Huge):
        return value.make()
    return (x for x in value.items) if isinstance(value, Fresh) else value


DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint64, np.float32, np.float64,
          np.bool_, np.complex64, "U3", "S2", "M8[s]", "m8[ms]", np.object_]  # fmt: skip


def id_values(bound: int) -> st.SearchStrategy[Any]:
    near = st.integers(-3, bound + 3)
    return st.one_of(
        st.lists(near, max_size=8),
        st.lists(near, max_size=4).map(tuple),
        st.sets(near, max_size=4),
        st.lists(near, max_size=4).map(Fresh),
        st.integers(-(2**70), 2**70),
        st.lists(st.integers(-(2**70), 2**70), min_size=1, max_size=3),
        st.lists(st.one_of(near, st.booleans(), st.none(), st.floats(allow_nan=True), st.text(max_size=2)), max_size=4),
        st.floats(allow_nan=True),
        st.text(max_size=6),
        st.binary(max_size=4),
        st.none().map(lambda _: {0: "a"}),
        st.builds(range, st.integers(-2, bound + 2), st.integers(-2, bound + 2)),
        st.builds(Huge, st.just(bound), st.booleans()),
        hnp.arrays(st.sampled_from(DTYPES), hnp.array_shapes(min_dims=0, max_dims=2, max_side=4)),
        hnp.arrays(st.sampled_from([np.int64, np.int8, np.int16]), st.integers(0, 6), elements=near),
        hnp.arrays(st.sampled_from([np.uint64, np.uint8]), st.integers(0, 6), elements=st.integers(0, bound + 3)),
        st.lists(near, max_size=4).map(lambda xs: pa.array(xs, pa.int64())),
        st.lists(st.one_of(near, st.none()), max_size=4).map(lambda xs: pa.array(xs, pa.int64())),
        st.lists(near, max_size=4).map(lambda xs: pd.Series(xs, dtype="int64")),
        st.just(np.int64(1)),
        st.just(object()),
    )


# conditions over the output (region, total, n) and what the oracle says they select
GOOD_WHERE: list[tuple[str, Callable[[pd.DataFrame], pd.Series]]] = [
    ("region = 'n'", lambda o: o.region == "n"),
    ("total > 60", lambda o: o.total > 60),
    ("n >= 14 AND region <> 'e'", lambda o: (o.n >= 14) & (o.region != "e")),
    ("region IN ('s', 'zz')", lambda o: o.region.isin(["s", "zz"])),
    ("true", lambda o: o.region == o.region),
    ("NULL", lambda o: o.region != o.region),
    ("region LIKE '%'", lambda o: o.region == o.region),
]
BAD_WHERE = [
    "", "   ", "region =", "nope > 1", "total", "5", "'a'", "region = 'n'; DROP TABLE rel",
    "false) UNION ALL SELECT 999 --", "1=1) OR (1=1", "true OR region = 'n' --\nAND false) UNION SELECT 7 --",
    "region = 'n' UNION SELECT 999", "(SELECT 1, 2)", "region = (SELECT 1)", "COPY rel TO '/tmp/x.csv'",
    "n > 1 ORDER BY n", "count(*) > 1", "\x00", "region = 'n'/*", "');--",
]  # fmt: skip


def where_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.sampled_from([w for w, _ in GOOD_WHERE]),
        st.sampled_from(BAD_WHERE),
        st.text(max_size=30),
        st.integers(),
        st.binary(max_size=5),
        st.lists(st.text(max_size=3), max_size=2),
    )


def selected_by(where: Any, job: Job) -> list[int]:
    """The oracle's output rows for a condition of `GOOD_WHERE`; `Bad` for anything that
    is not a string, or is one of `BAD_WHERE`."""
    if not isinstance(where, str):
        raise Bad("type")
    for text, pick in GOOD_WHERE:
        if where == text:
            return [int(i) for i in np.flatnonzero(pick(job.output).to_numpy())]
    if where in BAD_WHERE:
        raise Bad("type")
    raise LookupError


def same_trace(trace: Any, wanted: dict[str, list[int]]) -> None:
    assert {s: trace.ids(s).tolist() for s in ("orders", "customers")} == wanted


def same_ids(got: Any, wanted: list[int]) -> None:
    assert got.ids().tolist() == wanted


# --- the tests ----------------------------------------------------------------------------


def test_the_oracle_agrees_with_the_captured_lineage(captured: ember.Lineage, job: Job) -> None:
    assert job.regions == sorted(REGIONS)
    for oid in range(len(job.regions)):
        same_trace(captured.backward(oids=[oid]), job.backward([oid]))


@FUZZ
@given(data=st.data())
def test_backward_and_forward_ids(
    captured: ember.Lineage, loaded: ember.Lineage, inferred: ember.InferredLineage, job: Job, data: st.DataObject
) -> None:
    lin = data.draw(st.sampled_from([captured, loaded, inferred]), label="lineage")
    n = len(job.regions)
    oids = data.draw(id_values(n), label="oids")
    check(lambda: lin.backward(oids=made(oids)), lambda: job.backward(expected_ids(made(oids), n)), same_trace)
    source = data.draw(st.sampled_from(["orders", "customers"]), label="source")
    ids = data.draw(id_values(job.rows[source]), label="ids")
    rows = job.rows[source]
    check(lambda: lin.forward(source, ids=made(ids)), lambda: job.forward(source, expected_ids(made(ids), rows)), same_ids)


@FUZZ
@given(data=st.data())
def test_where(captured: ember.Lineage, loaded: ember.Lineage, inferred: ember.InferredLineage, job: Job, data: st.DataObject) -> None:
    lin = data.draw(st.sampled_from([captured, loaded, inferred]), label="lineage")
    where = data.draw(where_values(), label="where")
    try:
        selected_by(where, job)
    except Bad:
        pass  # `check` below wants the refusal
    except LookupError:  # arbitrary text: a clean error, or rows of the output
        kind, got = outcome(lambda: lin.backward(where=where))
        if kind == "ok":
            wanted = DuckOracle.select(job, where)
            same_trace(got, job.backward(wanted))
        return
    check(lambda: lin.backward(where=where), lambda: job.backward(selected_by(where, job)), same_trace)
    both = data.draw(st.booleans(), label="ids too")
    if both:  # exactly one of them
        kind, got = outcome(lambda: lin.backward(oids=[0], where=where))
        assert kind == "error" and isinstance(got, TypeError)
    kind, got = outcome(lambda: lin.backward())
    assert kind == "error" and isinstance(got, TypeError)


class DuckOracle:
    """Which output rows a text DuckDB accepts as a condition selects: asked of a private
    database as a parsed expression, the way a user would mean it."""

    @staticmethod
    def select(job: Job, where: str) -> list[int]:
        import duckdb

        con = duckdb.connect()
        try:
            con.register("o", pa.Table.from_pandas(job.output.assign(_i=range(len(job.output)))))
            return [int(i) for i in con.table("o").filter(where).project("_i").fetchnumpy()["_i"]]
        finally:
            con.close()


@FUZZ
@given(data=st.data())
def test_forward_where_and_source_names(captured: ember.Lineage, loaded: ember.Lineage, job: Job, data: st.DataObject) -> None:
    lin = data.draw(st.sampled_from([captured, loaded]), label="lineage")
    source = data.draw(
        st.one_of(st.sampled_from(["orders", "customers"]), st.text(max_size=8), st.integers(), st.none(),
                  st.lists(st.text(max_size=2), max_size=2), st.just("orders; DROP TABLE x")),
        label="source",
    )  # fmt: skip
    kind, got = outcome(lambda: lin.forward(source, where="cid < 3"))
    if source in ("orders", "customers"):
        assert kind == "ok"
        frame = _orders() if source == "orders" else _customers()
        same_ids(got, job.forward(source, [int(i) for i in np.flatnonzero(frame.cid < 3)]))
    else:
        assert kind == "error" and isinstance(got, TypeError | ember.UnknownSourceError)
    trace = lin.backward(oids=[0])
    kind, got = outcome(lambda: trace.ids(source))
    assert (kind == "ok") == (source in ("orders", "customers"))


@FUZZ
@given(
    name=st.sampled_from(["orders", "customers"]),
    offset=st.one_of(st.integers(-3, 50), st.none(), st.floats(), st.text(max_size=2), st.booleans()),
    limit=st.one_of(st.integers(-3, 50), st.none(), st.floats(), st.text(max_size=2)),
)
def test_rows_pages(captured: ember.Lineage, loaded: ember.Lineage, name: str, offset: Any, limit: Any) -> None:
    for lin in (captured, loaded):
        trace = lin.backward(oids=[0, 1])
        ids = trace.ids(name)
        valid = isinstance(offset, int) and not isinstance(offset, bool) and offset >= 0
        valid = valid and (limit is None or (isinstance(limit, int) and limit >= 0))
        kind, got = outcome(lambda: trace.rows(name, offset=offset, limit=limit))  # noqa: B023
        if not valid:
            assert kind == "error"
            continue
        assert kind == "ok"
        stop = None if limit is None else offset + limit
        assert got.column("ember_rid").to_pylist() == ids[offset:stop].tolist()


SQL = [
    "SELECT region, count(*) AS k FROM customers GROUP BY region",
    "SELECT * FROM customers WHERE cid > 2",
    "SELECT cid FROM customers UNION SELECT 1",
    "SELECT * FROM nope",
    "DROP TABLE customers",
    "SELECT 1; SELECT 2",
    "",
    "SELECT * FROM customers WHERE",
    "WITH x AS (SELECT 1) SELECT * FROM x",
]


@FUZZ
@given(sql=st.one_of(st.sampled_from(SQL), st.text(max_size=30), st.integers(), st.none()))
def test_queries_over_a_trace(captured: ember.Lineage, sql: Any) -> None:
    trace = captured.backward(oids=[0])
    kind, got = outcome(lambda: trace.query(sql))
    if sql in SQL[:2]:
        assert kind == "ok" and got.output().num_rows >= 1


@FUZZ
@given(
    through=st.one_of(st.none(), st.integers(), st.text(max_size=3).filter(lambda t: not t.startswith("/")), st.lists(st.integers(), min_size=1, max_size=2)),
    source_where=st.one_of(
        st.integers(), st.text(max_size=3), st.dictionaries(st.sampled_from(["orders", "nope", "1"]), st.one_of(st.text(max_size=5), st.integers()), max_size=2)
    ),
)
def test_through_and_source_where(captured: ember.Lineage, through: Any, source_where: Any) -> None:
    if isinstance(through, str):  # a folder of stores: one that exists links nothing (and says so)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            kind, got = outcome(lambda: captured.backward(oids=[0], through=through))
        assert kind == "ok" if os.path.isdir(through) else isinstance(got, EmberError)
    elif through is not None:
        kind, got = outcome(lambda: captured.backward(oids=[0], through=through))
        assert kind == "error" and isinstance(got, TypeError)
    kind, got = outcome(lambda: captured.backward(oids=[0], source_where=source_where))
    if isinstance(source_where, dict) and not source_where:
        assert kind == "ok"


def test_a_where_cannot_reach_past_its_condition(captured: ember.Lineage, inferred: ember.InferredLineage) -> None:
    for lin in (captured, inferred):
        for text in ("false) UNION ALL SELECT 2 --", "region = 'n'; SELECT 2", "1 = 1) OR (1 = 1"):
            with pytest.raises(ember.InvalidPredicateError, match="does not parse"):
                lin.backward(where=text)
        with pytest.raises(ember.InvalidPredicateError, match="not one condition"):
            lin.backward(where="total")  # a number, which DuckDB would read as true
    with pytest.raises(ember.InvalidPredicateError, match="does not parse"):
        captured.forward("orders", where="false) UNION ALL SELECT 39 --")


def test_ids_that_are_no_ids_are_refused_not_cast(captured: ember.Lineage) -> None:
    for bad, kind in [([1.7], TypeError), ([True], TypeError), (np.array([0.0, 1.0]), TypeError), ("01", TypeError),
                      (1, TypeError), ([2**64], IdOutOfRangeError), (np.array([2**63], np.uint64), IdOutOfRangeError),
                      (np.zeros((1, 1), np.int64), ValueError), (pa.array([0, None]), TypeError)]:  # fmt: skip
        with pytest.raises(kind) as caught:
            captured.backward(oids=bad)
        check_clean(caught.value)


# --- ember.load of what is no store ----------------------------------------------------------


def paths(tmp: Path) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.text(max_size=12).filter(lambda t: "://" not in t).map(lambda t: str(tmp / "missing" / t)),
        st.text(max_size=12).filter(lambda t: "://" not in t),
        st.sampled_from(["", ".", "/", "\x00", "file:///nonexistent/x", "foo://bar", "file://", "::", "a" * 300]),
        st.just(tmp / "a-file"),
        st.just(str(tmp / "a-file")),
        st.just(str(tmp / "empty-folder")),
        st.just(str(tmp / "manifest-folder")),
        st.just(str(tmp / "manifest-garbage")),
        st.integers(),
        st.none(),
        st.binary(max_size=4),
        st.lists(st.text(max_size=2), max_size=2),
    )


@pytest.fixture(scope="module")
def not_stores(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("not-stores")
    (tmp / "a-file").write_text("hello")
    (tmp / "empty-folder").mkdir()
    (tmp / "manifest-folder" / "manifest.json").mkdir(parents=True)
    (tmp / "manifest-garbage").mkdir()
    (tmp / "manifest-garbage" / "manifest.json").write_bytes(b"\xff\xfe{")
    return tmp


@FUZZ
@given(data=st.data())
def test_load_of_what_is_no_store(not_stores: Path, data: st.DataObject) -> None:
    path = data.draw(paths(not_stores), label="path")
    kind, got = outcome(lambda: ember.load(path))
    assert kind == "error", f"loaded {path!r}"
    if isinstance(path, str | Path):
        assert isinstance(got, ember.StoreError), f"{type(got).__name__}: {got}"


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
MANIFEST_KEYS = ["output", "sources", "levels", "output_level", "groupings", "info", "files", "checksums"]


@FUZZ
@given(
    version=st.sampled_from([1, 2, 3, "2", None, -1, 2.5]),
    fields=st.dictionaries(st.sampled_from(MANIFEST_KEYS), JSON, max_size=8),
)
def test_load_of_a_made_up_manifest(tmp_path_factory: pytest.TempPathFactory, version: Any, fields: dict[str, Any]) -> None:
    folder = tmp_path_factory.mktemp("made-up")
    (folder / "manifest.json").write_text(json.dumps({"format": "ember-lineage-store", "version": version, **fields}))
    kind, got = outcome(lambda: ember.load(str(folder)))
    assert kind == "error" and isinstance(got, ember.StoreError), got
