package org.apache.spark.sql.execution;

import org.apache.spark.sql.catalyst.QueryPlanningTracker;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;

/** Compile-only: Spark 4.1's QueryExecution, the members `Light41` uses (jvm/shims/README.md). */
public class QueryExecution {
    public QueryExecution(SparkSession session, LogicalPlan logical, QueryPlanningTracker tracker,
            scala.Enumeration.Value mode, ShuffleCleanupMode shuffleCleanupMode, boolean copyCleanupMode) {
        throw new UnsupportedOperationException("a compile-only stub");
    }

    public static QueryPlanningTracker $lessinit$greater$default$3() {
        throw new UnsupportedOperationException("a compile-only stub");
    }

    public static scala.Enumeration.Value $lessinit$greater$default$4() {
        throw new UnsupportedOperationException("a compile-only stub");
    }

    public static ShuffleCleanupMode $lessinit$greater$default$5() {
        throw new UnsupportedOperationException("a compile-only stub");
    }

    public static boolean $lessinit$greater$default$6() {
        throw new UnsupportedOperationException("a compile-only stub");
    }

    public SparkSession sparkSession() {
        throw new UnsupportedOperationException("a compile-only stub");
    }

    public LogicalPlan logical() {
        throw new UnsupportedOperationException("a compile-only stub");
    }

    public LogicalPlan analyzed() {
        throw new UnsupportedOperationException("a compile-only stub");
    }

    public LogicalPlan withCachedData() {
        throw new UnsupportedOperationException("a compile-only stub");
    }

    public LogicalPlan optimizedPlan() {
        throw new UnsupportedOperationException("a compile-only stub");
    }
}
