package ember.jvm;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiFunction;
import java.util.function.Function;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.execution.LogicalRDD$;
import org.apache.spark.sql.execution.columnar.InMemoryRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.connect.planner.SparkConnectPlanner;
import org.apache.spark.sql.connect.plugin.RelationPlugin;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.sparkproject.connect.protobuf.Any;
import org.sparkproject.connect.protobuf.InvalidProtocolBufferException;

/**
 * ember's requests over Spark Connect, where a client has no JVM to call: a relation whose
 * extension is an ember request (a JSON envelope, version 1) answers one row with one
 * string column, `message`. Registered on a Connect server with
 * `spark.connect.extensions.relation.classes` (`ember.connect.server_conf()`).
 *
 * <p>Requests: {"version": 1, "command": "plan_out", "excluded": RULES, "relation": the
 * client's relation, base64 protobuf} answers the plan-out message of that relation; its
 * references ("m3.17") name objects this server holds for the client's session, as the
 * py4j gateway does for a classic one. {"version": 1, "command": "plan_in", "message":
 * a plan-in message} answers the rows of the plan it builds, planned as built (`Prepared`):
 * a second optimization could change an optimized plan's answer. Its `rows` nodes carry
 * relations of the client's (base64 protobuf: tables it holds, keys it supplies), which
 * this session's planner analyzes. {"version": 1, "command": "files", "uris": [...], "rows":
 * bool} answers the files' facts as this server's file systems see them (`Files`). A plan-in
 * message's `cached` nodes are cached on the server under their key for the client's
 * session until {"version": 1, "command": "release", "keys": [...]}. {"version": 1, "command":
 * "condition", "relation": a filter of the client's} answers its analyzed condition, held
 * as a plan out's expressions are (`ember.infer` restricts a re-run's scans by it).
 * {"version": 1, "command": "parallelism"} answers the default parallelism, which decides
 * how Spark splits text files (a counted source's rows are numbered per split).
 */
