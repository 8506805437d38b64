"""Eager capture: rewrite the plan so lineage flows through it, run it, index the result."""
