"""Helpers shared by the benchmark scripts."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


def input_bytes(data: Path, tables: list[str]) -> int:
    return sum((data / f"{t}.parquet").stat().st_size for t in tables)
