"""Lineage rules: for one numpy call, the relation between each output and each tracked input.

One small function per op family. Structural ops (reshape, flips, indexing, stacking,
tiling, ...) run the very same numpy function on arrays of cell ids instead of values,
so their lineage is whatever numpy moved where (DSLog's value-independent capture).
Element-wise, reduction, window, matmul and sort lineage follow from index arithmetic.
A *composite* rule re-expresses a function with tracked numpy calls (`trace` is
`sum(diagonal)`), so its lineage is that of the pieces. Anything else is captured by
perturbing input cells one at a time, with a warning, or refused when too large.
"""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ember.arrays.provrc import ABSOLUTE, Relation, Table
from ember.errors import UnsupportedOperatorError

BRUTE_FORCE_LIMIT = 2048  # input cells a perturbation capture may probe
# (output index, tracked input index, relation), or the ProvRC table itself when a rule
# knows it without compressing anything
Link = tuple[int, int, Relation | Table]


class UnsupportedArrayOperationError(UnsupportedOperatorError):
    """A numpy function on tracked arrays whose lineage ember cannot capture exactly."""


class LineageWarning(UserWarning):
    """Lineage captured by perturbation: value-dependent effects may be missed."""


class Tracked:
    """What rules need of a tracked array (the class itself lives in `track`)."""

    _value: np.ndarray

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape


@dataclass(frozen=True)
class Call:
    """One numpy call on tracked arrays, after numpy computed the real outputs."""

    name: str
    func: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    inputs: tuple[Tracked, ...]  # distinct tracked arrays, in order of appearance
    outputs: tuple[np.ndarray, ...]

    def arg(self, name: str, default: Any = None) -> Any:
        try:
            bound = inspect.signature(self.func).bind(*self.args, **self.kwargs)
        except (TypeError, ValueError):
            return self.kwargs.get(name, default)
        value = bound.arguments.get(name, default)
        return default if value is getattr(np, "_NoValue", None) else value

    def index(self, x: Any) -> int:
        return next(k for k, t in enumerate(self.inputs) if t is x)

    def fail(self, why: str) -> UnsupportedArrayOperationError:
        return UnsupportedArrayOperationError(f"numpy.{self.name} on tracked arrays: {why}")


Rule = Callable[[Call], list[Link] | None]  # None: the arguments are outside what the rule knows


@dataclass(frozen=True)
class Family:
    """How a function's lineage is captured; `reusable` when it depends on shapes and
    arguments only (never on values), so a capture can be reused (DSLog's dim_sig)."""

    name: str
    rule: Rule
    reusable: bool = True


def tree_map(obj: Any, fn: Callable[[Tracked], Any]) -> Any:
    if isinstance(obj, Tracked):
        return fn(obj)
    if isinstance(obj, list | tuple):
        return type(obj)(tree_map(x, fn) for x in obj)
    if isinstance(obj, dict):
        return {k: tree_map(v, fn) for k, v in obj.items()}
    return obj


def tracked_in(obj: Any) -> list[Tracked]:
    found: list[Tracked] = []
    tree_map(obj, found.append)
    return found


def grid(shape: tuple[int, ...]) -> np.ndarray:
    """Every cell of `shape`, in C order."""
    if not shape:
        return np.zeros((1, 0), np.int64)
    return np.indices(shape, np.int64).reshape(len(shape), -1).T


def ids(shape: tuple[int, ...], base: int) -> np.ndarray:
    return np.arange(base + 1, base + 1 + int(np.prod(shape)), dtype=np.int64).reshape(shape)


def from_ids(out_ids: np.ndarray, base: int, in_shape: tuple[int, ...]) -> Relation:
    """The relation numpy's movement of the ids `base + 1 ...` into `out_ids` encodes."""
    out_ids = np.asarray(out_ids)
    if out_ids.dtype.kind == "f":
        out_ids = np.rint(out_ids)
    out_ids = out_ids.astype(np.int64)
    mask = (out_ids > base) & (out_ids <= base + int(np.prod(in_shape)))
    out = np.argwhere(mask)
    flat = out_ids[mask] - base - 1
    inp = (
        np.stack(np.unravel_index(flat, in_shape), axis=1)
        if in_shape
        else np.zeros((len(flat), 0), np.int64)
    )
    return Relation.pairs(out, inp, out_ids.shape, in_shape)


