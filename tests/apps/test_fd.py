"""FD profiling against a pure-Python oracle over the same rows, with injected violations."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest
from pyspark.sql import DataFrame, SparkSession

from ember import EmberError
from ember.apps import FDProfiler, fd_violations

SCHEMA = "zip string, city string, state string, street string"


def rows(n: int = 400, seed: int = 3) -> list[tuple[Any, ...]]:
    """zip → city → state hold, except for injected rows (a wrong city, a wrong state, a null)."""
    rnd = random.Random(seed)
    cities = {f"{z:05d}": f"city{z % 37}" for z in range(60)}
    out = []
    for i in range(n):
        z = rnd.choice(sorted(cities))
        city = cities[z]
        out.append((z, city, f"S{int(city[4:]) % 7}", f"street{i % 11}"))
    for i in rnd.sample(range(n), 12):
        z, city, state, street = out[i]
        out[i] = (z, rnd.choice([f"typo{i % 3}", None, city.upper()]), state, street)
    for i in rnd.sample(range(n), 5):
        z, city, state, street = out[i]
        out[i] = (z, city, "XX", street)
    return out


def oracle(data: list[tuple[Any, ...]], cols: list[str], lhs: list[str], rhs: list[str]) -> dict[tuple[Any, ...], dict[tuple[Any, ...], list[int]]]:
    """lhs value → rhs value → row positions, for lhs values with several rhs values."""
    at = {c: i for i, c in enumerate(cols)}
    graph: dict[tuple[Any, ...], dict[tuple[Any, ...], list[int]]] = defaultdict(lambda: defaultdict(list))
    for rid, row in enumerate(data):
        graph[tuple(row[at[c]] for c in lhs)][tuple(row[at[c]] for c in rhs)].append(rid)
    return {x: {y: r for y, r in ys.items()} for x, ys in graph.items() if len(ys) > 1}


def as_graph(found: Any, source: str) -> dict[tuple[Any, ...], dict[tuple[Any, ...], list[int]]]:
    return {v.lhs: {y: ids.tolist() for y, ids in v.ids(source).items()} for v in found}


@pytest.fixture(scope="module")
def table(spark: SparkSession) -> tuple[DataFrame, list[tuple[Any, ...]]]:
    data = rows()
    return spark.createDataFrame(data, SCHEMA), data


def test_matches_oracle_and_reuses_one_capture(table: tuple[DataFrame, list[tuple[Any, ...]]]) -> None:
    df, data = table
    cols = df.columns
    fds = [(["zip"], ["city"]), (["zip"], ["state"]), (["city"], ["state"]), (["zip", "city"], ["state"]), (["state"], ["zip"])]
    profiler = FDProfiler(df)
    profiler.prepare(fds)
    for lhs, rhs in fds:
        found = profiler.violations(lhs, rhs)
        expected = oracle(data, cols, lhs, rhs)
        assert expected, "the data must violate every FD checked"
        assert as_graph(found, "memory") == expected
        assert found.edges("memory").num_rows == sum(len(r) for ys in expected.values() for r in ys.values())
    assert profiler.captures == 1


def test_an_fd_that_holds_and_one_call_api(spark: SparkSession) -> None:
    data = [("a", 1, "x"), ("a", 1, "y"), ("b", 2, "y"), (None, 3, "z"), (None, 3, "w")]
    df = spark.createDataFrame(data, "k string, v int, w string")
    assert len(fd_violations(df, ["k"], ["v"])) == 0
    found = fd_violations(df, ["k"], ["w"])
    assert as_graph(found, "memory") == oracle(data, ["k", "v", "w"], ["k"], ["w"])
    assert found[-1].lhs == (None,)  # nulls are a value, as in GROUP BY, and sort last


def test_new_columns_capture_again(table: tuple[DataFrame, list[tuple[Any, ...]]]) -> None:
    df, data = table
    profiler = FDProfiler(df)
    profiler.violations(["zip"], ["city"])
    profiler.violations(["zip"], ["city"])
    assert profiler.captures == 1
    found = profiler.violations(["street"], ["state"])
    assert profiler.captures == 2
    assert as_graph(found, "memory") == oracle(data, df.columns, ["street"], ["state"])


@pytest.mark.parametrize(("lhs", "rhs", "says"), [([], ["city"], "at least one"), (["zip"], ["zip"], "both sides"), (["zap"], ["city"], "unknown")])
def test_bad_fds_are_refused(table: tuple[DataFrame, list[tuple[Any, ...]]], lhs: list[str], rhs: list[str], says: str) -> None:
    with pytest.raises(EmberError, match=says):
        fd_violations(table[0], lhs, rhs)
