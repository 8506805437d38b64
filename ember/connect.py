"""ember on Spark Connect: the settings a Connect server needs to serve ember's requests."""

from __future__ import annotations

import shlex

from ember.engines.spark import jar

PLUGIN = "ember.jvm.ConnectPlugin"  # jvm/src/ember/jvm/ConnectPlugin.java


def server_conf() -> dict[str, str]:
    """The settings a Spark Connect server needs to serve ember: its jar and its plugin.

    >>> sorted(server_conf())
    ['spark.connect.extensions.relation.classes', 'spark.jars']
    """
    return {"spark.jars": str(jar.JAR), "spark.connect.extensions.relation.classes": PLUGIN}


def _flags() -> str:
    """`server_conf()` as `--conf` flags for Spark's start scripts.

    >>> _flags().split()[0]
    '--conf'
    """
    return " ".join(f"--conf {shlex.quote(f'{key}={value}')}" for key, value in server_conf().items())


if __name__ == "__main__":  # python -m ember.connect: start-connect-server.sh $(python -m ember.connect)
    print(_flags())
