"""One in-process DuckDB database for the package: opening a database costs ~25 ms, a cursor
on an open one well under 1 ms, and traces open one per question. It holds the functions
Spark has and DuckDB lacks that translated expressions call (`plan.duck_sql`)."""

from __future__ import annotations

import decimal
import threading

import duckdb
from duckdb.func import SPECIAL
from duckdb.sqltypes import INTEGER, VARCHAR

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
