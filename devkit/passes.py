"""Which pass handles which IR operator: the operator-by-pass table, read from the code.

Rows are the node classes of `ember.plan.ir` (found by introspection: every concrete
`Node` subclass). Columns are the passes a plan goes through, each read by a small
introspection of its own source, so the table follows the code as it is refactored:

- import (`engines/spark`, all but `build.py`): which IR classes it constructs;
- placement (`capture/policy/`), rewrite (the rest of `capture/`) and Spark build
  (`engines/spark/`): the `_<NodeClass>` method
  convention, on any class that dispatches with `getattr(self, f"_{type(node).__name__}")`;
  an alias (`_Filter = _unary`) is a generic handler;
- DuckDB (`engines/duck/`; `capture/local/`, `infer/block.py` too, should a dispatch
  live there): the same convention, behind the allow-list of classes each of its modes
  reads (`if kind not in READS[mode]: return False`), which declines all others;
- lazy push-down (`infer/pushdown.py`, guarded by `infer/infer.py`): the convention,
  and its `getattr` default as the generic fallback;
- oracle (`tests/oracle/rows.py`): the oracle knows nothing of ember (that is its point),
  so which of its rules states each operator's lineage is declared here (`ORACLE`) and
  checked against the functions it defines.

A refusal is an unconditional `if isinstance(node, ir.<NodeClass>): raise
UnsupportedOperatorError(...)` in a pass's modules, or a handler that only raises. A class
left to a pass's fallback (a default method, or a dispatch that declines what it does not
name) must be acknowledged in `FALLBACK_OK`, so a new IR class never slips into a generic
path unnoticed; ember-made classes (built by capture, never imported) are not expected in
passes that only see imported plans.

`python -m devkit.passes` writes the table into docs/design/operators.md (between its
markers) and prints it; `tests/test_passes.py` checks it is current and complete.
"""

from __future__ import annotations

import ast
import enum
import functools
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ember.plan import ir

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "design" / "operators.md"
START, END = "<!-- passes:start -->", "<!-- passes:end -->"
REFUSAL = "UnsupportedOperatorError"

# Classes a pass leaves to its fallback on purpose: pass → class name → why.
FALLBACK_OK: dict[str, dict[str, str]] = {
    "placement": dict.fromkeys(
        ("Scan", "Filter", "Project", "Passthrough", "Limit", "Union", "Window", "Generate", "Expand"),
        "nothing to place: its inputs are walked, with what it passes on of the result's reach",
    ),
    "push-down": {
        "Passthrough": "keeps each input row's columns, so constraints pass it unchanged",
    },
    "DuckDB": {
        "Passthrough": "Spark computes it (sorts, repartitions, samples, Python UDFs)",
        "Limit": "not compiled: Spark computes it",
        "Generate": "not compiled: Spark computes it",
        "GroupMap": "a Python function: Spark runs it",
        "PartitionMap": "a Python function over Spark's partitions: Spark runs it",
        "Keys": "read only as a join's wanted keys",
    },
}

# The oracle's rule for each operator: functions of tests/oracle/rows.py, or how the tests
# state it without one.
ORACLE: dict[str, tuple[str, ...] | str] = {
    "Scan": ("scan",),
    "Filter": ("where",),
    "Project": ("select",),
    "Passthrough": ("select",),
    "Limit": "by hand: the kept rows of the oracle's",
    "Join": ("join", "semi", "anti"),
    "Aggregate": ("group", "distinct", "set_op"),
    "Union": "by hand: the inputs' rows together",
    "Window": ("window",),
    "Generate": "by hand: each row once per generated value",
    "Expand": ("select", "group"),
    "GroupMap": ("group",),
    "PartitionMap": "by hand: the tests know each partition's rows",
}
ORACLE_MODULE = "tests/oracle/rows.py"


class Status(enum.Enum):
    HANDLED = "handled"
    PARTLY = "partly"  # handled in some cases (of a kind, under a parent), declined otherwise
    GENERIC = "generic"  # a handler shared with other classes, or an acknowledged fallback
    REFUSED = "refused"
    DECLINED = "declined"  # an acknowledged fallback that leaves the node to Spark
    NA = "n/a"  # an ember-made class in a pass that only sees imported plans
    UNACKNOWLEDGED = "unacknowledged fallback"
    MISSING = "missing"


