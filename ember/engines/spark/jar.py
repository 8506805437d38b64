"""ember's Java helpers: one prebuilt jar shipped in the package, loaded once per JVM.

The helpers (sources in the repository's `jvm/` folder) are compiled by `make jar` into
`ember-jvm.jar` beside this module, for Java 17 and against the newest supported Spark,
so users need no JDK. The jar loads in a class loader of its own whose parent is Spark's,
so nothing goes on Spark's classpath and no user configuration is needed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ember.engines.spark.jvm import JObj, Jvm
from ember.errors import EmberError

JAR = Path(__file__).with_name("ember-jvm.jar")
BUILD = Path(__file__).with_name("ember-jvm.json")  # what `make jar` built it from
_PACKAGE = "ember.jvm"
# Spark releases the helpers are built and tested for: (major, minor) from, up to (excluded).
SUPPORTED = ((4, 0), (4, 4))

# Per gateway client (a JVM), by the client's id: the helpers' class loader, and one
# instance of each helper by name. The client is kept to tell a new one at a reused id.
_LOADERS: dict[int, tuple[Any, JObj]] = {}
_HELPERS: dict[tuple[int, str], tuple[Any, JObj]] = {}


def helper(jvm: Jvm, name: str) -> JObj:
    """An instance of helper class `name` (`jvm/src/ember/jvm/<name>.java`) in `jvm`'s JVM."""
    client = jvm.jsession._gateway_client
    known = _HELPERS.get((id(client), name))
    if known is None or known[0] is not client:
        made = _loader(jvm).loadClass(f"{_PACKAGE}.{name}").newInstance()
        known = _HELPERS[(id(client), name)] = (client, made)
    return known[1]


def check_version(version: str) -> None:
    """Refuses a Spark release outside `SUPPORTED`, in one line naming the supported ones.

    >>> check_version("4.3.0")
    >>> check_version("3.5.1")
    Traceback (most recent call last):
    ...
    ember.errors.EmberError: ember supports Spark 4.0 to 4.3; this session runs Spark 3.5.1
    """
    (lo, hi) = SUPPORTED
    try:
        running = tuple(int(p) for p in version.split(".")[:2])
    except ValueError:
        running = (0, 0)
    if not lo <= running < hi:
        raise EmberError(
            f"ember supports Spark {lo[0]}.{lo[1]} to {hi[0]}.{hi[1] - 1}; this session runs Spark {version}"
        )


def _loader(jvm: Jvm) -> JObj:
    client = jvm.jsession._gateway_client
    known = _LOADERS.get(id(client))
    if known is None or known[0] is not client:
        check_version(str(jvm.spark.version))
        if not JAR.exists():
            raise EmberError(f"ember's Java helpers are missing from the package ({JAR}): reinstall ember")
        urls = jvm.spark._sc._gateway.new_array(jvm.name("java.net.URL"), 1)  # type: ignore[union-attr]
        urls[0] = jvm.name("java.io.File")(str(JAR)).toURI().toURL()
        loader = jvm.name("java.net.URLClassLoader")(urls, jvm.jsession.getClass().getClassLoader())
        known = _LOADERS[id(client)] = (client, loader)
    return known[1]


def build_facts() -> dict[str, Any]:
    """What the shipped jar was built from: its sources' fingerprint, Java release, Spark."""
    facts: dict[str, Any] = json.loads(BUILD.read_text())
    return facts
