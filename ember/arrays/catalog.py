"""Which numpy functions have which lineage rule (the coverage table is generated from this)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ember.arrays.rules import (
    Data,
    Family,
    convolve,
    cumulative,
    diff,
    elementwise,
    gradient,
    matmul,
    movement,
    reduction,
    sort,
    unique,
    where,
    whole_axis,
)

ELEMENTWISE = Family("element-wise", elementwise)
REDUCTION = Family("reduction", reduction)
FAMILIES: dict[Callable[..., Any], Family] = {}


def _add(family: Family, *funcs: Callable[..., Any]) -> None:
    FAMILIES.update(dict.fromkeys(funcs, family))


_add(
    ELEMENTWISE,
    np.clip, np.round, np.around, np.fix, np.nan_to_num, np.real, np.imag, np.real_if_close,
    np.sinc, np.i0, np.isclose, np.copy, np.angle, np.isreal, np.iscomplex, np.isneginf,
    np.isposinf, np.asarray_chkfinite,
)  # fmt: skip
_add(
    REDUCTION,
    np.sum, np.prod, np.mean, np.std, np.var, np.max, np.min, np.amax, np.amin, np.ptp,
    np.median, np.average, np.nansum, np.nanprod, np.nanmean, np.nanstd, np.nanvar, np.nanmax,
    np.nanmin, np.nanmedian, np.all, np.any, np.argmax, np.argmin, np.nanargmax, np.nanargmin,
    np.count_nonzero, np.percentile, np.quantile, np.nanpercentile, np.nanquantile,
    np.trapezoid, np.linalg.norm,
)  # fmt: skip
_add(Family("cumulative", cumulative), np.cumsum, np.cumprod, np.nancumsum, np.nancumprod)
_add(Family("window", diff), np.diff)
_add(Family("window", gradient), np.gradient)
_add(Family("whole axis", whole_axis), np.argsort)
_add(Family("sort", sort, reusable=False), np.sort)
_add(Family("group", unique, reusable=False), np.unique)
_add(Family("where", where, reusable=False), np.where)
_add(Family("matmul", matmul), np.matmul, np.dot)
_add(Family("convolution", convolve), np.convolve, np.correlate)
_add(
    Family("movement", movement(Data())),
    np.reshape, np.ravel, np.transpose, np.swapaxes, np.moveaxis, np.rollaxis, np.flip,
    np.fliplr, np.flipud, np.rot90, np.roll, np.squeeze, np.expand_dims, np.broadcast_to,
    np.repeat, np.tile, np.take, np.diagonal, np.diag, np.diagflat, np.tril, np.triu,
    np.resize, np.split, np.array_split, np.hsplit, np.vsplit, np.dsplit, np.delete,
    np.take_along_axis, sliding_window_view, np.matrix_transpose, np.permute_dims,
)  # fmt: skip
_add(Family("movement", movement(Data(zero=("constant_values",)))), np.pad)
_add(
    Family("movement", movement(Data(None))),
    np.concatenate, np.stack, np.hstack, np.vstack, np.dstack, np.column_stack,
    np.atleast_1d, np.atleast_2d, np.atleast_3d, np.broadcast_arrays, np.meshgrid,
)  # fmt: skip
_add(Family("movement", movement(Data((0, 2), keywords=("values",)))), np.insert)
_add(Family("movement", movement(Data((0, 1), keywords=("values",)))), np.append)
_add(Family("movement", movement(Data((1,)))), np.compress)

# functions that only read shapes or types: their results carry no lineage
METADATA = frozenset(
    {
        np.shape,
        np.ndim,
        np.size,
        np.iscomplexobj,
        np.isrealobj,
        np.may_share_memory,
        np.shares_memory,
        np.zeros_like,
        np.ones_like,
        np.empty_like,
        np.full_like,
    }
)


def _ravel_first(func: Callable[..., Any], default: int | None = None) -> Callable[..., Any]:
    """With axis=None, numpy works on the flattened array: so does the lineage."""

    def run(x: Any, axis: Any = default, *args: Any, **kwargs: Any) -> Any:
        if axis is not None or np.ndim(x) <= 1:
            return None
        return func(np.ravel(x), 0, *args, **kwargs)

    return run


def _trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, *_: Any, **__: Any) -> Any:
    return np.sum(np.diagonal(a, offset, axis1, axis2), axis=-1)


def _cov(m: Any, y: Any = None, rowvar: bool = True, *_: Any, **__: Any) -> Any:
    if y is not None:
        return None
    x = np.atleast_2d(m if rowvar else np.transpose(m))
    return np.matmul(x, np.transpose(x))


def _pair(func: Callable[..., Any]) -> Callable[..., Any]:
    """vdot, outer, inner, ediff1d through the functions whose lineage they share."""

    def run(a: Any, b: Any = None, *args: Any, **kwargs: Any) -> Any:
        if args or kwargs:
            return None
        return func(a, b)

    return run


def _inner(a: Any, b: Any) -> Any:
    if np.ndim(a) > 2 or np.ndim(b) > 2 or np.ndim(a) == 0 or np.ndim(b) == 0:
        return None
    return np.matmul(a, np.transpose(b) if np.ndim(b) > 1 else b)


# composite: lineage of the function equals the lineage of this tracked expression
COMPOSITES: dict[Callable[..., Any], Callable[..., Any]] = {
    np.cumsum: _ravel_first(np.cumsum),
    np.cumprod: _ravel_first(np.cumprod),
    np.nancumsum: _ravel_first(np.nancumsum),
    np.nancumprod: _ravel_first(np.nancumprod),
    np.sort: _ravel_first(np.sort, -1),
    np.argsort: _ravel_first(np.argsort, -1),
    np.trace: _trace,
    np.cov: _cov,
    np.corrcoef: _cov,
    np.vdot: _pair(lambda a, b: np.dot(np.ravel(a), np.ravel(b))),
    np.outer: _pair(lambda a, b: np.multiply.outer(np.ravel(a), np.ravel(b))),
    np.inner: _pair(_inner),
    np.ediff1d: _pair(lambda a, _: np.diff(np.ravel(a))),
}