# Best first: a pass with several dispatchers takes the best of their answers.
_RANK = [Status.HANDLED, Status.PARTLY, Status.GENERIC, Status.REFUSED, Status.DECLINED,
         Status.NA, Status.UNACKNOWLEDGED, Status.MISSING]  # fmt: skip
PROBLEMS = (Status.UNACKNOWLEDGED, Status.MISSING)


@dataclass(frozen=True)
class Cell:
    status: Status
    where: tuple[str, ...] = ()  # the functions that decide it
    note: str = ""

    def markdown(self) -> str:
        names = ", ".join(f"`{w}`" for w in self.where)
        text = {
            Status.HANDLED: f"✓ {names}",
            Status.PARTLY: f"✓ partly: {names}",
            Status.GENERIC: f"generic {names}",
            Status.REFUSED: f"✗ refused: {names}",
            Status.DECLINED: "declined",
            Status.NA: "—",
            Status.UNACKNOWLEDGED: f"**{'declined: not in' if self.note == 'declines' else 'fallback'} {names}, unacknowledged**",
            Status.MISSING: "**missing**",
        }[self.status]
        if not self.where and self.status in (Status.HANDLED, Status.PARTLY, Status.GENERIC):
            return self.note  # a rule stated without a function (the oracle's by hand)
        return f"{text} ({self.note})" if self.note and self.note != "declines" else text


def _best(cells: Iterable[Cell]) -> Cell:
    found = sorted(cells, key=lambda c: _RANK.index(c.status))
    if not found:
        return Cell(Status.MISSING)
    top = [c for c in found if c.status == found[0].status]
    return Cell(found[0].status, tuple(dict.fromkeys(w for c in top for w in c.where)), "; ".join(
        dict.fromkeys(c.note for c in top if c.note)))  # fmt: skip


# --- the IR --------------------------------------------------------------------------


def node_classes(extra: Sequence[type[ir.Node]] = ()) -> list[type[ir.Node]]:
    """Every concrete node class of the IR (and `extra` ones): the operators first, in the
    README's order, then the ember-made ones. A class other IR classes derive from is
    abstract (`Unary`, `Nary`) unless it is an operator itself (`GroupMap`)."""
    found = [c for c in vars(ir).values() if isinstance(c, type) and issubclass(c, ir.Node) and c.__module__ == ir.__name__]
    found += [c for c in extra if c not in found]
    bases = {b for c in found for b in c.__mro__[1:]}
    concrete = [c for c in found if c not in bases or c in ir.OPERATOR_CLASSES]
    return sorted(concrete, key=lambda c: (c not in ir.OPERATOR_CLASSES, _position(c, concrete)))


def _position(cls: type[ir.Node], classes: list[type[ir.Node]]) -> int:
    return ir.OPERATOR_CLASSES.index(cls) if cls in ir.OPERATOR_CLASSES else classes.index(cls)


def ember_made(classes: Sequence[type[ir.Node]]) -> set[str]:
    """Classes capture builds that import never does: not operators, constructed in capture."""
    built = set(constructed(_modules("ember/capture/**/*.py")))
    return {c.__name__ for c in classes if c not in ir.OPERATOR_CLASSES and c.__name__ in built}


# --- reading modules -------------------------------------------------------------------


