"""The guess that a window's rows do not tie (`capture.untie`), on imported plans."""

from __future__ import annotations

import pytest
from pyspark.sql import SparkSession

from ember.capture.untie import computes_again, untied
from ember.engines.spark.jvm import Jvm
from ember.engines.spark.plan_import import import_plan
from ember.plan import ir


@pytest.fixture(scope="module")
def views(spark: SparkSession) -> SparkSession:
    spark.createDataFrame([(1, 1, 1.5, 10), (1, 2, 2.5, 20), (2, 1, 0.5, 30)], "g int, o int, x double, v int").createOrReplaceTempView("ut")
    return spark


def windows(spark: SparkSession, query: str) -> list[ir.Window]:
    plan, _, _ = import_plan(Jvm(spark), spark.sql(query))
    return [n for n in ir.walk(untied(plan)) if isinstance(n, ir.Window)]


@pytest.mark.parametrize(
    ("column", "guessed"),
    [
        ("sum(v) OVER (PARTITION BY g ORDER BY o ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW)", True),
        ("sum(v) OVER (PARTITION BY g ORDER BY o ROWS BETWEEN 1 PRECEDING AND 1 FOLLOWING)", True),
        ("row_number() OVER (PARTITION BY g ORDER BY o)", False),  # the whole partition: no positions
        ("sum(v) OVER (PARTITION BY g ORDER BY o)", False),  # a RANGE frame: peers together, its rows alike anyway
        ("rank() OVER (PARTITION BY g ORDER BY o)", False),  # the same whichever order ties come in
        ("sum(v) OVER (PARTITION BY g)", False),  # the whole partition
        ("sum(v) OVER (PARTITION BY g ORDER BY x ROWS BETWEEN 1 PRECEDING AND CURRENT ROW)", False),  # a float order
        ("sum(v) OVER (ORDER BY x RANGE BETWEEN 0.5 PRECEDING AND CURRENT ROW)", False),  # a value offset
    ],
)
def test_windows_whose_positions_would_be_cached_are_guessed_untied(views: SparkSession, column: str, guessed: bool) -> None:
    (window,) = windows(views, f"SELECT g, o, {column} AS w FROM ut")
    assert window.untied is guessed


def test_a_plan_with_nothing_to_guess_is_the_same_plan(views: SparkSession) -> None:
    plan, _, _ = import_plan(Jvm(views), views.sql("SELECT g, rank() OVER (ORDER BY o) AS r FROM ut"))
    assert untied(plan) is plan


def test_a_cached_window_is_not_computed_again(views: SparkSession) -> None:
    (window,) = windows(views, "SELECT g, sum(v) OVER (PARTITION BY g ORDER BY o ROWS 1 PRECEDING) AS r FROM ut")
    assert computes_again(ir.Project(window, columns=()))
    assert not computes_again(ir.Project(ir.Shared(window, key=1), columns=()))
