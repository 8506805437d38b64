"""Titian-style row-level lineage for PySpark RDD programs.

    lc = LineageContext(sc)
    counts = lc.textFile(path).flatMap(str.split).map(lambda w: (w, 1)).reduceByKey(add)
    counts.collect()
    counts.filter(lambda kv: kv[0] == "x").getLineage().goBackAll().collect()  # input lines

See docs/guide/rdd.md.
"""

from ember.rdd.context import LineageContext
from ember.rdd.debug import CulpritError, ddmin
from ember.rdd.lineage_rdd import LineageRDD
from ember.rdd.points import LineageSourceError
from ember.rdd.tracked import TrackedRDD

__all__ = [
    "CulpritError",
    "LineageContext",
    "LineageRDD",
    "LineageSourceError",
    "TrackedRDD",
    "ddmin",
]
