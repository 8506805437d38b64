"""The 22 TPC-H queries in Spark SQL: `devkit.tpch.QUERIES`, plus test-only variants.

The texts are the ones the demo and the benchmarks run (the specification's queries with
its validation parameters, ORDER BY and LIMIT kept; Q15's view created first as a temp
view). Testing that copy, not a second one, keeps the two from drifting apart. It stays
independent where it matters: the oracle (`tests/oracle/tpch_lineage.py`) is hand-written
DuckDB SQL that shares nothing with ember, and the suite checks ember's output rows
against it, so a wrong query text fails as surely as a wrong lineage.
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame, SparkSession

from devkit.tpch import QUERIES


def _limit(text: str) -> int | None:
    match = re.search(r"\blimit\s+(\d+)\s*$", text, re.IGNORECASE)
    return int(match.group(1)) if match else None


# Queries whose last statement ends in a LIMIT (only some oracle rows are returned).
LIMITS: dict[int, int] = {
    n: limit for n, statements in QUERIES.items() if (limit := _limit(statements[-1])) is not None
}


# Re-parameterized queries: at SF 0.01 the validation parameters leave some lineage
# rules barely exercised (Q17 selects no row, so its correlated avg is never traced; Q20
# returns one supplier with one witness; Q2 has one part with more than one European
# offer under its min). Each variant is (query, [(old, new) text replacements]); the
# oracle applies the same replacements to its own SQL (each `old` occurs once in both).
VARIANTS: dict[str, tuple[int, list[tuple[str, str]]]] = {
    "q02-size10-steel": (2, [("p_size = 15", "p_size = 10"), ("'%BRASS'", "'%STEEL'")]),
    "q17-sm-pack": (17, [("'MED BOX'", "'SM PACK'")]),
    "q20-light-china": (20, [("'forest%'", "'light%'"), ("'CANADA'", "'CHINA'")]),
}


def replace_once(text: str, replacements: list[tuple[str, str]]) -> str:
    for old, new in replacements:
        assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times"
        text = text.replace(old, new)
    return text


def tpch_sql(spark: SparkSession, n: int, replacements: list[tuple[str, str]] | None = None) -> DataFrame:
    """Runs query `n`'s statements and returns the last one's DataFrame (optionally with
    text replacements in the last statement, see VARIANTS)."""
    *setup, last = QUERIES[n]
    for statement in setup:
        spark.sql(statement)
    return spark.sql(replace_once(last, replacements or []))