public final class ConnectPlugin implements RelationPlugin {
    static final String REQUEST = "type.googleapis.com/ember.Request";
    static final int VERSION = 1;
    /** The objects of the latest plan-out messages, by session and message: a capture reads
     * one plan and builds from it moments later, so a few per session are plenty. */
    private static final int KEPT = 64;
    private static final Map<String, List<Object>> HELD = Collections.synchronizedMap(
        new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, List<Object>> eldest) {
                return size() > KEPT;
            }
        });
    private static final AtomicLong MESSAGES = new AtomicLong();
    /** Subplans cached for captures in flight, by session and key, until the client releases
     * them; past `KEPT` (a client gone without releasing), the eldest are dropped. */
    private static final Map<String, InMemoryRelation> CACHED = Collections.synchronizedMap(
        new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, InMemoryRelation> eldest) {
                if (size() > KEPT) {
                    eldest.getValue().cacheBuilder().clearCache(false);
                    return true;
                }
                return false;
            }
        });

    @Override
    public Optional<LogicalPlan> transform(byte[] extension, SparkConnectPlanner planner) {
        Any any;
        try {
            any = Any.parseFrom(extension);
        } catch (InvalidProtocolBufferException notAny) {
            return Optional.empty();
        }
        if (!REQUEST.equals(any.getTypeUrl())) {
            return Optional.empty();  // another plugin's
        }
        try {
            JsonNode body = new ObjectMapper().readTree(any.getValue().toStringUtf8());
            if (body.path("version").asInt() != VERSION) {
                throw new IllegalArgumentException("ember's Connect plugin reads requests of version " + VERSION
                    + ", not " + body.path("version") + ": the client's ember and the server's jar differ");
            }
            String command = body.path("command").asText();
            SparkSession session = planner.session();
            String scope = planner.sessionId() + "/";
            if ("plan_out".equals(command)) {
                Dataset<Row> ds = Dataset.ofRows(session, planner.transformRelation(parsed(body.path("relation").asText())));
                return Optional.of(answer(session, new PlanDump().text(holder(scope), ds, body.path("excluded").asText())));
            }
            if ("condition".equals(command)) {
                LogicalPlan analyzed = Dataset.ofRows(session, planner.transformRelation(parsed(body.path("relation").asText())))
                    .queryExecution().analyzed();
                return Optional.of(answer(session, new PlanDump().condition(holder(scope), analyzed)));
            }
            if ("plan_in".equals(command)) {
                Function<String, LogicalPlan> relations = encoded -> Dataset.ofRows(session, planner.transformRelation(
                    parsed(encoded))).queryExecution().analyzed();
                BiFunction<String, LogicalPlan, LogicalPlan> caches = (key, plan) -> CACHED.computeIfAbsent(
                    scope + key, k -> new Prepared().cached(session, plan));
                LogicalPlan built = new PlanBuild().build(ref -> held(scope, ref), relations, caches, body.path("message").toString());
                Dataset<Row> prepared = new Prepared().dataframe(session, built);
                return Optional.of(planned(prepared));
            }
            if ("release".equals(command)) {
                for (JsonNode key : body.path("keys")) {
                    InMemoryRelation cached = CACHED.remove(scope + key.asText());
                    if (cached != null) {
                        cached.cacheBuilder().clearCache(false);
                    }
                }
                return Optional.of(answer(session, "released"));
            }
            if ("parallelism".equals(command)) {  // what Spark splits files by, beside the session's settings
                return Optional.of(answer(session, String.valueOf(session.sparkContext().defaultParallelism())));
            }
            if ("files".equals(command)) {
                return Optional.of(answer(session, Files.facts(session, body.path("uris"), body.path("rows").asBoolean())));
            }
            throw new IllegalArgumentException("ember's Connect plugin does not know the request " + command);
        } catch (java.io.IOException malformed) {
            throw new IllegalArgumentException("ember's Connect plugin got a malformed request: " + malformed.getMessage(), malformed);
        }
    }

    /** A client's relation, sent as base64 protobuf. */
    private static Relation parsed(String encoded) {
        try {
            return Relation.parseFrom(Base64.getDecoder().decode(encoded));
        } catch (InvalidProtocolBufferException malformed) {
            throw new IllegalArgumentException("ember's Connect plugin got a malformed relation: " + malformed.getMessage(), malformed);
        }
    }

    /** References for one new message's objects, held for the session (`KEPT` messages). */
    private static Function<Object, String> holder(String scope) {
        String message = "m" + MESSAGES.incrementAndGet();
        List<Object> held = new ArrayList<>();
        HELD.put(scope + message, held);
        return o -> {
            held.add(o);
            return message + "." + (held.size() - 1);
        };
    }

    /** The object a reference names, if this session's message still holds it. */
    private static Object held(String scope, String ref) {
        int dot = ref.indexOf('.');
        List<Object> objects = dot < 0 ? null : HELD.get(scope + ref.substring(0, dot));
        if (objects == null) {
            throw new IllegalArgumentException("ember's Connect plugin holds no object " + ref
                + " for this session (its plan was read too long ago: capture again)");
        }
        return objects.get(Integer.parseInt(ref.substring(dot + 1)));
    }

    /**
     * A leaf over the prepared plan's rows, which Connect's planner takes as it is: the
     * plan itself would be analyzed and optimized again there.
     */
    private static LogicalPlan planned(Dataset<Row> prepared) {
        RDD<InternalRow> rows = prepared.queryExecution().toRdd();
        for (Method m : LogicalRDD$.MODULE$.getClass().getMethods()) {
            if (m.getName().equals("fromDataset")) {  // 3 parameters in 4.0, 4 from 4.1 on
                Object[] args = m.getParameterCount() == 3
                    ? new Object[] {rows, prepared, false} : new Object[] {rows, prepared, false, false};
                try {
                    return (LogicalPlan) m.invoke(LogicalRDD$.MODULE$, args);
                } catch (ReflectiveOperationException e) {
                    throw new IllegalStateException("ember could not wrap a prepared plan", e);
                }
            }
        }
        throw new IllegalStateException("this Spark has no LogicalRDD.fromDataset");
    }

    /** One row, one string column `message`. */
    private static LogicalPlan answer(SparkSession session, String text) {
        StructType schema = new StructType().add("message", DataTypes.StringType, false);
        return session.createDataFrame(List.of(RowFactory.create(text)), schema).logicalPlan();
    }
}
