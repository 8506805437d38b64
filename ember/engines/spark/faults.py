"""Faults the test suite injects into tasks on a standalone cluster, to prove that a
capture survives them with the lineage of a clean run (tests/capture/cluster_job.py).
Inert unless a test sets `FAIL_PARTS_ONCE` or calls `strike` from its own function.

A fault strikes once per marker folder: the first task to create the folder strikes,
every later one (a retry, another task) runs clean. Killing walks up from the Python
worker running the task to the JVM named (Linux: `/proc`), the way a lost machine or an
out-of-memory kill ends it: no shutdown hook, no goodbye to the driver.
"""

from __future__ import annotations

import os
import signal
from typing import Literal

# The first attempt of the first task writing a level's parts strikes after writing them
# (left as orphans), once per marker folder. Value: "<how>:<folder>", or "<folder>" (raise).
FAIL_PARTS_ONCE = "spark.ember.test.failPartsOnce"

Fault = Literal["raise", "kill-executor", "kill-worker"]
_JVMS: dict[Fault, str] = {
    "kill-executor": "CoarseGrainedExecutorBackend",
    "kill-worker": "org.apache.spark.deploy.worker.Worker",
}


def parse(setting: str) -> tuple[Fault, str]:
    """The fault and marker folder a `FAIL_PARTS_ONCE` value names.

    >>> parse("/tmp/m"), parse("kill-executor:/tmp/m")
    (('raise', '/tmp/m'), ('kill-executor', '/tmp/m'))
    """
    how, sep, folder = setting.partition(":")
    if sep and how in ("raise", *_JVMS):
        return how, folder
    return "raise", setting


def first(marker: str) -> bool:
    """Whether this is the first call for `marker` in any process (it creates the folder)."""
    try:
        os.makedirs(marker)
    except FileExistsError:
        return False
    return True


def strike(how: Fault, marker: str) -> None:
    """Raises in the task, or SIGKILLs the executor JVM running it or that executor's worker
    (its pid written to `marker`/killed first, for the test to see it gone)."""
    if how != "raise":
        pid = _ancestor(_JVMS[how])
        with open(os.path.join(marker, "killed"), "w") as f:
            f.write(str(pid))
        os.kill(pid, signal.SIGKILL)
    raise RuntimeError(f"ember test: injected fault ({how})")


def _ancestor(name: str) -> int:
    """The nearest ancestor process whose command line holds `name`."""
    pid = os.getppid()
    while pid > 1:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if name.encode() in f.read():
                return pid
        with open(f"/proc/{pid}/stat") as f:
            pid = int(f.read().rsplit(")", 1)[1].split()[1])
    raise RuntimeError(f"ember test: no process {name!r} above this task")
