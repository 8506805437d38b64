"""The placement policy: where each aggregate's (and side table's) lineage goes, and why.

Pure functions of the plan and the capture's `Setting` (workload, bounds, what DuckDB can
read), one rule a module: `reach` (how a node's rows reach the result), `bounds` (what
comes back through the driver), `aggregate` (lists, Spark, DuckDB after or beside the
job, or traces), `keyed` (a unique column names a row instead of its rid), `grouped`
(grouped and partition maps), `cache` (cached or computed again). `place` runs them over
a plan as a pre-pass; the capture rewrite (`capture.annotate`) reads its answers.
"""

from ember.capture.policy.base import Kind, Placement, Setting, Site
from ember.capture.policy.bounds import INLINE_RIDS, bounded, input_rows
from ember.capture.policy.cache import computed_again
from ember.capture.policy.keyed import ByKey, join_key_columns, keyed_scans, witness_scans
from ember.capture.policy.place import Placements, place

__all__ = [
    "INLINE_RIDS",
    "ByKey",
    "Kind",
    "Placement",
    "Placements",
    "Setting",
    "Site",
    "bounded",
    "computed_again",
    "input_rows",
    "join_key_columns",
    "keyed_scans",
    "place",
    "witness_scans",
]
