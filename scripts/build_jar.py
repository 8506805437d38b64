"""`make jar`: compiles ember's Java helpers (jvm/src) into the jar the package ships.

Compiled for Java 17 against the PySpark installed in the virtualenv (the newest Spark
ember supports), and packed with fixed timestamps and order, so the same sources and Spark
give the same bytes. The shims for older releases (jvm/shims/<release>/src) are compiled
against that release's stubs (jvm/shims/<release>/stubs, not packed) and the helpers, so
one jar runs on all of them (jvm/shims/README.md). Beside the jar, ember-jvm.json records
the sources' fingerprint, which a test compares with the sources to catch a jar that was
not rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pyspark

ROOT = Path(__file__).resolve().parents[1]
JVM = ROOT / "jvm"
SOURCES = JVM / "src"
SHIMS = JVM / "shims"
OUT = ROOT / "ember" / "engines" / "spark"
RELEASE = "17"


def sources() -> list[Path]:
    """Every Java source the jar is built from: the helpers, and each shim with its stubs."""
    return sorted([*SOURCES.rglob("*.java"), *SHIMS.rglob("*.java")])


def fingerprint() -> str:
    """The sources' SHA-256, over their paths and bytes in path order."""
    digest = hashlib.sha256()
    for path in sources():
        digest.update(path.relative_to(JVM).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def javac(classpath: list[str | Path], out: Path, files: list[Path]) -> bool:
    built = subprocess.run(
        ["javac", "--release", RELEASE, "-nowarn", "-cp", ":".join(map(str, classpath)), "-d", str(out), *map(str, files)],
        capture_output=True,
        text=True,
    )
    if built.returncode != 0:
        print(built.stderr, file=sys.stderr)
    return built.returncode == 0


def main() -> int:
    spark = Path(pyspark.__file__).parent / "jars" / "*"
    with tempfile.TemporaryDirectory() as work:
        made = Path(work) / "classes"
        if not javac([spark], made, sorted(SOURCES.rglob("*.java"))):
            return 1
        for shim in sorted(p for p in SHIMS.iterdir() if p.is_dir()):
            stubs = Path(work) / "stubs" / shim.name
            if not javac([spark], stubs, sorted((shim / "stubs").rglob("*.java"))):
                return 1
            if not javac([stubs, made, spark], made, sorted((shim / "src").rglob("*.java"))):
                return 1
        classes = sorted(p for p in made.rglob("*.class"))
        fresh = OUT / "ember-jvm.jar.new"
        with zipfile.ZipFile(fresh, "w", zipfile.ZIP_DEFLATED) as jar:
            for path in classes:
                info = zipfile.ZipInfo(path.relative_to(made).as_posix(), date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                jar.writestr(info, path.read_bytes())
        fresh.replace(OUT / "ember-jvm.jar")  # a new file: a running JVM goes on reading the one it opened
    facts = {
        "sources": [p.relative_to(ROOT).as_posix() for p in sources()],
        "sha256": fingerprint(),
        "java_release": int(RELEASE),
        "built_against_spark": pyspark.__version__,
    }
    (OUT / "ember-jvm.json").write_text(json.dumps(facts, indent=1) + "\n")
    print(f"wrote {OUT / 'ember-jvm.jar'} ({len(classes)} classes, Spark {pyspark.__version__})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
