package ember.jvm;

import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.util.HashSet;
import java.util.Set;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.encoders.RowEncoder$;
import org.apache.spark.sql.catalyst.optimizer.Optimizer;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.catalyst.rules.RuleExecutor;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.QueryExecution$;
import org.apache.spark.sql.execution.columnar.InMemoryRelation;
import org.apache.spark.sql.execution.columnar.InMemoryRelation$;
import org.apache.spark.storage.StorageLevel;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A DataFrame over a plan built resolved from pieces Spark already optimized (ember's
 * rewrite of the user's optimized plan), which Spark neither analyzes nor optimizes
 * again: its whole optimizer cost 7-36 ms per TPC-H capture and changed nothing ember
 * relies on. Only the rules Spark marks as not excludable run, once each, because its
 * planner needs what they do (runtime-replaceable expressions replaced, aliases and views
 * gone, float keys normalized); subquery plans stay as they were optimized.
 */
public final class Prepared {
    private static final String SUBQUERIES = "org.apache.spark.sql.catalyst.optimizer.Optimizer$OptimizeSubqueries";

    public Dataset<Row> dataframe(SparkSession session, LogicalPlan plan) {
        QueryExecution qe = light(session, plan);
        return new Dataset<>(qe, RowEncoder$.MODULE$.encoderFor(qe.analyzed().schema()));
    }

    /**
     * The plan cached as `Dataset.persist` would cache it, but planned as it is: the cache
     * manager would optimize the plan again, and Spark 4.3 optimizing its own optimized plan
     * can change the answer (it folds a NOT IN subquery's literal column into the null-aware
     * anti join, which then excludes nothing). Not registered with the cache manager: ember
     * puts the relation where the plan was and drops it when done.
     */
    public InMemoryRelation cached(SparkSession session, LogicalPlan plan) {
        return InMemoryRelation$.MODULE$.apply(StorageLevel.MEMORY_AND_DISK(), light(session, plan), Option.empty());
    }

    /**
     * The light execution's class for the running Spark, told by the arity of the one
     * constructor of its `QueryExecution`, which each release from 4.0 to 4.2 changed: 5
     * parameters in 4.0, 6 in 4.1, 8 from 4.2 on. `Light` is built against the newest;
     * the others (`jvm/shims`) are compiled against a stub of their release's class, so
     * one jar runs on every supported release.
     */
    private static final Constructor<? extends QueryExecution> LIGHT = lightConstructor();

    private static Constructor<? extends QueryExecution> lightConstructor() {
        Constructor<?>[] made = QueryExecution.class.getConstructors();
        int arity = made.length == 1 ? made[0].getParameterCount() : -1;
        String name = switch (arity) {
            case 5 -> "ember.jvm.Light40";
            case 6 -> "ember.jvm.Light41";
            case 8 -> "ember.jvm.Prepared$Light";
            default -> throw new UnsupportedOperationException(
                "ember's Java helpers know no QueryExecution of " + made.length + " constructors, the first of "
                    + (made.length == 0 ? 0 : made[0].getParameterCount()) + " parameters");
        };
        try {
            return Class.forName(name).asSubclass(QueryExecution.class).getDeclaredConstructor(SparkSession.class, LogicalPlan.class);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("ember's jar lacks " + name, e);
        }
    }

    /** The light execution's class for the running Spark (`Light40`, `Light41` or `Light`). */
    public String lightClass() {
        return LIGHT.getDeclaringClass().getSimpleName();
    }

    private static QueryExecution light(SparkSession session, LogicalPlan plan) {
        try {
            return LIGHT.newInstance(session, plan);
        } catch (InvocationTargetException e) {
            throw e.getCause() instanceof RuntimeException r ? r : new IllegalStateException(e.getCause());
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    /** A light execution's `analyzed`: every node is built resolved, from Catalyst's own
     * resolved pieces; analyzing the whole plan again cost 12-15 ms per TPC-H capture. */
    static LogicalPlan analyzed(LogicalPlan logical) {
        logical.setAnalyzed();
        return logical;
    }

    /** A light execution's `optimizedPlan`: only the rules Spark cannot plan without. */
    static LogicalPlan optimized(QueryExecution qe) {
        LogicalPlan optimized = required(qe.sparkSession(), qe.withCachedData().clone());
        optimized.setAnalyzed();
        return optimized;
    }

    /** The light execution for Spark 4.2 on (`Light40`, `Light41` for the older ones).
     * Spark's defaults for the rest, as `Dataset.ofRows` gives them. */
    static final class Light extends QueryExecution {
        private boolean analyzed;
        private LogicalPlan optimized;

        Light(SparkSession session, LogicalPlan plan) {
            super(
                session, plan, QueryExecution$.MODULE$.$lessinit$greater$default$3(),
                QueryExecution$.MODULE$.$lessinit$greater$default$4(), QueryExecution$.MODULE$.$lessinit$greater$default$5(),
                QueryExecution$.MODULE$.$lessinit$greater$default$6(), QueryExecution$.MODULE$.$lessinit$greater$default$7(),
                QueryExecution$.MODULE$.$lessinit$greater$default$8());
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

    @SuppressWarnings({"rawtypes", "unchecked"})
    private static LogicalPlan required(SparkSession session, LogicalPlan plan) {
        Optimizer optimizer = session.sessionState().optimizer();
        Set<String> needed = new HashSet<>(CollectionConverters.asJava(optimizer.nonExcludableRules()));
        needed.remove(SUBQUERIES);
        for (Object batch : CollectionConverters.asJava(optimizer.batches())) {
            for (Object rule : CollectionConverters.asJava(((RuleExecutor.Batch) batch).rules())) {
                if (needed.remove(((Rule) rule).ruleName())) {
                    plan = (LogicalPlan) ((Rule) rule).apply(plan);
                }
            }
        }
        return plan;
    }
}
