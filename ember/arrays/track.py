"""Tracked arrays and the workflow that records their lineage.

A `TrackedArray` wraps a plain ndarray (it is not a subclass, so numpy never computes
on it by accident) and takes part in numpy's dispatch protocols: `__array_ufunc__`
for ufuncs and their methods, `__array_function__` for everything else. numpy computes
every value on the plain arrays; the workflow adds one node per result and one ProvRC
table per (input, output) pair.
"""

from __future__ import annotations

import hashlib
import operator
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from ember.arrays import catalog
from ember.arrays.provrc import Relation, Table, compress
from ember.arrays.query import Boxes, hop
from ember.arrays.reuse import Reuse, Shapes, Tables
from ember.arrays.rules import (
    Call,
    Family,
    Link,
    Tracked,
    UnsupportedArrayOperationError,
    brute_force,
    cumulative,
    elementwise,
    getitem,
    outer,
    reduction,
    tracked_in,
    tree_map,
)

BRUTE = Family("perturbation", brute_force, reusable=False)
UFUNC_METHODS = {
    "__call__": catalog.ELEMENTWISE,
    "reduce": Family("reduction", reduction),
    "accumulate": Family("cumulative", cumulative),
    "outer": Family("outer", outer),
}
GETITEM = Family("movement", getitem)
MATMUL = catalog.FAMILIES[np.dot]
ASTYPE = Family("element-wise", elementwise)
COMPOSITE = Family("composite", elementwise)


@dataclass(frozen=True)
class Node:
    name: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class Op:
    """One recorded call: `how` is the rule family, `reused` "dim"/"gen" when no capture ran."""

    name: str
    how: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    reused: str = ""


@dataclass(frozen=True)
class Edge:
    """The lineage between one input and one output of an op: always the backward
    ProvRC table, and the forward one when the workflow keeps both forms."""

    op: int
    src: int  # input node
    dst: int  # output node
    table: Table
    forward: Table | None = None

    @property
    def tables(self) -> tuple[Table, ...]:
        return (self.table,) if self.forward is None else (self.table, self.forward)