def _outputs(result: Any) -> list[np.ndarray]:
    return (
        [np.asarray(r) for r in result]
        if isinstance(result, list | tuple)
        else [np.asarray(result)]
    )


# --- movement ------------------------------------------------------------------------


@dataclass(frozen=True)
class Data:
    """Which arguments of a movement function carry array data; the rest are parameters."""

    positions: tuple[int, ...] | None = (0,)  # None: every positional argument
    keywords: tuple[str, ...] = ()
    zero: tuple[str, ...] = ()  # keyword fill values that would otherwise look like ids


def movement(data: Data) -> Callable[[Call], list[Link]]:
    def rule(call: Call) -> list[Link]:
        bases = np.cumsum([0, *(int(np.prod(x.shape)) for x in call.inputs)])
        base = {id(x): int(b) for x, b in zip(call.inputs, bases, strict=False)}

        def as_ids(obj: Any) -> Any:
            if isinstance(obj, Tracked):
                return ids(obj.shape, base[id(obj)])
            if isinstance(obj, list | tuple):
                return type(obj)(as_ids(x) for x in obj)
            return np.zeros(np.shape(obj), np.int64)

        def param(obj: Any) -> Any:
            if tracked_in(obj):
                raise call.fail("a tracked array as a parameter (not as data) is not supported")
            return obj

        args = tuple(
            as_ids(a) if data.positions is None or i in data.positions else param(a)
            for i, a in enumerate(call.args)
        )
        kwargs = {
            k: 0 if k in data.zero else as_ids(v) if k in data.keywords else param(v)
            for k, v in call.kwargs.items()
            if k not in ("dtype", "casting")
        }
        outs = _outputs(call.func(*args, **kwargs))
        return [
            (o, k, from_ids(out, base[id(x)], x.shape))
            for o, out in enumerate(outs)
            for k, x in enumerate(call.inputs)
        ]

    return rule


def getitem(call: Call) -> list[Link]:
    x, key = call.args
    mask = key if isinstance(key, Tracked) else None
    if mask is not None and not (mask._value.dtype == bool and mask.shape == x.shape):
        raise call.fail("a tracked index must be a boolean mask of the indexed array's shape")
    if mask is None and tracked_in(key):
        raise call.fail("tracked arrays inside an index tuple are not supported")
    plain = mask._value if mask is not None else key
    rel = from_ids(ids(x.shape, 0)[plain], 0, x.shape)
    links: list[Link] = [(0, call.index(x), rel)]
    if mask is not None and mask is not x:  # a cell came through because its mask cell was set
        links.append((0, call.index(mask), rel))
    return links


def where(call: Call) -> list[Link] | None:
    if len(call.args) != 3:
        return None
    cond = call.args[0]
    data = tuple(t for t in call.inputs if any(t is a for a in call.args[1:]))
    plain_cond = cond._value if isinstance(cond, Tracked) else cond
    sub = Call(call.name, np.where, (plain_cond, *call.args[1:]), {}, data, call.outputs)
    links = [(o, call.index(data[k]), rel) for o, k, rel in movement(Data((1, 2)))(sub)]
    if isinstance(cond, Tracked):
        links.append((0, call.index(cond), broadcast(cond.shape, call.outputs[0].shape)))
    return links


# --- element-wise ---------------------------------------------------------------------


def broadcast(in_shape: tuple[int, ...], out_shape: tuple[int, ...]) -> Table:
    """The ProvRC table of broadcasting, built directly rather than compressed from one
    pair per output cell (a test checks they agree): one row over the whole output,
    input axes of length 1 absolute at 0, every other one equal to its output axis."""
    rows = 0 if 0 in out_shape else 1
    lead = len(out_shape) - len(in_shape)
    ref = [ABSOLUTE if n == 1 else lead + i for i, n in enumerate(in_shape)]
    key_hi = np.asarray(out_shape, np.int64).reshape(1, -1) - 1
    zero = np.zeros((rows, len(in_shape)), np.int64)
    return Table(
        "backward",
        out_shape,
        in_shape,
        np.zeros((rows, len(out_shape)), np.int64),
        np.repeat(key_hi, rows, axis=0),
        zero,
        zero,
        np.array([ref] * rows, np.int64).reshape(rows, len(in_shape)),
    )


