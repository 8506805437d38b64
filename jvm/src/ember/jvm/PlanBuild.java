package ember.jvm;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;
import java.util.function.Function;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.api.python.PythonFunction;
import org.apache.spark.api.python.SimplePythonFunction;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.CreateStruct;
import org.apache.spark.sql.catalyst.expressions.CurrentRow$;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression$;
import org.apache.spark.sql.catalyst.expressions.PythonUDF;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.RangeFrame$;
import org.apache.spark.sql.catalyst.expressions.RowFrame$;
import org.apache.spark.sql.catalyst.expressions.RowNumber;
import org.apache.spark.sql.catalyst.expressions.SparkPartitionID;
import org.apache.spark.sql.catalyst.expressions.SpecifiedWindowFrame;
import org.apache.spark.sql.catalyst.expressions.UnboundedFollowing$;
import org.apache.spark.sql.catalyst.expressions.UnboundedPreceding$;
import org.apache.spark.sql.catalyst.expressions.WindowExpression;
import org.apache.spark.sql.catalyst.expressions.WindowSpecDefinition;
import org.apache.spark.sql.catalyst.expressions.aggregate.CollectList;
import org.apache.spark.sql.catalyst.expressions.aggregate.Count;
import org.apache.spark.sql.catalyst.plans.JoinType$;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.Expand;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.JoinHint;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.catalyst.plans.logical.Window;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.catalyst.trees.TreeNode;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Metadata;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * ember's rewritten plan, built from one message (the "plan in" schema, version 1, in
 * docs/design/import.md) in one py4j call instead of several calls per node and per
 * expression. Nodes and expressions made before (the user's own, from the plan import)
 * come in by reference: their py4j gateway ids. Attributes come in by exprId and resolve
 * against the outputs of the nodes built so far, the latest first, as Python's builder
 * resolved them; every new column keeps the exprId ember gave it, so parents resolve it.
 */
public final class PlanBuild {
    public static final int VERSION = 1;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final Function<String, Object> objects;  // a reference's object (null: unknown)
    private final Function<String, LogicalPlan> relations;  // a client's relation, analyzed (Connect only)
    private final BiFunction<String, LogicalPlan, LogicalPlan> caches;  // a cached subplan by key (Connect only)
    private final Map<Long, Attribute> scope = new HashMap<>();
    private Window spec;  // the user's window whose list is being built: its frame counts share its spec
    private java.util.UUID jvmId;

    /** The instance Python holds (`engines.spark.jar.helper`); each build makes its own. */
    public PlanBuild() {
        this(null, null, null);
    }

    private PlanBuild(Function<String, Object> objects, Function<String, LogicalPlan> relations,
            BiFunction<String, LogicalPlan, LogicalPlan> caches) {
        this.objects = objects;
        this.relations = relations;
        this.caches = caches;
    }

    /** The plan the message in file `path` describes (a file: see `PlanDump.write`). */
    public LogicalPlan build(py4j.Gateway gateway, String path) throws IOException {
        return build(gateway::getObject, Files.readString(Path.of(path)));
    }

    /**
     * The plans of a message of several roots ({"version": 1, "roots": [NODE...]}: side
     * tables that run together), each built with a scope of its own and ready to run
     * (`Prepared`), in one py4j call.
     */
    public Object[] dataframes(py4j.Gateway gateway, SparkSession session, String path) throws IOException {
        JsonNode message = read(Files.readString(Path.of(path)));
        List<Object> made = new ArrayList<>();
        for (JsonNode root : message.get("roots")) {
            made.add(new Prepared().dataframe(session, fresh(gateway::getObject, null, null).node(root)));
        }
        return made.toArray();
    }

    /** The plan `text` describes, its references resolved by `objects`. */
    public LogicalPlan build(Function<String, Object> objects, String text) throws IOException {
        return build(objects, null, null, text);
    }

    /** The same, with a Connect client's relations (base64 protobuf) analyzed by `relations`,
     * and its cached subplans (a key, the plan: the cache of the first plan of that key)
     * held by `caches` across its messages. */
    public LogicalPlan build(Function<String, Object> objects, Function<String, LogicalPlan> relations,
            BiFunction<String, LogicalPlan, LogicalPlan> caches, String text) throws IOException {
        return fresh(objects, relations, caches).node(read(text).get("root"));
    }

    private static JsonNode read(String text) throws IOException {
        JsonNode message = JSON.readTree(text);
        int version = message.path("version").asInt(-1);
        if (version != VERSION) {
            throw new IllegalArgumentException("ember plan message version " + version + "; this jar reads " + VERSION);
        }
        return message;
    }

    private static PlanBuild fresh(Function<String, Object> objects, Function<String, LogicalPlan> relations,
            BiFunction<String, LogicalPlan, LogicalPlan> caches) {
        PlanBuild made = new PlanBuild(objects, relations, caches);
        made.jvmId = NamedExpression$.MODULE$.newExprId().jvmId();
        return made;
    }

    // --- plans -----------------------------------------------------------------------
    private LogicalPlan node(JsonNode n) {
        String op = n.get("op").asText();
        List<LogicalPlan> kids = new ArrayList<>();
        for (JsonNode k : n.path("kids")) {
            kids.add(node(k));
        }
        LogicalPlan made = switch (op) {
            case "plan" -> (LogicalPlan) ref(n);
            case "same" -> ((LogicalPlan) ref(n)).withNewChildren(seq(kids));
            case "filter" -> new Filter(expr(n.get("cond")), kids.get(0));
            case "project" -> new Project(named(n.get("list")), kids.get(0));
            case "join" -> new Join(kids.get(0), kids.get(1), JoinType$.MODULE$.apply(n.get("kind").asText()),
                n.get("cond").isNull() ? Option.empty() : Option.apply(expr(n.get("cond"))), JoinHint.NONE());
            case "aggregate" -> aggregate(n, kids.get(0));
            case "union" -> n.has("ref") ? ((LogicalPlan) ref(n)).withNewChildren(seq(kids)) : new Union(seq(kids), false, false);
            case "expand" -> expand(n, kids.get(0));
            case "window" -> window(n, kids.get(0));
            case "numbered" -> numbered(n, kids.get(0));
            case "rows" -> rows(n);
            case "cached" -> cached(n, kids.get(0));
            case "map" -> remap(n, kids);
            case "udtf" -> copied((LogicalPlan) ref(n), Map.of(product(ref(n), "requiredChildOutput"), seq(attrs(n.get("kept")))), kids);
            default -> throw new IllegalArgumentException("ember plan message: unknown node op " + op);
        };
        for (Attribute a : CollectionConverters.asJava(made.output())) {
            scope.put(a.exprId().id(), a);
        }
        return made;
    }

    /**
     * A user's grouped or partition map made again over a wrapped Python function: the
     * pickled code ("command", base64) and return type ("returns", JSON) Python made, the
     * user's function's own columns and then `extra` ones as its arguments, and the
     * return type's last fields as new output columns ("added": names and exprIds). The
     * function keeps everything else of the user's (its Python, environment, includes).
     */
    private LogicalPlan remap(JsonNode n, List<LogicalPlan> kids) {
        LogicalPlan user = (LogicalPlan) ref(n);
        PythonUDF fn = (PythonUDF) product(user, "functionExpr");
        PythonFunction f = fn.func();
        PythonFunction wrapped = new SimplePythonFunction(Base64.getDecoder().decode(n.get("command").asText()),
            f.envVars(), f.pythonIncludes(), f.pythonExec(), f.pythonVer(), f.broadcastVars(), f.accumulator());
        StructType returns = (StructType) DataType.fromJson(n.get("returns").asText());
        List<Expression> args = new ArrayList<>(CollectionConverters.asJava(fn.children()));
        args.addAll(attrs(n.get("extra")));
        Expression made = copied(fn, Map.of(f, wrapped, fn.dataType(), returns, fn.children(), seq(args)), List.of());
        List<Attribute> output = new ArrayList<>(CollectionConverters.asJava(user.output()));
        StructField[] fields = returns.fields();
        int first = fields.length - n.get("added").size();
        for (JsonNode a : n.get("added")) {
            output.add(attribute(a.get("name").asText(), fields[first++].dataType(), a.get("id").asLong()));
        }
        return copied(user, Map.of(fn, made, user.output(), seq(output)), kids);
    }

    /** The attributes of ids, as built. */
    private List<Expression> attrs(JsonNode ids) {
        List<Expression> found = new ArrayList<>();
        for (JsonNode id : ids) {
            found.add(attr(id.asLong()));
        }
        return found;
    }

    /** A field of a Catalyst node by its accessor's name: the same on every Spark 4 release,
     * though the constructors around it differ. */
    private static Object product(Object node, String name) {
        try {
            return node.getClass().getMethod(name).invoke(node);
        } catch (ReflectiveOperationException e) {
            throw new IllegalArgumentException("ember plan message: " + node.getClass().getSimpleName() + " has no " + name, e);
        }
    }

    /** A copy of `node` with the constructor arguments that are (the same object as) a key of
     * `swaps` replaced by its value and its children by `kids` in order (none: kept), so the
     * copy needs no knowledge of the node's constructor. */
    @SuppressWarnings("unchecked")
    private static <T extends TreeNode<?>> T copied(T node, Map<Object, Object> swaps, List<? extends TreeNode<?>> kids) {
        Object[] args = new Object[node.productArity()];
        int kid = 0;
        for (int i = 0; i < args.length; i++) {
            Object arg = node.productElement(i);
            Object swap = null;
            for (Map.Entry<Object, Object> e : swaps.entrySet()) {
                if (e.getKey() == arg) {
                    swap = e.getValue();
                }
            }
            if (swap != null) {
                args[i] = swap;
            } else if (!kids.isEmpty() && arg instanceof LogicalPlan) {
                args[i] = kids.get(kid++);
            } else {
                args[i] = arg;
            }
        }
        return (T) node.makeCopy(args);
    }

    @SuppressWarnings("unchecked")
    private LogicalPlan aggregate(JsonNode n, LogicalPlan child) {
        List<Expression> keys = new ArrayList<>();
        for (JsonNode k : n.get("keys")) {
            keys.add(expr(k));
        }
        // The user's hint (4.x: `Option[AggregateHint]`), by position as Python read it.
        Option<Object> hint = n.has("hint") ? (Option<Object>) ((Aggregate) ref(n.get("hint"))).productElement(3) : Option.empty();
        return new Aggregate(seq(keys), named(n.get("list")), child, (Option) hint);
    }

    private LogicalPlan expand(JsonNode n, LogicalPlan child) {
        List<Seq<Expression>> projections = new ArrayList<>();
        List<List<Expression>> made = new ArrayList<>();
        for (JsonNode p : n.get("projections")) {
            List<Expression> row = new ArrayList<>();
            for (JsonNode e : p) {
                row.add(expr(e));
            }
            made.add(row);
            projections.add(seq(row));
        }
        Map<Long, Attribute> own = new HashMap<>();
        for (Attribute a : CollectionConverters.asJava(((LogicalPlan) ref(n)).output())) {
            own.put(a.exprId().id(), a);
        }
        List<Attribute> output = new ArrayList<>();
        int i = 0;
        for (JsonNode a : n.get("output")) {
            long id = a.get("id").asLong();
            Attribute kept = own.get(id);
            output.add(kept != null ? kept : attribute(a.get("name").asText(), made.get(0).get(i).dataType(), id));
            i++;
        }
        return new Expand(seq(projections), seq(output), child);
    }

    @SuppressWarnings("unchecked")
    private LogicalPlan window(JsonNode n, LogicalPlan child) {
        Window user = (Window) ref(n);
        Window outer = spec;
        spec = user;
        try {
            return new Window(named(n.get("list")), user.partitionSpec(), user.orderSpec(), child, (Option) user.productElement(4));
        } finally {
            spec = outer;
        }
    }

    /**
     * A column ember adds to a window, over the user's partition and order: the row's
     * number in its partition ("pos"), or the count of rows from the frame's start to the
     * partition's end ("lo") or from the partition's start to the frame's end ("hi"). The
     * bounds the frame shares with the user's are the user's own expressions (typed as
     * Spark's analyzer typed them for the ORDER BY), so the plan needs no analysis.
     */
    private Expression frameCount(JsonNode e) {
        if (spec == null) {
            throw new IllegalArgumentException("ember plan message: a frame count outside a window's list");
        }
        String bound = e.get("bound").asText();
        Expression function;
        SpecifiedWindowFrame frame;
        if ("pos".equals(bound)) {
            function = new RowNumber();
            frame = new SpecifiedWindowFrame(RowFrame$.MODULE$, UnboundedPreceding$.MODULE$, CurrentRow$.MODULE$);
        } else {
            boolean hi = "hi".equals(bound);
            Expression lower = hi ? UnboundedPreceding$.MODULE$ : bound(e.get("lower"), true);
            Expression upper = hi ? bound(e.get("upper"), false) : UnboundedFollowing$.MODULE$;
            function = new Count(seq(List.of(Literal.create(1, DataTypes.IntegerType)))).toAggregateExpression();
            frame = new SpecifiedWindowFrame("rows".equals(e.get("kind").asText()) ? RowFrame$.MODULE$ : RangeFrame$.MODULE$, lower, upper);
        }
        return new WindowExpression(function, new WindowSpecDefinition(spec.partitionSpec(), spec.orderSpec(), frame));
    }

    /** A frame bound: "unbounded", "current", or the user's own bound expression by reference. */
    private Expression bound(JsonNode b, boolean lower) {
        if (b.isObject()) {
            return (Expression) ref(b);
        }
        return switch (b.asText()) {
            case "unbounded" -> lower ? UnboundedPreceding$.MODULE$ : UnboundedFollowing$.MODULE$;
            case "current" -> CurrentRow$.MODULE$;
            default -> throw new IllegalArgumentException("ember plan message: unknown frame bound " + b);
        };
    }

    /** A Parquet scan with its rows' rids (`RowIndex`): each file's first rid given where
     * the source has several files. */
    private LogicalPlan numbered(JsonNode n, LogicalPlan scan) {
        List<String> uris = new ArrayList<>();
        List<Long> offsets = new ArrayList<>();
        for (JsonNode f : n.path("files")) {
            uris.add(f.get(0).asText());
            offsets.add(f.get(1).asLong());
        }
        JsonNode rid = n.get("rid");
        return new RowIndex().numbered((org.apache.spark.sql.execution.datasources.LogicalRelation) scan, uris, offsets,
            rid.get("name").asText(), exprId(rid.get("id").asLong()));
    }

    /** A subplan the job and its side tables read alike, cached by the first message that
     * names its key and read from that cache by the others (Connect's; a classic session
     * caches it through py4j). */
    private LogicalPlan cached(JsonNode n, LogicalPlan child) {
        if (caches == null) {
            throw new IllegalArgumentException("ember plan message: cached subplans by key come only over Spark Connect");
        }
        return caches.apply(n.get("key").asText(), child);
    }

    /** A Connect client's rows (a relation it made: a table it holds, keys it supplies),
     * its columns taken in order as the attributes `as` names, keeping their exprIds. */
    private LogicalPlan rows(JsonNode n) {
        if (relations == null) {
            throw new IllegalArgumentException("ember plan message: rows of a client's relation come only over Spark Connect");
        }
        LogicalPlan plan = relations.apply(n.get("relation").asText());
        List<Attribute> output = CollectionConverters.asJava(plan.output());
        List<NamedExpression> columns = new ArrayList<>();
        int i = 0;
        for (JsonNode a : n.get("as")) {
            columns.add(alias(output.get(i++), a));
        }
        return new Project(seq(columns), plan);
    }

    // --- expressions -----------------------------------------------------------------
    private Expression expr(JsonNode e) {
        String kind = e.get("e").asText();
        return switch (kind) {
            case "ref" -> (Expression) ref(e);
            case "attr" -> attr(e.get("id").asLong());
            case "true" -> Literal.create(true, DataTypes.BooleanType);
            case "null" -> new Literal(null, type(e));
            case "partition_id" -> new SparkPartitionID();
            case "alias" -> alias(unaliased(expr(e.get("child"))), e);
            case "collect_list" -> alias(collectList(e.get("ids")), e);
            case "frame_count" -> alias(frameCount(e), e);
            default -> throw new IllegalArgumentException("ember plan message: unknown expression " + kind);
        };
    }

    private Expression collectList(JsonNode ids) {
        List<Expression> columns = new ArrayList<>();
        for (JsonNode id : ids) {
            columns.add(attr(id.asLong()));
        }
        Expression item = columns.size() == 1 ? columns.get(0) : CreateStruct.apply(seq(columns));
        return new CollectList(item).toAggregateExpression();
    }

    private Seq<NamedExpression> named(JsonNode list) {
        List<NamedExpression> columns = new ArrayList<>();
        for (JsonNode c : list) {
            columns.add((NamedExpression) expr(c));
        }
        return seq(columns);
    }

    private Attribute attr(long id) {
        Attribute found = scope.get(id);
        if (found == null) {
            throw new IllegalArgumentException("ember plan message: attribute #" + id + " is not in any built input");
        }
        return found;
    }

    /** A null's type: that of the attribute it stands for where one was built, else its DDL. */
    private DataType type(JsonNode e) {
        Attribute like = e.has("id") ? scope.get(e.get("id").asLong()) : null;
        return like != null ? like.dataType() : DataType.fromDDL(e.get("ddl").asText());
    }

    /** What a user's alias names: an expression ember names anew (a computed column
     * `ember.infer` compares to a traced value) is not aliased twice. */
    private static Expression unaliased(Expression e) {
        return e instanceof Alias named ? named.child() : e;
    }

    private Alias alias(Expression child, JsonNode e) {
        return new Alias(child, e.get("name").asText(), exprId(e.get("id").asLong()), seq(List.of()), Option.empty(), seq(List.of()));
    }

    private AttributeReference attribute(String name, DataType type, long id) {
        return new AttributeReference(name, type, true, Metadata.empty(), exprId(id), seq(List.of()));
    }

    private ExprId exprId(long id) {
        return new ExprId(id, jvmId);
    }

    private Object ref(JsonNode n) {
        String id = n.get("ref").asText();
        Object found = objects.apply(id);
        if (found == null) {
            throw new IllegalArgumentException("ember plan message: no object " + id);
        }
        return found;
    }

    private static <T> Seq<T> seq(List<T> items) {
        return CollectionConverters.asScala(items).toSeq();
    }
}
