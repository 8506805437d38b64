"""ember's subpackages form layers that read bottom-up: none imports one above it, so
none is in an import cycle with another (imports inside functions count too)."""

from __future__ import annotations

import ast
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "ember"

# Bottom first. A unit may import units of its own level or below; within a level, no
# two units may import each other (checked as cycles below).
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors", "version", "pools", "progress", "arrow"),
    ("plan",),
    ("engines",),
    ("fetch",),
    ("store",),
    ("query", "rdd", "arrays"),
    ("capture", "infer"),
    ("modes", "apps", "connect"),
    ("__init__",),
    ("cli", "ui", "demo"),
)
LEVEL = {unit: level for level, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    """`ember.store.index` → `store`; `ember` itself → `__init__` (the public facade)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _imports(path: Path) -> set[str]:
    """Every ember module `path` imports, wherever the import statement stands."""
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*up, base] if base else up)
            # `from ember import x` imports submodule ember.x where there is one, else the facade
            found.update(
                f"{base}.{a.name}" if (PACKAGE.parent / base.replace(".", "/") / a.name).exists()
                or (PACKAGE.parent / base.replace(".", "/") / f"{a.name}.py").exists()
                else base
                for a in node.names
            )
    return {m for m in found if m == "ember" or m.startswith("ember.")}


def _graph() -> dict[str, dict[str, set[str]]]:
    """unit → imported unit → the modules that import it (for the failure message)."""
    graph: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path in sorted(PACKAGE.rglob("*.py")):
        here = _unit(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__"))
        for target in _imports(path):
            there = _unit(target)
            if there != here:
                graph[here][there].add(f"{path.relative_to(PACKAGE.parent)} -> {target}")
    return graph


def test_every_unit_has_a_layer() -> None:
    units = {_unit(".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)) for p in PACKAGE.rglob("*.py")}
    assert units <= set(LEVEL), f"give these a place in LAYERS: {sorted(units - set(LEVEL))}"


def test_no_unit_imports_one_above_it() -> None:
    upward = [
        line
        for here, targets in _graph().items()
        for there, lines in targets.items()
        if LEVEL.get(there, -1) > LEVEL.get(here, -1)
        for line in sorted(lines)
    ]
    assert not upward, "imports that run up the layers:\n" + "\n".join(upward)


def test_no_import_cycle_between_units() -> None:
    graph = _graph()

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            unit = todo.pop()
            if unit == goal:
                return True
            if unit not in seen:
                seen.add(unit)
                todo.extend(graph.get(unit, {}))
        return False

    cycles = sorted(
        f"{a} <-> {b}: " + "; ".join(sorted(graph[a][b]))
        for a in graph
        for b in graph[a]
        if a < b or b not in graph
        if reaches(b, a)
    )
    assert not cycles, "import cycles between subpackages:\n" + "\n".join(cycles)


@pytest.mark.parametrize("module", ["ember.plan.ir", "ember.plan.slots", "ember.plan.trees", "ember.plan.workload"])
def test_the_plan_layer_knows_nothing_of_spark(module: str) -> None:
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    tree = ast.parse(path.read_text())
    names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not {n for n in names if n.split(".")[0] in ("pyspark", "py4j", "duckdb")}


def test_the_facade_names_stay_functions_when_their_subpackages_load() -> None:
    """`ember.capture` and `ember.infer` are functions and subpackages both: `import ember`
    resolves them on first use, and loading their modules must not rebind them."""
    code = (
        "import ember, ember.capture.sides, ember.infer.lineage, ember.cli; "
        "assert callable(ember.capture) and callable(ember.infer), (ember.capture, ember.infer); "
        "assert ember.capture.__module__ == 'ember.capture.capture' and ember.infer.__module__ == 'ember.infer.infer'"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
