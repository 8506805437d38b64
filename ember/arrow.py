"""Integer columns between numpy and pyarrow without importing pandas.

pyarrow imports pandas (slow to import) the first time it turns an array into numpy or
numpy into an array; the store-only commands (`ember ls/trace/export`) should start
quickly, so the paths they take move integers through the arrays' buffers instead.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa


def numbers(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """An integer column without nulls as a (read-only) numpy array.

    >>> numbers(pa.chunked_array([[1, 2], [3]], pa.int32())).tolist()
    [1, 2, 3]
    """
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if array.null_count or not pa.types.is_integer(array.type):
        raise TypeError(f"expected integers without nulls, got {array.type} with {array.null_count} nulls")
    dtype = np.dtype(array.type.to_pandas_dtype())
    if not len(array):
        return np.zeros(0, dtype)
    return np.frombuffer(array.buffers()[1], dtype=dtype, count=len(array), offset=array.offset * dtype.itemsize)


def int64s(values: np.ndarray) -> pa.Array:
    """Integers as an int64 array.

    >>> int64s(np.array([5, 7])).to_pylist()
    [5, 7]
    """
    data = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def positions(n: int) -> pa.Array:
    """0, 1, ..., n - 1 as an int64 array.

    >>> positions(3).to_pylist()
    [0, 1, 2]
    """
    return int64s(np.arange(n, dtype=np.int64))
