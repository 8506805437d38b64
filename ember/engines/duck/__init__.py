"""One in-process DuckDB database for the package: opening a database costs far more than
a cursor on an open one, and traces open one per question. It holds the functions
Spark has and DuckDB lacks that translated expressions call (`engines.duck.sql`), and the
one a tie check calls (`engines.duck.ties`). Plans compile to SQL in `engines.duck.compile`."""

from __future__ import annotations

import decimal
import threading

import duckdb
import numpy as np
import pyarrow as pa
from duckdb.func import ARROW, SPECIAL
from duckdb.sqltypes import BIGINT, BOOLEAN, DOUBLE, INTEGER, VARCHAR

from ember.engines.duck import ties

_lock = threading.Lock()
_db: list[duckdb.DuckDBPyConnection] = []

_SPARK = decimal.Context(prec=39, rounding=decimal.ROUND_DOWN, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)
_EXACT = decimal.Context(prec=100, rounding=decimal.ROUND_HALF_UP, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


def connect() -> duckdb.DuckDBPyConnection:
    """A fresh cursor: its registrations and temporary views are its own; close it after use."""
    with _lock:
        if not _db:
            db = duckdb.connect()
            db.create_function(
                "spark_divide", spark_divide, [VARCHAR, VARCHAR, INTEGER, INTEGER], VARCHAR, null_handling=SPECIAL, side_effects=False
            )
            db.create_function(
                "spark_cast_double", spark_cast_double, [DOUBLE, INTEGER, INTEGER], VARCHAR, type=ARROW, side_effects=False
            )
            db.create_function("ember_tie", ties.tie, [BIGINT], BOOLEAN, side_effects=True)  # never folded: only tied rows call it
            db.execute(_UNSCALED)
            _db.append(db)
        return _db[0].cursor()


def spark_divide(a: str | None, b: str | None, precision: int, scale: int) -> str | None:
    """Spark's quotient of two decimals (their values as text), as text: the quotient cut
    to 39 significant digits (Java's `BigDecimal.divide` under Spark 4's MathContext, 39
    digits rounded down), then rounded half up to the result type's scale (DuckDB's own
    quotient is a double). Null for a zero divisor, as Spark's (it fails under ANSI rules
    instead); an error where the result overflows its type, which leaves the work to Spark."""
    if a is None or b is None or decimal.Decimal(b) == 0:
        return None
    divisor = decimal.Decimal(b)
    quotient = _SPARK.divide(decimal.Decimal(a), divisor).quantize(decimal.Decimal(1).scaleb(-scale), context=_EXACT)
    if abs(quotient) >= decimal.Decimal(10) ** (precision - scale):
        raise ArithmeticError(f"{a} / {b} overflows decimal({precision},{scale})")
    return format(quotient, "f")


# A double cast to a decimal(p, s), as its unscaled integer. Spark rounds half up from the
# double's text (`Decimal(d)`: Java's `Double.toString`, which Java 17 does not always make
# shortest), DuckDB would round the double itself; both lie within half an ulp of it, so
# rounding d * 10^s here agrees wherever that is not this close to a half. The rest go to
# Spark's own code (`spark_cast_double`); a non-finite value or one past the type's digits
# (null, or a failure under ANSI rules, in Spark) fails, and the work goes to Spark.
_UNSCALED = """
CREATE MACRO spark_unscaled(d, p, s) AS (
  CASE
    WHEN NOT isfinite(d) THEN error('a double that is not a number cast to a decimal: left to Spark')
    WHEN abs(d * power(10, s) - floor(d * power(10, s)) - 0.5) <= abs(d * power(10, s)) * 1e-15
      THEN CAST(spark_cast_double(d, p, s) AS HUGEINT)
    WHEN abs(round(d * power(10, s))) >= power(10, p) THEN error('a double past its decimal type: left to Spark')
    ELSE CAST(round(d * power(10, s)) AS HUGEINT)
  END)
"""


def spark_cast_double(d: pa.Array, precision: pa.Array, scale: pa.Array) -> pa.Array:
    """Doubles cast to a decimal by Spark's own code in this process's JVM (`Doubles.java`), as
    the unscaled integers' text: in local mode Spark's executors are that JVM; a cluster's
    executors must run a Java that writes a double's text as the driver's does (Java 19
    made `Double.toString` shortest; 17 is not always). Fails without an active Spark
    session, or where Spark's cast gives no value (not a number, or past the type's digits)."""
    from pyspark.sql import SparkSession

    from ember.engines.spark import jar
    from ember.engines.spark.jvm import Jvm

    spark = SparkSession.getActiveSession() or getattr(SparkSession, "_instantiatedSession", None)  # DuckDB's threads have none active
    if spark is None:
        raise RuntimeError("no Spark session to cast a double to a decimal as Spark does")
    (p,), (s,) = set(precision.to_pylist()), set(scale.to_pylist())
    bits = np.asarray(d.to_numpy(zero_copy_only=False), np.float64).view(np.int64)
    cast = jar.helper(Jvm(spark), "Doubles").unscaled(",".join(map(str, bits.tolist())), p, s).split(",")
    if "" in cast:
        raise ArithmeticError(f"a double Spark casts to no decimal({p},{s}): left to Spark")
    return pa.array(cast, pa.string())