class Workflow:
    """Arrays, the numpy calls between them, and their lineage tables."""

    def __init__(
        self, reuse: bool | Reuse = True, confirm: int = 1, forward_tables: bool = False
    ) -> None:
        """`reuse` may be a `Reuse` shared between workflows (lineage reused across runs of
        the same pipeline); `confirm` is how many shapes a generalized mapping must
        reproduce before it is trusted. `forward_tables` also stores each table in forward
        form (inputs absolute), which forward queries then expand instead of narrowing the
        backward form; DSLog keeps only the backward form, and so does the default."""
        self.nodes: list[Node] = []
        self.ops: list[Op] = []
        self.edges: list[Edge] = []
        self.reuse = reuse if isinstance(reuse, Reuse) else Reuse(confirm) if reuse else None
        self.forward_tables = forward_tables

    def track(self, value: Any, name: str | None = None) -> TrackedArray:
        value = np.array(value)
        return TrackedArray(value, self._node(value.shape, name), self)

    def _node(self, shape: tuple[int, ...], name: str | None) -> int:
        n = len(self.nodes)
        if name is not None and name.startswith("#"):
            raise ValueError("names starting with '#' are kept for unnamed arrays")
        if name is not None and any(node.name == name for node in self.nodes):
            raise ValueError(f"an array named {name!r} is already tracked in this workflow")
        self.nodes.append(Node(name if name is not None else f"#{n}", tuple(shape)))
        return n

    def node(self, array: TrackedArray | str | int) -> int:
        if isinstance(array, TrackedArray):
            if array._wf is not self:
                raise ValueError("that array belongs to another workflow")
            return array._node
        if isinstance(array, int):
            if not 0 <= array < len(self.nodes):
                raise ValueError(f"no array #{array} in this workflow")
            return array
        for n, node in enumerate(self.nodes):
            if node.name == array:
                return n
        raise ValueError(f"no array named {array!r} in this workflow")

    def lineage_bytes(self) -> int:
        """Bytes of the stored (ProvRC + codec) lineage tables of the whole workflow."""
        return sum(t.nbytes for e in self.edges for t in e.tables)

    # --- capture --------------------------------------------------------------------

    def _capture(self, call: Call, family: Family) -> list[int]:
        outs = [self._node(o.shape, None) for o in call.outputs]
        ins = [t._node for t in call.inputs]  # type: ignore[attr-defined]
        shapes: Shapes = (tuple(t.shape for t in call.inputs), tuple(o.shape for o in call.outputs))
        sig = _signature(call, family) if family.reusable and self.reuse is not None else None
        hit = self.reuse.lookup(sig, shapes) if sig is not None and self.reuse is not None else None
        how, reused = family.name, ""
        if hit is not None:
            reused, tables = hit
        else:
            links = family.rule(call)
            if links is None:  # outside what the rule knows: perturbation, never learned
                how, links, sig = BRUTE.name, brute_force(call), None
            tables = _compress(links)
            if sig is not None and self.reuse is not None:
                self.reuse.learn(sig, shapes, tables)
        op = len(self.ops)
        self.ops.append(Op(call.name, how, tuple(ins), tuple(outs), reused))
        self.edges += [self._edge(op, ins[k], outs[o], t) for o, k, t in tables]
        return outs

    def _edge(self, op: int, src: int, dst: int, table: Table) -> Edge:
        if not self.forward_tables:
            return Edge(op, src, dst, table)
        return Edge(op, src, dst, table, compress(_relation(table), "forward"))

    def _link(self, name: str, source: TrackedArray, value: np.ndarray) -> TrackedArray:
        """A node for `value` (numpy's own result) that copies `source`, the composite's
        tracked result, cell by cell."""
        if source.shape != value.shape:
            source = np.reshape(source, value.shape)  # type: ignore[assignment]
        (out,) = self._capture(
            Call(name, np.asarray, (source,), {}, (source,), (value,)), COMPOSITE
        )
        return TrackedArray(value, out, self)

    # --- queries --------------------------------------------------------------------

    def backward(
        self, array: TrackedArray | str | int, cells: Any, to: TrackedArray | str | int
    ) -> np.ndarray:
        """The cells of `to` that the given cells of `array` were computed from."""
        return self._query(self.node(array), cells, self.node(to), backward=True)

    def forward(
        self, array: TrackedArray | str | int, cells: Any, to: TrackedArray | str | int
    ) -> np.ndarray:
        """The cells of `to` that the given cells of `array` contributed to."""
        return self._query(self.node(array), cells, self.node(to), backward=False)

    def _query(self, start: int, cells: Any, target: int, backward: bool) -> np.ndarray:
        shape = self.nodes[start].shape
        boxes = Boxes.of_cells(_cells(cells, shape))
        near: dict[int, list[Edge]] = {}
        for e in self.edges:
            near.setdefault(e.dst if backward else e.src, []).append(e)
        useful = self._between(start, target, backward)
        reach: dict[int, list[Boxes]] = {start: [boxes]}
        order = range(start, target - 1, -1) if backward else range(start, target + 1)
        for n in order:
            if n not in reach or n not in useful:
                continue
            here = Boxes.union(reach.pop(n), len(self.nodes[n].shape)).merged()
            if n == target:
                return here.cells()
            for e in near.get(n, []):
                nxt = e.src if backward else e.dst
                if nxt in useful and len(here):
                    table = e.forward if e.forward is not None and not backward else e.table
                    reach.setdefault(nxt, []).append(hop(table, here, to_input=backward))
        return np.empty((0, len(self.nodes[target].shape)), np.int64)

    def _between(self, start: int, target: int, backward: bool) -> set[int]:
        """Nodes on some path from start to target."""
        after: dict[int, set[int]] = {}
        for e in self.edges:
            a, b = (e.dst, e.src) if backward else (e.src, e.dst)
            after.setdefault(a, set()).add(b)
        before: dict[int, set[int]] = {}
        for a, bs in after.items():
            for b in bs:
                before.setdefault(b, set()).add(a)
        return _reach(start, after) & _reach(target, before)

    # --- persistence ----------------------------------------------------------------

    def save(self, path: str, overwrite: bool = False) -> None:
        from ember.arrays.files import save

        save(self, path, overwrite)


def _reach(start: int, graph: dict[int, set[int]]) -> set[int]:
    seen, todo = {start}, [start]
    while todo:
        for b in graph.get(todo.pop(), ()):
            if b not in seen:
                seen.add(b)
                todo.append(b)
    return seen


