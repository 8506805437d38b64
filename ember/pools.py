"""Thread pools for ember's background work, each made at its first use: importing ember
starts no thread, and a process that never defers a capture never holds that pool."""

from __future__ import annotations

import functools
from concurrent.futures import ThreadPoolExecutor


@functools.cache
def pool(name: str, workers: int = 1) -> ThreadPoolExecutor:
    """The process's pool for `name` (threads named `ember-<name>`), made on first call.

    >>> pool("doc") is pool("doc")
    True
    >>> pool("doc").submit(sum, [1, 2]).result()
    3
    """
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"ember-{name}")
