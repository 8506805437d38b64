"""ember's thread pools are made at first use: importing ember makes none."""

from __future__ import annotations

import importlib
import pkgutil
from concurrent.futures import Executor

import ember


def test_no_module_holds_a_pool_made_at_import() -> None:
    held = [
        f"{info.name}.{name}"
        for info in pkgutil.walk_packages(ember.__path__, "ember.")
        for name, value in vars(importlib.import_module(info.name)).items()
        if isinstance(value, Executor)
    ]
    assert not held, f"make these with ember.pools.pool at first use: {held}"