@dataclass
class Module:
    path: Path
    tree: ast.Module
    ir_modules: set[str] = field(default_factory=set)  # names bound to ember.plan.ir
    ir_names: dict[str, str] = field(default_factory=dict)  # local name → IR name imported as

    @property
    def shown(self) -> str:
        return str(self.path.relative_to(ROOT))

    def ir_class(self, e: ast.expr) -> str | None:
        """The IR name `e` stands for (`ir.Scan`, or `Scan` imported from ember.plan.ir)."""
        if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id in self.ir_modules:
            return e.attr
        if isinstance(e, ast.Name):
            return self.ir_names.get(e.id)
        return None

    def ir_classes(self, e: ast.expr) -> list[str] | None:
        """The IR names of an isinstance target: one, a tuple or a union of them."""
        if isinstance(e, ast.Tuple):
            parts = [self.ir_classes(x) for x in e.elts]
        elif isinstance(e, ast.BinOp) and isinstance(e.op, ast.BitOr):
            parts = [self.ir_classes(e.left), self.ir_classes(e.right)]
        else:
            one = self.ir_class(e)
            return None if one is None else [one]
        return None if any(p is None for p in parts) else [n for p in parts if p is not None for n in p]

    def isinstance_of(self, e: ast.expr, subject: str) -> list[str] | None:
        """The IR classes `e` tests `subject` against, when `e` is `isinstance(subject, ...)`."""
        if (
            isinstance(e, ast.Call) and isinstance(e.func, ast.Name) and e.func.id == "isinstance"
            and len(e.args) == 2 and ast.unparse(e.args[0]) == subject
        ):  # fmt: skip
            return self.ir_classes(e.args[1])
        return None


def _read(path: Path) -> Module:
    return _parsed(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=512)
def _parsed(path: Path, mtime: int) -> Module:
    """A module read once per version of its file (`mtime`: the cache key only)."""
    module = Module(path, ast.parse(path.read_text()))
    for node in ast.walk(module.tree):
        if isinstance(node, ast.ImportFrom) and node.module == "ember.plan":
            module.ir_modules.update(a.asname or a.name for a in node.names if a.name == "ir")
        elif isinstance(node, ast.ImportFrom) and node.module == "ember.plan.ir":
            module.ir_names.update({a.asname or a.name: a.name for a in node.names})
        elif isinstance(node, ast.Import):
            module.ir_modules.update(a.asname for a in node.names if a.name == "ember.plan.ir" and a.asname)
    return module


def _modules(*patterns: str, but: Sequence[str] = ()) -> list[Module]:
    paths = sorted({p for pattern in patterns for p in ROOT.glob(pattern) if p.is_file()})
    return [_read(p) for p in paths if str(p.relative_to(ROOT)) not in but]


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name, definition) of every function, methods and nested ones included."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield prefix + node.name, node
            yield from _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def _raises_refusal(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.Raise) or stmt.exc is None:
        return False
    exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
    return (isinstance(exc, ast.Name) and exc.id == REFUSAL) or (isinstance(exc, ast.Attribute) and exc.attr == REFUSAL)


def _refuses_some(fn: ast.AST) -> bool:
    return any(isinstance(n, ast.stmt) and _raises_refusal(n) for n in ast.walk(fn))