def elementwise(call: Call) -> list[Link]:
    shape = call.outputs[0].shape
    links: list[Link] = []
    for x in call.inputs:
        if not any(a is x for a in (*call.args, *call.kwargs.values())):
            raise call.fail("a tracked array nested inside an argument is not supported")
        rel = broadcast(x.shape, shape)
        links += [(o, call.index(x), rel) for o in range(len(call.outputs))]
    return links


# --- reductions and windows along an axis ----------------------------------------------


def _axes(axis: Any, ndim: int) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int | np.integer):
        return (int(axis) % ndim,)
    return tuple(sorted(int(a) % ndim for a in axis))


def _only_first(call: Call) -> Tracked:
    x = call.args[0]
    if not isinstance(x, Tracked) or len(call.inputs) > 1:
        raise call.fail("only the data argument may be tracked")
    return x


def reduction(call: Call) -> list[Link]:
    x = _only_first(call)
    in_shape, out_shape = x.shape, call.outputs[0].shape
    axes = _axes(call.arg("axis"), len(in_shape))
    keep = call.arg("keepdims", False) is True
    kept = [i for i in range(len(in_shape)) if i not in axes]
    lead = len(out_shape) - (len(in_shape) if keep else len(kept))
    out = grid(out_shape)
    lo = np.zeros((len(out), len(in_shape)), np.int64)
    hi = np.zeros_like(lo)
    for pos, i in enumerate(kept):
        lo[:, i] = hi[:, i] = out[:, lead + (i if keep else pos)]
    for i in axes:
        hi[:, i] = in_shape[i] - 1
    live = np.all(lo <= hi, axis=1)
    return [(0, 0, Relation(out[live], lo[live], hi[live], out_shape, in_shape))]


def along(
    x_shape: tuple[int, ...],
    out_shape: tuple[int, ...],
    axis: int,
    window: Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]],
) -> Relation:
    """Output cell b reads the input cells equal to b except along `axis`, where
    `window(b[axis], n)` gives the inclusive input range."""
    out = grid(out_shape)
    lo, hi = out.copy(), out.copy()
    lo[:, axis], hi[:, axis] = window(out[:, axis], x_shape[axis])
    return Relation(out, lo, hi, out_shape, x_shape)


def _axis(call: Call, default: int | None) -> int | None:
    """The axis argument; None means the flattened array, which (composites rewrite the
    other cases) only reaches a rule for 1-D input, where it is axis 0. 0-d: no axis."""
    x = call.inputs[0]
    if not x.shape:
        return None
    axis = call.arg("axis", default)
    return 0 if axis is None else int(axis) % len(x.shape)


def cumulative(call: Call) -> list[Link] | None:
    x = _only_first(call)
    axis = _axis(call, 0)
    if axis is None:
        return None
    return [(0, 0, along(x.shape, call.outputs[0].shape, axis, lambda k, n: (np.zeros_like(k), k)))]


def diff(call: Call) -> list[Link] | None:
    x = _only_first(call)
    if call.arg("prepend") is not None or call.arg("append") is not None:
        return None
    n = int(call.arg("n", 1))
    axis = _axis(call, -1)
    if axis is None:
        return None
    return [(0, 0, along(x.shape, call.outputs[0].shape, axis, lambda k, _: (k, k + n)))]


