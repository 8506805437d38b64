"""The operator-by-pass table (`devkit.passes`): docs/design/operators.md holds the current
one, and every IR node class is handled, refused or named as left to a fallback in every pass."""

from __future__ import annotations

from dataclasses import dataclass

from devkit import passes
from ember.plan import ir


def test_the_committed_table_is_the_generated_one() -> None:
    assert passes.committed() == passes.table().markdown(), (
        "docs/design/operators.md is stale: regenerate with `python -m devkit.passes`"
    )


def test_every_ir_class_has_a_handler_or_a_named_refusal_in_every_pass() -> None:
    problems = passes.table().problems()
    assert not problems, "IR classes some pass does not name:\n" + "\n".join(problems)


def test_every_ir_class_is_a_row() -> None:
    rows = {c.__name__ for c in passes.node_classes()}
    assert {c.__name__ for c in ir.OPERATOR_CLASSES} <= rows
    assert {"Shared", "Numbered", "Keys"} <= rows  # the ember-made ones
    assert not rows & {"Node", "Unary", "Nary"}  # abstract bases


@dataclass(frozen=True)
class Dummy(ir.Unary):
    """An operator no pass knows yet."""


def test_a_new_ir_class_without_handlers_fails_in_every_pass() -> None:
    table = passes.table(extra=[Dummy])
    failing = {p for p in table.cells if table.cells[p]["Dummy"].status in passes.PROBLEMS}
    assert failing == set(table.cells)
    assert all(line.startswith("Dummy: ") for line in table.problems())
