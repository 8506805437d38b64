"""ember's Java helpers (`ember/plan/*.java`): compiled on first use, loaded once per JVM.

They are shipped as source and compiled with `javac` against the running JVM's own
classpath, so they match whatever Spark runs them, and cached per source and Spark
version in ember's cache (`$EMBER_CACHE`, else `~/.cache/ember`). They load in a class
loader of their own (its parent: Spark's), so nothing goes on Spark's classpath.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from ember.engines.spark.jvm import JObj, Jvm
from ember.errors import EmberError

_SOURCES = sorted(Path(__file__).parent.glob("*.java"))
_PACKAGE = "ember.jvm"

# Per gateway client (a JVM), by the client's id: the helpers' class loader, and one
# instance of each helper by name. The client is kept to tell a new one at a reused id.
_LOADERS: dict[int, tuple[Any, JObj]] = {}
_HELPERS: dict[tuple[int, str], tuple[Any, JObj]] = {}


def helper(jvm: Jvm, name: str) -> JObj:
    """An instance of helper class `name` (`ember/engines/spark/<name>.java`) in `jvm`'s JVM."""
    client = jvm.jsession._gateway_client
    known = _HELPERS.get((id(client), name))
    if known is None or known[0] is not client:
        made = _loader(jvm).loadClass(f"{_PACKAGE}.{name}").newInstance()
        known = _HELPERS[(id(client), name)] = (client, made)
    return known[1]


def _loader(jvm: Jvm) -> JObj:
    client = jvm.jsession._gateway_client
    known = _LOADERS.get(id(client))
    if known is None or known[0] is not client:
        classpath = str(jvm.name("java.lang.System.getProperty")("java.class.path"))
        jar = compiled(classpath, str(jvm.spark.version))
        urls = jvm.spark._sc._gateway.new_array(jvm.name("java.net.URL"), 1)  # type: ignore[union-attr]
        urls[0] = jvm.name("java.io.File")(str(jar)).toURI().toURL()
        loader = jvm.name("java.net.URLClassLoader")(urls, jvm.jsession.getClass().getClassLoader())
        known = _LOADERS[id(client)] = (client, loader)
    return known[1]


def compiled(classpath: str, spark_version: str) -> Path:
    """The helpers' jar, compiled once per source and Spark version into ember's cache."""
    digest = hashlib.sha256(b"".join(s.read_bytes() for s in _SOURCES) + spark_version.encode()).hexdigest()[:16]
    cache = Path(os.environ.get("EMBER_CACHE") or Path.home() / ".cache" / "ember")
    jar = cache / "jvm" / f"ember-{digest}.jar"
    if jar.exists():
        return jar
    javac = shutil.which("javac", path=_java_path())
    if javac is None:
        raise EmberError(
            "ember reads and runs Spark plans with small Java classes it compiles on first use, and no "
            "javac was found: install a JDK 17 (e.g. 'apt-get install openjdk-17-jdk-headless')"
        )
    try:
        jar.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise EmberError(f"ember keeps its compiled Java helpers in {jar.parent} and cannot write there ({e}): set EMBER_CACHE to a writable directory") from e
    with tempfile.TemporaryDirectory(dir=jar.parent) as work:
        built = subprocess.run(
            [javac, "-nowarn", "-cp", classpath, "-d", work, *map(str, _SOURCES)], capture_output=True, text=True
        )
        if built.returncode != 0:
            raise EmberError(f"ember could not compile its Java helpers against this Spark: {built.stderr[-2000:]}")
        archive = shutil.make_archive(str(Path(work) / "ember"), "zip", work, "ember")
        os.replace(archive, jar)  # atomic: a concurrent first use sees the jar whole or not at all
    return jar


def _java_path() -> str:
    """PATH with $JAVA_HOME/bin first, where Spark's own launcher looks for Java."""
    home = os.environ.get("JAVA_HOME")
    path = os.environ.get("PATH", "")
    return f"{home}/bin{os.pathsep}{path}" if home else path
