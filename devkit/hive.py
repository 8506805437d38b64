"""A Hive-enabled local session for the tests: Spark's built-in Hive metastore (embedded
Derby) with its database, warehouse and Derby's log all in one folder, so a run leaves
nothing in the working directory and two runs share no metastore.

A Hive-enabled session cannot share a JVM with the tests' classic session (the catalog is
fixed when the JVM's shared state starts), so its jobs run in a process of their own.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from ember.engines.spark.session import local_spark


def settings(root: Path) -> dict[str, str]:
    """The settings that put a Hive metastore and its warehouse under `root`: what
    `enableHiveSupport()` sets, Derby's database and log, and the warehouse folder."""
    root.mkdir(parents=True, exist_ok=True)
    derby = f"-Dderby.system.home={root} -Dderby.stream.error.file={root / 'derby.log'}"
    return {
        "spark.sql.catalogImplementation": "hive",  # what SparkSession.Builder.enableHiveSupport() sets
        "spark.sql.warehouse.dir": str(root / "warehouse"),
        "spark.hadoop.javax.jdo.option.ConnectionURL": f"jdbc:derby:;databaseName={root / 'metastore_db'};create=true",
        "spark.driver.extraJavaOptions": derby,
    }


def hive_spark(root: Path, app: str = "ember-hive", **conf: str) -> SparkSession:
    """A local[2] session with Hive support whose metastore and warehouse live under `root`."""
    return local_spark(app, **settings(root), **conf)
