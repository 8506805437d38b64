"""Cell-level lineage for numpy pipelines (DSLog): capture, ProvRC compression, in-situ queries.

    from ember import arrays
    wf = arrays.Workflow()
    a = wf.track(np.random.rand(300, 200), name="a")
    b = np.sum(-a + 1, axis=1)            # plain numpy; b is tracked too
    wf.backward(b, [(5,)], to=a)          # cells of a behind b[5], as an (k, 2) int64 array
    wf.forward(a, [(3, 4)], to=b)         # cells of b that a[3, 4] reached
    wf.lineage_bytes()                    # a few hundred bytes instead of megabytes
    wf.save("lineage/"); arrays.load("lineage/").backward("#3", [(5,)], to="a")

Cells are 0-based tuples or a boolean mask of the array's shape. See docs/arrays.md for
the rules per numpy function, what is reused, and what falls back to perturbation.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ember.arrays.files import load
from ember.arrays.reuse import Reuse
from ember.arrays.rules import LineageWarning, UnsupportedArrayOperationError
from ember.arrays.track import TrackedArray, Workflow

__all__ = [
    "LineageWarning",
    "Reuse",
    "TrackedArray",
    "UnsupportedArrayOperationError",
    "Workflow",
    "default_workflow",
    "filter2d",
    "load",
    "track",
]

_default: Workflow | None = None


def default_workflow() -> Workflow:
    """The workflow `track` records into (created on first use)."""
    global _default
    if _default is None:
        _default = Workflow()
    return _default


def track(value: Any, name: str | None = None) -> TrackedArray:
    """Track `value` in the default workflow; `t.workflow` answers queries."""
    return default_workflow().track(value, name)


def filter2d(image: Any, kernel: Any, mode: str = "same") -> Any:
    """2-D correlation (what image filters apply) in plain numpy: zero padding for "same",
    none for "valid". Built from pad, sliding windows, a product and a sum, so on tracked
    arrays its lineage is exactly the window each output pixel read."""
    kh, kw = np.shape(kernel)
    if mode == "same":
        image = np.pad(image, ((kh // 2, kh - 1 - kh // 2), (kw // 2, kw - 1 - kw // 2)))
    elif mode != "valid":
        raise ValueError(f"mode must be 'same' or 'valid', not {mode!r}")
    windows = np.lib.stride_tricks.sliding_window_view(image, (kh, kw))
    return np.sum(windows * kernel, axis=(-2, -1))