def _cells(cells: Any, shape: tuple[int, ...]) -> np.ndarray:
    """Cells as a (k, ndim) int64 array, from index tuples or a boolean mask."""
    arr = np.asarray(cells)
    if arr.dtype == bool:
        if arr.shape != shape:
            raise ValueError(f"a boolean mask must have the array's shape {shape}, not {arr.shape}")
        return np.argwhere(arr)
    if arr.size and arr.dtype.kind not in "iu":
        raise TypeError(f"cells are integer index tuples or a boolean mask, not {arr.dtype}")
    d = len(shape)
    if arr.ndim == 1 and arr.size == d and d:
        arr = arr[None, :]  # one cell given as a tuple
    elif arr.size == 0 and d:
        arr = arr.reshape(0, d)
    elif arr.ndim != 2 or arr.shape[1] != d:
        raise ValueError(
            f"cells of an array of shape {shape} are {d}-tuples, got shape {arr.shape}"
        )
    arr = arr.astype(np.int64)
    if np.any((arr < 0) | (arr >= np.asarray(shape, np.int64))):
        raise IndexError(f"cells outside an array of shape {shape}")
    return arr


def _compress(links: list[Link]) -> Tables:
    grouped: dict[tuple[int, int], list[Relation | Table]] = {}
    for o, k, rel in links:
        grouped.setdefault((o, k), []).append(rel)
    tables = []
    for (o, k), parts in sorted(grouped.items()):
        if len(parts) == 1 and isinstance(parts[0], Table):
            tables.append((o, k, parts[0]))
            continue
        rels = [p if isinstance(p, Relation) else _relation(p) for p in parts]
        first = rels[0]
        rel = Relation(
            np.concatenate([r.out for r in rels]),
            np.concatenate([r.lo for r in rels]),
            np.concatenate([r.hi for r in rels]),
            first.out_shape,
            first.in_shape,
        )
        tables.append((o, k, compress(rel)))
    return tuple(tables)


def _relation(table: Table) -> Relation:
    out, inp = table.decompress()
    return Relation.pairs(out, inp, table.out_shape, table.in_shape)


def _signature(call: Call, family: Family) -> Any:
    """What the lineage may depend on besides shapes: the function and plain arguments.
    Element-wise lineage depends on no plain argument (the output shape is in the key)."""
    elementwise = family.name == catalog.ELEMENTWISE.name

    def fp(obj: Any) -> Any:
        if isinstance(obj, Tracked):
            return ("tracked", call.index(obj))
        if elementwise and not isinstance(obj, list | tuple):
            return "plain"
        if isinstance(obj, np.ndarray):
            digest = hashlib.blake2b(np.ascontiguousarray(obj).tobytes()).hexdigest()
            return ("array", obj.shape, obj.dtype.str, digest)
        if isinstance(obj, list | tuple):
            return (type(obj).__name__, *(fp(x) for x in obj))
        if isinstance(obj, slice):
            return ("slice", obj.start, obj.stop, obj.step)
        return repr(obj)

    return (
        family.name,
        call.name,
        fp(call.args),
        tuple(sorted((k, fp(v)) for k, v in call.kwargs.items())),
    )


# --- dispatch -----------------------------------------------------------------------


def _workflow(inputs: list[Tracked]) -> Workflow:
    wfs = {id(t._wf): t._wf for t in inputs}  # type: ignore[attr-defined]
    if len(wfs) > 1:
        raise ValueError("tracked arrays from different workflows cannot be combined")
    return next(iter(wfs.values()))


def _distinct(objs: list[Tracked]) -> tuple[Tracked, ...]:
    seen: dict[int, Tracked] = {}
    for t in objs:
        seen.setdefault(id(t), t)
    return tuple(seen.values())


def dispatch(
    name: str,
    family: Family | None,
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
) -> Any:
    inputs = _distinct(tracked_in((args, tuple(kwargs.values()))))
    wf = _workflow(list(inputs))
    plain_args, plain_kwargs = tree_map((args, kwargs), lambda t: t._value)
    result = func(*plain_args, **plain_kwargs)
    if func in catalog.METADATA:
        return result
    composite = catalog.COMPOSITES.get(func)
    if composite is not None:
        lineage = composite(*args, **kwargs)
        if lineage is not None:
            return wf._link(name, lineage, np.asarray(result))
    seq = isinstance(result, list | tuple)
    values = tuple(np.asarray(r) for r in result) if seq else (np.asarray(result),)
    if result is None or any(v.dtype.kind not in "biufc" for v in values):
        return result  # files written, strings, objects: no cells to trace
    call = Call(name, func, args, kwargs, inputs, values)
    nodes = wf._capture(call, family or BRUTE)
    wrapped = [TrackedArray(v, n, wf) for v, n in zip(values, nodes, strict=True)]
    if not seq:
        return wrapped[0]
    return type(result)(*wrapped) if hasattr(result, "_fields") else type(result)(wrapped)


