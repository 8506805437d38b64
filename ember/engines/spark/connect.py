"""Spark Connect: ember's requests go to the server's JVM as relations.

A Connect client has no JVM to call, so ember's jar is also a Connect server plugin
(`ConnectPlugin.java`): a relation whose extension is an ember request answers one row
holding the answer, or the rows of the plan a request builds. The plan's objects stay
on the server, held for the client's session, and the messages name them by reference.
"""

from __future__ import annotations

import base64
import json
import re
from typing import Any

from google.protobuf import any_pb2
from pyspark.sql.connect import proto
from pyspark.sql.connect.dataframe import DataFrame as ConnectFrame
from pyspark.sql.connect.plan import LogicalPlan
from pyspark.sql.connect.session import SparkSession as RemoteSession

from ember.engines.spark import catalyst, plan_in
from ember.errors import EmberError
from ember.plan.trees import PlanOut, read

REQUEST = "type.googleapis.com/ember.Request"
VERSION = 1
# A server with no plugin for the request: Spark 4.0's text, then its error class from 4.1
_NO_HANDLER = re.compile(r"No handler found for extension|NO_HANDLER_FOR_EXTENSION")


class _Request(LogicalPlan):
    """An ember request (over a client's relation, if any), as an extension relation."""

    def __init__(self, child: LogicalPlan | None, body: dict[str, Any]) -> None:
        super().__init__(child)
        self._body = body

    def plan(self, session: Any) -> proto.Relation:
        relation = self._create_proto_relation()
        body = {"version": VERSION, **self._body}
        if self._child is not None:
            body["relation"] = base64.b64encode(self._child.plan(session).SerializeToString()).decode()
        relation.extension.CopyFrom(any_pb2.Any(type_url=REQUEST, value=json.dumps(body).encode()))
        return relation


def message(df: ConnectFrame) -> PlanOut:
    """The plan out of a Connect DataFrame, from the server's plugin in one request."""
    request = _Request(df._plan, {"command": "plan_out", "excluded": ",".join(catalyst.EXCLUDED_RULES)})
    try:
        (row,) = ConnectFrame(request, df.sparkSession).collect()
    except Exception as e:  # the server's refusal comes back as a gRPC error of its own kind
        if _NO_HANDLER.search(str(e)):
            raise EmberError(
                "this Spark Connect server does not serve ember: start it with the settings of "
                "ember.connect.server_conf()"
            ) from None
        raise
    return read(json.loads(row[0]), lambda ref: ref)


def build(session: RemoteSession, message: plan_in.Message) -> ConnectFrame:
    """The DataFrame of the plan a plan-in message describes, built by the server's plugin
    from references the plan out of this session gave; its rows come as the plan was
    built, not optimized again."""
    return ConnectFrame(_Request(None, {"command": "plan_in", "message": message.body}), session)