def _body(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    """A function's statements, its docstring left out."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
        return body[1:]
    return body


# --- import: the IR classes it constructs -------------------------------------------------


def constructed(modules: Sequence[Module]) -> dict[str, list[str]]:
    """IR class name → the functions (by name) that construct it."""
    found: dict[str, list[str]] = {}
    for m in modules:
        for name, fn in _functions(m.tree):
            for call in ast.walk(fn):
                if isinstance(call, ast.Call) and (cls := m.ir_class(call.func)) is not None:
                    where = found.setdefault(cls, [])
                    if name.rsplit(".", 1)[-1] not in where:
                        where.append(name.rsplit(".", 1)[-1])
    return found


# --- refusals: `if isinstance(node, ir.X): raise UnsupportedOperatorError` ----------------


def refusals(modules: Sequence[Module]) -> list[tuple[list[str], str]]:
    """(IR classes, the function) for each unconditional refusal of a class of nodes."""
    found = []
    for m in modules:
        for name, fn in _functions(m.tree):
            for node in ast.walk(fn):
                if not (isinstance(node, ast.If) and node.body and _raises_refusal(node.body[0])):
                    continue
                test = node.test
                if isinstance(test, ast.Call) and isinstance(test.func, ast.Name) and test.func.id == "isinstance" and len(test.args) == 2:
                    classes = m.ir_classes(test.args[1])
                    if classes:
                        found.append((classes, name.rsplit(".", 1)[-1]))
    return found


# --- dispatchers --------------------------------------------------------------------------


@dataclass
class Dispatcher:
    """One way a pass picks what to do with a node: a class of `_<NodeClass>` handlers."""

    where: str  # shown in the table's sources
    answer: Callable[[type[ir.Node]], Cell]


def _type_names(fn: ast.AST) -> set[str]:
    """Local names a function binds to `type(node).__name__`."""
    return {
        target.id
        for n in ast.walk(fn)
        if isinstance(n, ast.Assign) and _is_type_name(n.value)
        for target in n.targets
        if isinstance(target, ast.Name)
    }


def _is_type_name(e: ast.expr, names: set[str] | None = None) -> bool:
    """`type(node).__name__`, or a local name bound to it."""
    if isinstance(e, ast.Name):
        return e.id in (names or set())
    return (
        isinstance(e, ast.Attribute) and e.attr == "__name__" and isinstance(e.value, ast.Call)
        and isinstance(e.value.func, ast.Name) and e.value.func.id == "type"
    )  # fmt: skip


def _is_type_name_getattr(call: ast.AST, names: set[str]) -> bool:
    """`getattr(self, f"_{type(node).__name__}"[, default])` (or the name in a local first)."""
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "getattr" and len(call.args) >= 2):
        return False
    name = call.args[1]
    return isinstance(name, ast.JoinedStr) and any(
        isinstance(v, ast.FormattedValue) and _is_type_name(v.value, names) for v in name.values
    )


def _allowed(m: Module, fn: ast.FunctionDef | ast.AsyncFunctionDef, names: set[str]) -> tuple[str, dict[str, set[str]]] | None:
    """An allow-list the dispatch checks first (`if kind not in READS[mode]: return ...`):
    its name, and mode → the class names it reads (one mode, "", for a plain set)."""
    for n in ast.walk(fn):
        if not (isinstance(n, ast.If) and isinstance(n.test, ast.Compare) and len(n.test.ops) == 1):
            continue
        if not (isinstance(n.test.ops[0], ast.NotIn) and _is_type_name(n.test.left, names)):
            continue
        listed = n.test.comparators[0]
        name = listed.value if isinstance(listed, ast.Subscript) else listed
        if isinstance(name, ast.Name) and (value := _module_value(m, name.id)) is not None:
            return name.id, value
    return None


def _module_value(m: Module, name: str) -> dict[str, set[str]] | None:
    for stmt in m.tree.body:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target] if isinstance(stmt, ast.AnnAssign) else []
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if value is None or not any(isinstance(x, ast.Name) and x.id == name for x in targets):
            continue
        if isinstance(value, ast.Dict):
            return {ast.unparse(k).strip("'\""): _strings(v) for k, v in zip(value.keys, value.values, strict=True) if k is not None}
        return {"": _strings(value)}
    return None


def _strings(e: ast.expr) -> set[str]:
    return {n.value for n in ast.walk(e) if isinstance(n, ast.Constant) and isinstance(n.value, str)}


def convention(modules: Sequence[Module]) -> list[Dispatcher]:
    """Classes that dispatch on `_<NodeClass>` methods (their bases among `modules` too)."""
    classes = {c.name: (m, c) for m in modules for c in ast.walk(m.tree) if isinstance(c, ast.ClassDef)}
    found = []
    for m, cls in classes.values():
        method, call, names = next(
            ((f, n, names) for f in cls.body if isinstance(f, ast.FunctionDef | ast.AsyncFunctionDef)
             for names in [_type_names(f)] for n in ast.walk(f) if _is_type_name_getattr(n, names)),
            (None, None, set()),
        )  # fmt: skip
        if method is None or not isinstance(call, ast.Call):
            continue
        defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
        aliases: dict[str, str] = {}
        for c in _lineage(cls, classes):
            for stmt in c.body:
                if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                    defs.setdefault(stmt.name, stmt)
                elif isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Name):
                    for t in stmt.targets:
                        if isinstance(t, ast.Name):
                            aliases.setdefault(t.id, stmt.value.id)
        default = call.args[2] if len(call.args) > 2 else None
        fallback = default.attr if isinstance(default, ast.Attribute) else None
        domain = _asserted_classes(m, defs[fallback]) if fallback in defs else None
        allowed = _allowed(m, method, names)
        answer = _by_convention(defs, aliases, fallback, domain, allowed)
        found.append(Dispatcher(f"{cls.name}.{method.name} in {m.shown}", answer))
    return found


def _lineage(cls: ast.ClassDef, classes: dict[str, tuple[Module, ast.ClassDef]]) -> list[ast.ClassDef]:
    """The class and its bases found among the modules read, nearest first."""
    out = [cls]
    for b in cls.bases:
        if isinstance(b, ast.Name) and b.id in classes and classes[b.id][1] is not cls:
            out += _lineage(classes[b.id][1], classes)
    return out


def _asserted_classes(m: Module, fn: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[str, ...] | None:
    """The IR classes a fallback asserts its node is (None: any node)."""
    subject = fn.args.args[1].arg if len(fn.args.args) > 1 else ""
    for stmt in _body(fn):
        if isinstance(stmt, ast.Assert) and (classes := m.isinstance_of(stmt.test, subject)):
            return tuple(classes)
    return None


def _by_convention(
    defs: dict[str, ast.FunctionDef | ast.AsyncFunctionDef],
    aliases: dict[str, str],
    fallback: str | None,
    domain: tuple[str, ...] | None,
    allowed: tuple[str, dict[str, set[str]]] | None,
) -> Callable[[type[ir.Node]], Cell]:
    listed, reads = allowed if allowed is not None else ("", None)

    def answer(cls: type[ir.Node]) -> Cell:
        name = f"_{cls.__name__}"  # dispatch is by the exact class name: no inheritance
        modes = sorted(mode for mode, kinds in (reads or {}).items() if cls.__name__ in kinds)
        if reads is not None and not modes:  # not on the allow-list: declined before dispatch
            return Cell(Status.UNACKNOWLEDGED, (listed,), "declines")
        partly = reads is not None and len(modes) < len(reads)
        where = f"{', '.join(modes)} mode only" if partly else ""
        if name in aliases:
            return Cell(Status.GENERIC, (aliases[name],), where)
        if name in defs:
            fn = defs[name]
            body = _body(fn)
            if len(body) == 1 and _raises_refusal(body[0]):
                return Cell(Status.REFUSED, (name,))
            notes = [n for n in (where, "refuses some" if _refuses_some(fn) else "") if n]
            return Cell(Status.PARTLY if partly else Status.HANDLED, (name,), "; ".join(notes))
        if fallback is not None and (domain is None or any(b.__name__ in domain for b in cls.__mro__)):
            return Cell(Status.UNACKNOWLEDGED, (fallback,))
        return Cell(Status.MISSING)

    return answer


# --- the passes -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Pass:
    name: str
    sees_made: bool  # whether ember-made classes reach it (it reads rewritten plans)
    read: Callable[[list[type[ir.Node]]], tuple[dict[str, Cell], list[str]]]  # cells by class, sources


def _dispatched(
    name: str, modules: list[Module], found: list[Dispatcher], guards: list[Module]
) -> Callable[[list[type[ir.Node]]], tuple[dict[str, Cell], list[str]]]:
    def read(classes: list[type[ir.Node]]) -> tuple[dict[str, Cell], list[str]]:
        if not found:
            shown = ", ".join(m.shown for m in modules) or "no module"
            raise LookupError(f"devkit.passes: no dispatcher found for the {name} pass in {shown}")
        refused = refusals(guards)
        cells = {}
        for cls in classes:
            names = {b.__name__ for b in cls.__mro__}
            guard = [where for ir_classes, where in refused if names & set(ir_classes)]
            if guard:
                cells[cls.__name__] = Cell(Status.REFUSED, tuple(dict.fromkeys(guard)))
                continue
            cells[cls.__name__] = _best(d.answer(cls) for d in found)
        sources = [d.where for d in found] + [f"refusals in {m.shown}" for m in guards if refusals([m])]
        return cells, sources

    return read


def _import(classes: list[type[ir.Node]]) -> tuple[dict[str, Cell], list[str]]:
    modules = _modules("ember/engines/spark/**/*.py", but=["ember/engines/spark/build.py", "ember/engines/spark/plan_in.py"])
    made = constructed(modules)
    if not made:
        raise LookupError("devkit.passes: no module of ember/engines/spark constructs IR nodes")
    cells = {c.__name__: Cell(Status.HANDLED, tuple(made[c.__name__])) if c.__name__ in made else Cell(Status.MISSING) for c in classes}
    names = {c.__name__ for c in classes}
    sources = [f"constructors in {m.shown}" for m in modules if names & set(constructed([m]))]
    return cells, sources


def _oracle(classes: list[type[ir.Node]]) -> tuple[dict[str, Cell], list[str]]:
    module = _read(ROOT / ORACLE_MODULE)
    defined = {fn.name for fn in module.tree.body if isinstance(fn, ast.FunctionDef)}
    cells = {}
    for c in classes:
        rule = ORACLE.get(c.__name__)
        if rule is None:
            cells[c.__name__] = Cell(Status.MISSING, (), "no entry in devkit.passes.ORACLE")
        elif isinstance(rule, str):
            cells[c.__name__] = Cell(Status.GENERIC, (), rule)
        elif set(rule) <= defined:
            cells[c.__name__] = Cell(Status.HANDLED, tuple(f"o.{r}" for r in rule))
        else:
            cells[c.__name__] = Cell(Status.MISSING, (), f"no {', '.join(sorted(set(rule) - defined))} in {ORACLE_MODULE}")
    return cells, [f"`ORACLE` in devkit/passes.py, over {ORACLE_MODULE}"]


def passes() -> list[Pass]:
    policy = _modules("ember/capture/policy/**/*.py")
    capture = _modules("ember/capture/**/*.py", but=[m.shown for m in policy])
    spark = _modules("ember/engines/spark/**/*.py")
    duck = _modules(
        "ember/engines/duck/**/*.py", "ember/capture/local/**/*.py", "ember/infer/block.py"
    )
    pushdown = _modules("ember/infer/pushdown.py")
    guards = _modules("ember/infer/infer.py")
    return [
        Pass("import", False, _import),
        Pass("placement", False, _dispatched("placement", policy, convention(policy), policy)),
        Pass("rewrite", False, _dispatched("rewrite", capture, convention(capture), capture)),
        Pass("Spark build", True, _dispatched("Spark build", spark, convention(spark), _modules("ember/engines/spark/build.py"))),
        Pass("DuckDB", True, _dispatched("DuckDB", duck, convention(duck), duck)),
        Pass("push-down", False, _dispatched("push-down", pushdown, convention(pushdown), pushdown + guards)),
        Pass("oracle", False, _oracle),
    ]


@dataclass(frozen=True)
class Table:
    classes: list[type[ir.Node]]
    made: set[str]
    cells: dict[str, dict[str, Cell]]  # pass → class → cell
    sources: dict[str, list[str]]

    def problems(self) -> list[str]:
        """Every class a pass neither handles nor names (refused, generic, acknowledged)."""
        out = []
        for p, cells in self.cells.items():
            for c in self.classes:
                cell = cells[c.__name__]
                if cell.status in PROBLEMS:
                    fallback = f"declines it (not in {', '.join(cell.where)})" if cell.note == "declines" else (
                        f"falls to {', '.join(cell.where)}")  # fmt: skip
                    what = "has no handler" if cell.status == Status.MISSING else (
                        f"{fallback} unacknowledged: handle it, or give a reason in devkit.passes.FALLBACK_OK[{p!r}]")
                    note = f" ({cell.note})" if cell.note and cell.note != "declines" else ""
                    out.append(f"{c.__name__}: the {p} pass {what}{note}")
        return out

    def markdown(self) -> str:
        names = list(self.cells)
        lines = ["| IR node | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
        for c in self.classes:
            label = f"`{c.__name__}`" + (" (ember-made)" if c.__name__ in self.made else "")
            lines.append(f"| {label} | " + " | ".join(self.cells[p][c.__name__].markdown() for p in names) + " |")
        lines += ["", "Read from:", ""]
        lines += [f"- {p}: " + "; ".join(f"`{s}`" if " in " not in s else s for s in self.sources[p]) for p in names]
        acknowledged: dict[tuple[str, str], list[str]] = {}
        for p, reasons in FALLBACK_OK.items():
            for c in self.classes:
                why = reasons.get(c.__name__)
                if why is not None and p in self.cells and self.cells[p][c.__name__].status in (Status.GENERIC, Status.DECLINED):
                    acknowledged.setdefault((p, why), []).append(f"`{c.__name__}`")
        if acknowledged:
            lines += ["", "Left to a pass's fallback on purpose (`FALLBACK_OK`):", ""]
            lines += [f"- {p}: {', '.join(cs)}: {why}" for (p, why), cs in acknowledged.items()]
        return "\n".join(lines)


def table(extra: Sequence[type[ir.Node]] = ()) -> Table:
    """The operator-by-pass table of the tree as it is (with `extra` IR classes, to test it)."""
    classes = node_classes(extra)
    made = ember_made(classes)
    cells: dict[str, dict[str, Cell]] = {}
    sources: dict[str, list[str]] = {}
    for p in passes():
        read, sources[p.name] = p.read(classes)
        ok = FALLBACK_OK.get(p.name, {})
        for c in classes:
            cell = read[c.__name__]
            if cell.status == Status.UNACKNOWLEDGED and c.__name__ in ok:
                cell = Cell(Status.DECLINED if cell.note == "declines" else Status.GENERIC, cell.where)
            if cell.status in PROBLEMS and c.__name__ in made and not p.sees_made:
                cell = Cell(Status.NA)
            read[c.__name__] = cell
        cells[p.name] = read
    return Table(classes, made, cells, sources)


def committed(page: Path = PAGE) -> str | None:
    """The table as docs/design/operators.md holds it (None: no markers there)."""
    if not page.exists():
        return None
    text = page.read_text()
    if START not in text or END not in text:
        return None
    return text.split(START, 1)[1].split(END, 1)[0].strip("\n")


INTRO = """# Operators and the passes over them

Which pass of ember handles which operator of the plan IR (`ember/plan/ir.py`), read from
the code by `devkit/passes.py`. Regenerate the table with `python -m devkit.passes`;
`tests/test_passes.py` fails when it is stale, or when an IR class has neither a handler
nor an explicit refusal or pass-through in some pass.

- **import**: Spark's optimized plan → IR (`engines/spark/plan_import.py`): the functions
  that build each IR class.
- **placement**: capture's placement policy (`capture/policy/`): where an operator's
  lineage goes (inline lists, side tables, keys, DuckDB after the job).
- **rewrite**: the capture rewrite (`capture/annotate.py`): the slots and side tables each
  operator gets.
- **Spark build**: the rewritten IR → a Catalyst plan (`engines/spark/plan_in.py`
  writes the one message the jar builds; `engines/spark/build.py` builds through py4j
  what needs Python or Spark's analyzer).
- **DuckDB**: the IR → DuckDB SQL compiler (`engines/duck/compile.py`), which reads side
  tables after the job (its plan mode) and lazy lineage's blocks (its lineage mode) in
  process; what it declines, Spark computes.
- **push-down**: lazy lineage's predicate push-down (`infer/pushdown.py`), behind the
  refusals of `ember.infer`.
- **oracle**: the tests' pure-Python oracle (`tests/oracle/rows.py`), which states each
  rule without ember's code.

✓: a handler of its own; partly: handled in some cases only (a mode), declined otherwise;
generic: a handler shared with other operators, or the pass's default, acknowledged in
`devkit.passes.FALLBACK_OK`; ✗ refused: ember fails loudly, naming the operator;
declined: left to Spark; —: an ember-made node (built by capture) that the pass never
sees; "refuses some": the handler refuses some cases of the operator.
"""


def write(page: Path = PAGE) -> str:
    """Writes the table between the page's markers (making the page if there is none)."""
    made = table().markdown()
    text = page.read_text() if page.exists() else INTRO + f"\n{START}\n{END}\n"
    if START not in text or END not in text:
        text = text.rstrip("\n") + f"\n\n{START}\n{END}\n"
    head, rest = text.split(START, 1)
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(f"{head}{START}\n{made}\n{END}{rest.split(END, 1)[1]}")
    return made


def main(argv: Sequence[str] = ()) -> int:
    """Writes the table into docs/design/operators.md and prints it; `--check` only compares."""
    if "--check" in argv:
        ok = committed() == table().markdown()
        print("operators.md is current" if ok else "operators.md is stale: run `python -m devkit.passes`")
        return 0 if ok else 1
    print(write())
    problems = table().problems()
    for p in problems:
        print(f"problem: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