def _name(func: Any) -> str:
    return str(getattr(func, "__name__", func))


class TrackedArray(Tracked, NDArrayOperatorsMixin):
    """An ndarray whose cell lineage a Workflow records. `np.asarray(t)` gives the values."""

    __slots__ = ("_node", "_value", "_wf")
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, value: np.ndarray, node: int, wf: Workflow) -> None:
        self._value, self._node, self._wf = value, node, wf

    @property
    def workflow(self) -> Workflow:
        return self._wf

    @property
    def name(self) -> str:
        return self._wf.nodes[self._node].name

    @property
    def shape(self) -> tuple[int, ...]:
        return self._value.shape

    @property
    def ndim(self) -> int:
        return self._value.ndim

    @property
    def size(self) -> int:
        return self._value.size

    @property
    def dtype(self) -> np.dtype[Any]:
        return self._value.dtype

    @property
    def T(self) -> TrackedArray:
        return np.transpose(self)  # type: ignore[return-value]

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """The values: `np.asarray` shares them, `np.array` (copy=True) copies."""
        value = self._value if dtype is None else self._value.astype(dtype, copy=False)
        return value.copy() if copy and value is self._value else value

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if "out" in kwargs or "where" in kwargs:
            raise UnsupportedArrayOperationError(
                f"numpy.{ufunc.__name__}: out= and where= are not tracked"
            )
        family = (
            UFUNC_METHODS.get(method)
            if ufunc.signature is None
            else MATMUL
            if ufunc is np.matmul
            else BRUTE
        )
        if family is None:
            raise UnsupportedArrayOperationError(
                f"numpy.{ufunc.__name__}.{method} on tracked arrays"
            )
        if method in ("reduce", "accumulate"):
            inputs, kwargs = (inputs[0],), {"axis": inputs[1] if len(inputs) > 1 else 0} | kwargs
        func = ufunc if method == "__call__" else getattr(ufunc, method)
        name = ufunc.__name__ if method == "__call__" else f"{ufunc.__name__}.{method}"
        return dispatch(name, family, func, inputs, kwargs)

    def __array_function__(
        self, func: Any, types: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return dispatch(_name(func), catalog.FAMILIES.get(func), func, args, kwargs)

    def __getitem__(self, key: Any) -> TrackedArray:
        family = GETITEM if not tracked_in(key) else Family("movement", getitem, reusable=False)
        return dispatch("getitem", family, operator.getitem, (self, key), {})

    def __setitem__(self, key: Any, value: Any) -> None:
        raise TypeError(
            "tracked arrays are immutable: build a new array (np.where, np.concatenate, ...)"
        )

    def astype(self, dtype: Any) -> TrackedArray:
        return dispatch("astype", ASTYPE, lambda v, d: v.astype(d), (self, dtype), {})

    def reshape(self, *shape: Any, **kwargs: Any) -> TrackedArray:
        return np.reshape(self, shape[0] if len(shape) == 1 else shape, **kwargs)  # type: ignore[return-value]

    def transpose(self, *axes: Any) -> TrackedArray:
        return np.transpose(self, (axes[0] if len(axes) == 1 else axes) or None)  # type: ignore[return-value]

    def flatten(self) -> TrackedArray:
        return np.copy(np.ravel(self))  # type: ignore[return-value]

    def __getattr__(self, name: str) -> Any:
        func = METHODS.get(name)
        if func is None:
            raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")
        return lambda *args, **kwargs: func(self, *args, **kwargs)

    def __len__(self) -> int:
        return len(self._value)

    def __iter__(self) -> Iterator[TrackedArray]:
        return (self[i] for i in range(len(self)))

    def __float__(self) -> float:
        return float(self._value)

    def __int__(self) -> int:
        return int(self._value)

    def __bool__(self) -> bool:
        return bool(self._value)

    def __repr__(self) -> str:
        return f"tracked {self.name}: {self._value!r}"

    def tolist(self) -> Any:
        return self._value.tolist()

    def item(self, *args: Any) -> Any:
        return self._value.item(*args)


METHODS: dict[str, Callable[..., Any]] = {
    name: getattr(np, name)
    for name in (
        "sum", "prod", "mean", "std", "var", "max", "min", "cumsum", "cumprod", "any", "all",
        "argmax", "argmin", "argsort", "clip", "round", "dot", "ravel", "squeeze", "swapaxes",
        "repeat", "take", "diagonal", "trace", "conj", "copy",
    )
}  # fmt: skip
