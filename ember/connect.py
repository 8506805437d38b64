"""ember on Spark Connect: the settings a Connect server needs to serve ember's requests."""

from __future__ import annotations

from ember.engines.spark import jar

PLUGIN = "ember.jvm.ConnectPlugin"  # jvm/src/ember/jvm/ConnectPlugin.java


def server_conf() -> dict[str, str]:
    """The settings a Spark Connect server needs to serve ember: its jar and its plugin.

    >>> sorted(server_conf())
    ['spark.connect.extensions.relation.classes', 'spark.jars']
    """
    return {"spark.jars": str(jar.JAR), "spark.connect.extensions.relation.classes": PLUGIN}
