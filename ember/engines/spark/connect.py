"""Spark Connect: ember's requests go to the server's JVM as relations.

A Connect client has no JVM to call, so ember's jar is also a Connect server plugin
(`ConnectPlugin.java`): a relation whose extension is an ember request answers one row
holding the answer. Today the plan out is served this way (its message carries no
handles there; a server-side registry for them is the next step).
"""

from __future__ import annotations

import base64
import json
from typing import Any

from google.protobuf import any_pb2
from pyspark.sql.connect import proto
from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
from pyspark.sql.connect.plan import LogicalPlan

from ember.engines.spark import catalyst
from ember.errors import EmberError
from ember.plan.trees import PlanOut, read

REQUEST = "type.googleapis.com/ember.Request"
VERSION = 1


class _Request(LogicalPlan):
    """An ember request over a client's relation, as an extension relation."""

    def __init__(self, child: LogicalPlan, body: dict[str, Any]) -> None:
        super().__init__(child)
        self._body = body

    def plan(self, session: Any) -> proto.Relation:
        relation = self._create_proto_relation()
        assert self._child is not None
        child = base64.b64encode(self._child.plan(session).SerializeToString()).decode()
        body = {"version": VERSION, **self._body, "relation": child}
        relation.extension.CopyFrom(any_pb2.Any(type_url=REQUEST, value=json.dumps(body).encode()))
        return relation


def message(df: ConnectFrame) -> PlanOut:
    """The plan out of a Connect DataFrame, from the server's plugin in one request."""
    request = _Request(df._plan, {"command": "plan_out", "excluded": ",".join(catalyst.EXCLUDED_RULES)})
    try:
        (row,) = ConnectFrame(request, df.sparkSession).collect()
    except Exception as e:  # the server's refusal comes back as a gRPC error of its own kind
        if "extension" in str(e).lower() or "ember.Request" in str(e):
            raise EmberError(
                "this Spark Connect server does not serve ember: start it with the settings of "
                "ember.connect.server_conf()"
            ) from None
        raise
    return read(json.loads(row[0]), lambda ref: ref)