def gradient(call: Call) -> list[Link] | None:
    """Central differences read the two neighbours (not the cell itself); edges read two cells."""
    x = _only_first(call)
    if call.arg("axis") is not None or int(call.arg("edge_order", 1)) != 1:
        return None

    def left(k: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        p = np.where(k == n - 1, n - 2, np.maximum(k - 1, 0))
        return p, p

    def right(k: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        p = np.where(k == 0, 1, np.minimum(k + 1, n - 1))
        return p, p

    return [
        (o, 0, along(x.shape, out.shape, o, side))
        for o, out in enumerate(call.outputs)
        for side in (left, right)
    ]


def whole_axis(call: Call) -> list[Link] | None:
    """argsort: each output cell's value depends on every cell along its axis."""
    x = _only_first(call)
    axis = _axis(call, -1)
    if axis is None:
        return None

    def everything(k: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        return np.zeros_like(k), np.full_like(k, n - 1)

    return [(0, 0, along(x.shape, call.outputs[0].shape, axis, everything))]


def sort(call: Call) -> list[Link] | None:
    x = _only_first(call)
    axis = _axis(call, -1)
    if axis is None:
        return None
    order = np.argsort(x._value, axis=axis, kind="stable")
    out = grid(x.shape)
    inp = out.copy()
    inp[:, axis] = order.reshape(-1)
    return [(0, 0, Relation.pairs(out, inp, x.shape, x.shape))]


def unique(call: Call) -> list[Link] | None:
    """Each distinct value comes from all the cells holding it (a group-by)."""
    x = _only_first(call)
    if len(call.args) > 1 or call.kwargs:
        return None
    _, group = np.unique(x._value, return_inverse=True)
    rel = Relation.pairs(group.reshape(-1, 1), grid(x.shape), call.outputs[0].shape, x.shape)
    return [(0, 0, rel)]


# --- products and convolutions ----------------------------------------------------------


def matmul(call: Call) -> list[Link] | None:
    a, b = (np.asarray(v._value if isinstance(v, Tracked) else v) for v in call.args[:2])
    if (
        a.ndim == 0
        or b.ndim == 0
        or len(call.args) > 2
        or (call.name == "dot" and max(a.ndim, b.ndim) > 2)
    ):
        return None
    a2 = a.shape if a.ndim > 1 else (1, *a.shape)
    b2 = b.shape if b.ndim > 1 else (*b.shape, 1)
    batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    full = grid((*batch, a2[-2], b2[-1]))
    nb, k = len(batch), a2[-1]
    drop = [c for c, gone in ((nb, a.ndim == 1), (nb + 1, b.ndim == 1)) if not gone]
    out = full[:, [*range(nb), *drop]]

    def operand(shape: tuple[int, ...], is_a: bool) -> Relation:
        lo = np.zeros((len(full), len(shape)), np.int64)
        if len(shape) == 1:
            return Relation(out, lo, np.full_like(lo, k - 1), call.outputs[0].shape, shape)
        lead = nb - (len(shape) - 2)
        for i, n in enumerate(shape[:-2]):
            if n != 1:
                lo[:, i] = full[:, lead + i]
        hi = lo.copy()
        last = len(shape) - 1
        fixed, contracted, col = (last - 1, last, nb) if is_a else (last, last - 1, nb + 1)
        lo[:, fixed] = hi[:, fixed] = full[:, col]
        hi[:, contracted] = k - 1
        return Relation(out, lo, hi, call.outputs[0].shape, shape)

    links: list[Link] = []
    if isinstance(call.args[0], Tracked):
        links.append((0, call.index(call.args[0]), operand(a.shape, True)))
    if isinstance(call.args[1], Tracked):
        links.append((0, call.index(call.args[1]), operand(b.shape, False)))
    return links


def outer(call: Call) -> list[Link]:
    """ufunc.outer: out[i..., j...] reads a[i...] and b[j...]."""
    a, b = call.args[:2]
    out_shape = call.outputs[0].shape
    out = grid(out_shape)
    na = np.ndim(a._value if isinstance(a, Tracked) else a)
    links: list[Link] = []
    for x, cols in ((a, slice(0, na)), (b, slice(na, None))):
        if isinstance(x, Tracked):
            links.append((0, call.index(x), Relation.pairs(out, out[:, cols], out_shape, x.shape)))
    return links


def convolve(call: Call) -> list[Link] | None:
    a, v = call.args[:2]
    n, m = (len(np.asarray(x._value if isinstance(x, Tracked) else x)) for x in (a, v))
    mode = call.arg("mode", "valid" if call.name == "correlate" else "full")
    offset = {"full": 0, "same": (min(n, m) - 1) // 2, "valid": min(n, m) - 1}[mode]
    out_shape = call.outputs[0].shape
    out = grid(out_shape)
    full = out[:, 0] + offset
    flipped = call.name == "correlate"
    if flipped and m > n:
        return None
    links: list[Link] = []
    for x, size, other, flip in ((a, n, m, False), (v, m, n, flipped)):
        if not isinstance(x, Tracked):
            continue
        lo, hi = np.maximum(0, full - other + 1), np.minimum(size - 1, full)
        if flip:
            lo, hi = size - 1 - hi, size - 1 - lo
        links.append(
            (0, call.index(x), Relation(out, lo[:, None], hi[:, None], out_shape, (size,)))
        )
    return links


# --- perturbation ------------------------------------------------------------------------


def brute_force(call: Call) -> list[Link]:
    """Set each input cell to NaN and to a shifted value in turn; an output cell depends on
    the input cells whose probes change it."""
    cells = sum(int(np.prod(x.shape)) for x in call.inputs)
    if cells > BRUTE_FORCE_LIMIT:
        raise call.fail(
            f"no lineage rule, and perturbation capture is limited to {BRUTE_FORCE_LIMIT} input cells ({cells} given)"
        )
    warnings.warn(
        f"numpy.{call.name} has no lineage rule: lineage found by perturbing each of {cells} input cells; "
        "effects that depend on values may be missed",
        LineageWarning,
        stacklevel=5,
    )
    base = [np.asarray(o) for o in call.outputs]
    links: list[Link] = []
    for k, x in enumerate(call.inputs):
        outs: list[list[np.ndarray]] = [[] for _ in base]
        ins: list[list[np.ndarray]] = [[] for _ in base]
        for cell in grid(x.shape):
            for o, changed in enumerate(_changes(call, x, tuple(int(i) for i in cell), base)):
                hit = np.argwhere(changed)
                outs[o].append(hit)
                ins[o].append(np.repeat(cell[None, :], len(hit), axis=0))
        links += [
            (
                o,
                k,
                Relation.pairs(np.concatenate(outs[o]), np.concatenate(ins[o]), b.shape, x.shape),
            )
            for o, b in enumerate(base)
        ]
    return links


def _changes(
    call: Call, x: Tracked, cell: tuple[int, ...], base: list[np.ndarray]
) -> list[np.ndarray]:
    """Output cells that change when the input cell is probed."""
    changed = [np.zeros(b.shape, bool) for b in base]
    answered = False
    for probe in _probes(x._value, cell):

        def value(t: Tracked, probe: np.ndarray = probe) -> np.ndarray:
            return probe if t is x else t._value

        args, kwargs = tree_map((call.args, call.kwargs), value)
        try:
            outs = _outputs(call.func(*args, **kwargs))
        except (ArithmeticError, ValueError, np.linalg.LinAlgError):
            continue  # this probe is outside the function's domain; another one decides
        if [o.shape for o in outs] != [b.shape for b in base]:
            raise call.fail(
                "the output shape depends on the values; perturbation cannot capture it"
            )
        for c, new, old in zip(changed, outs, base, strict=True):
            c |= ~_same(new, old)
        answered = True
    if not answered:
        raise call.fail(f"every perturbation of input cell {cell} made the function fail")
    return changed


def _probes(value: np.ndarray, cell: tuple[int, ...]) -> list[np.ndarray]:
    """NaN (reaches almost every output that reads the cell) and a shift (for functions
    that skip NaN) for floats; a flip for booleans; +1 for integers."""

    def probe(v: Any) -> np.ndarray:
        p = value.copy()
        p[cell] = v
        return p

    old = value[cell]
    if value.dtype.kind == "b":
        return [probe(not old)]
    if value.dtype.kind in "fc":
        return [probe(np.nan), probe(old + 1 + abs(old))]
    return [probe(old + 1)]


def _same(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    with np.errstate(invalid="ignore"):
        same = a == b
    if a.dtype.kind in "fc":
        same |= np.isnan(a) & np.isnan(b)
    return np.asarray(same)
