package ember.jvm;

import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.QueryExecution;

/** `Prepared.Light` for Spark 4.0, whose QueryExecution constructor differs (jvm/shims/README.md). */
final class Light40 extends QueryExecution {
    private boolean analyzed;
    private LogicalPlan optimized;

    Light40(SparkSession session, LogicalPlan plan) {
        super(
            session, plan, QueryExecution.$lessinit$greater$default$3(), QueryExecution.$lessinit$greater$default$4(),
            QueryExecution.$lessinit$greater$default$5());
    }

    @Override
    public synchronized LogicalPlan analyzed() {
        if (!analyzed) {
            Prepared.analyzed(logical());
            analyzed = true;
        }
        return logical();
    }

    @Override
    public synchronized LogicalPlan optimizedPlan() {
        if (optimized == null) {
            optimized = Prepared.optimized(this);
        }
        return optimized;
    }
}
