package ember.jvm;

import java.util.LinkedHashSet;
import java.util.Set;

import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.internal.SQLConf$;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The user's plan optimized for the import, with ember's rules excluded on top of the
 * session's own, under a copy of the session's conf that only this thread sees. Setting
 * the exclusion on the session itself took three conf round trips and showed it, for the
 * length of the import, to every other job of the session: a Defer capture imports while
 * the user's job runs, whose adaptive re-planning reads the session's conf.
 */
public final class Optimized {
    private static final String KEY = "spark.sql.optimizer.excludedRules";
    /**
     * Subplans merge only where their filters are the same (TPC-DS Q9's three subqueries
     * per bucket: one scan, not three): merged across filters, an aggregate's group would
     * be every row either filter kept, though each value came from fewer.
     */
    private static final String SAME_FILTERS = "spark.sql.optimizer.mergeSubplans.filterPropagation.enabled";

    public LogicalPlan plan(SparkSession session, LogicalPlan analyzed, String excluded) {
        SQLConf conf = session.sessionState().conf().clone();
        Set<String> rules = new LinkedHashSet<>();
        for (String list : new String[] {conf.getConfString(KEY, ""), excluded}) {
            for (String rule : list.split(",")) {
                if (!rule.isBlank()) {
                    rules.add(rule.trim());
                }
            }
        }
        conf.setConfString(KEY, String.join(",", rules));
        conf.setConfString(SAME_FILTERS, "false");
        return SQLConf$.MODULE$.withExistingConf(conf, () -> session.sessionState().optimizer().execute(analyzed));
    }

    /** Functions of the clock, which each optimization of a plan folds to its own time. */
    private static final Set<String> CLOCK = Set.of(
        "CurrentTimestamp", "Now", "CurrentDate", "LocalTimestamp", "CurrentTime",
        "CurrentTimestampNanos", "LocalTimestampNanos");

    /** Whether an analyzed plan reads the clock, so each run of it computes other values. */
    public boolean readsClock(LogicalPlan plan) {
        for (Expression e : CollectionConverters.asJava(plan.expressions())) {
            if (clock(e)) {
                return true;
            }
        }
        for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
            if (readsClock(child)) {
                return true;
            }
        }
        for (LogicalPlan sub : CollectionConverters.asJava(plan.subqueries())) {
            if (readsClock(sub)) {
                return true;
            }
        }
        return false;
    }

    private static boolean clock(Expression e) {
        if (CLOCK.contains(e.getClass().getSimpleName())) {
            return true;
        }
        for (Expression child : CollectionConverters.asJava(e.children())) {
            if (clock(child)) {
                return true;
            }
        }
        return false;
    }
}
