package ember.jvm;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.function.Consumer;
import java.util.function.Function;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.spark.sql.catalyst.catalog.CatalogTablePartition;
import org.apache.spark.sql.catalyst.catalog.HiveTableRelation;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.And;
import org.apache.spark.sql.catalyst.expressions.BloomFilterMightContain;
import org.apache.spark.sql.catalyst.expressions.DynamicPruning;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.InSet;
import org.apache.spark.sql.catalyst.expressions.InputFileBlockLength;
import org.apache.spark.sql.catalyst.expressions.InputFileBlockStart;
import org.apache.spark.sql.catalyst.expressions.InputFileName;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.PythonUDF;
import org.apache.hadoop.fs.FileStatus;
import org.apache.spark.api.python.PythonFunction;
import org.apache.spark.sql.catalyst.expressions.ScalarSubquery;
import org.apache.spark.sql.catalyst.expressions.SpecifiedWindowFrame;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.plans.ExistenceJoin;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.BaseEvalPythonUDTF;
import org.apache.spark.sql.catalyst.plans.logical.Expand;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.FlatMapCoGroupsInArrow;
import org.apache.spark.sql.catalyst.plans.logical.FlatMapCoGroupsInPandas;
import org.apache.spark.sql.catalyst.plans.logical.FlatMapGroupsInArrow;
import org.apache.spark.sql.catalyst.plans.logical.FlatMapGroupsInPandas;
import org.apache.spark.sql.catalyst.plans.logical.MapInArrow;
import org.apache.spark.sql.catalyst.plans.logical.MapInPandas;
import org.apache.spark.sql.catalyst.plans.logical.Generate;
import org.apache.spark.sql.catalyst.plans.logical.Join;
import org.apache.spark.sql.catalyst.plans.logical.LocalRelation;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Range;
import org.apache.spark.sql.catalyst.plans.logical.Sample;
import org.apache.spark.sql.catalyst.plans.logical.SubqueryAlias;
import org.apache.spark.sql.catalyst.plans.logical.View;
import org.apache.spark.sql.catalyst.plans.logical.Window;
import org.apache.spark.sql.classic.Dataset;
import org.apache.spark.sql.classic.SparkSession;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.execution.datasources.CatalogFileIndex;
import org.apache.spark.sql.execution.datasources.FileIndex;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.execution.datasources.PartitioningAwareFileIndex;
import org.apache.spark.sql.execution.datasources.jdbc.JDBCRelation;
import org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2Relation;
import org.apache.spark.sql.execution.datasources.v2.DataSourceV2ScanRelation;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.unsafe.types.UTF8String;
import scala.Option;
import scala.jdk.javaapi.CollectionConverters;
import scala.reflect.ClassTag$;

/**
 * A Catalyst plan as one JSON document, so ember's plan import costs one py4j round trip
 * instead of one per node, expression and field. Nodes and the expressions they hold
 * directly are registered with the py4j gateway; their ids ("h") let Python make handles
 * to them without asking. Only what ember's import reads is written; ember decides.
 */
public final class PlanDump {
    /** The "plan out" message's schema version (docs/design/import.md, "One message out"). */
    public static final int VERSION = 1;
    /** Options that may hold credentials: never written (the message is saved with a store). */
    private static final java.util.regex.Pattern SECRET =
        java.util.regex.Pattern.compile("(?i)password|secret|token|credential|user|keytab");
    private Function<Object, String> handles;  // an object's reference (null: none)
    private StringBuilder out;

    /**
     * The plan out: everything ember's import reads of a DataFrame, in one call and one
     * document: whether it streams, whether it reads the clock, the names of the views and
     * tables that are one source, and the optimized plan with ember's rules excluded.
     */
    public synchronized void message(py4j.Gateway gateway, Dataset<?> ds, String excluded, String path) throws IOException {
        Files.writeString(Path.of(path), text(handles(gateway), ds, excluded), StandardCharsets.UTF_8);
    }

    /** The plan out as text, with references to its objects made by `handles`. */
    public synchronized String text(Function<Object, String> handles, Dataset<?> ds, String excluded) {
        start(null);  // the views' leaves are read for their names: no handles
        LogicalPlan analyzed = ds.queryExecution().analyzed();
        out.append("{\"version\":").append(VERSION);
        out.append(",\"streaming\":").append(ds.isStreaming());
        if (!ds.isStreaming()) {
            out.append(",\"clock\":").append(new Optimized().readsClock(analyzed));
            out.append(",\"views\":[");
            views(analyzed, new boolean[] {true});
            out.append("],\"plan\":");
            this.handles = handles;
            node(new Optimized().plan(ds.sparkSession(), analyzed, excluded));
        }
        out.append('}');
        String text = out.toString();
        out = null;
        return text;
    }

    /** The condition of an analyzed filter (a Spark Connect client's, over a plan ember
     * built), with a reference made by `handles`: the client builds it into plans later. */
    public synchronized String condition(Function<Object, String> handles, LogicalPlan plan) {
        if (!(plan instanceof Filter filter)) {
            throw new IllegalArgumentException("ember's Connect plugin reads a condition off a filter, not a "
                + plan.nodeName());
        }
        start(handles);
        top(filter.condition());
        String text = out.toString();
        out = null;
        return text;
    }

    /** The plan, with handles registered through `gateway` (null: no handles). */
    public synchronized void plan(py4j.Gateway gateway, LogicalPlan plan, String path) throws IOException {
        start(handles(gateway));
        node(plan);
        write(path);
    }

    /** One expression (with a handle), as `plan` writes the ones a node holds. */
    public synchronized void expression(py4j.Gateway gateway, Expression e, String path) throws IOException {
        start(handles(gateway));
        top(e);
        write(path);
    }

    /** Every leaf of a plan, without handles. */
    public synchronized void leaves(LogicalPlan plan, String path) throws IOException {
        walked(first -> leaves(plan, first), path);
    }

    /** A JSON array of what `walk` writes (it puts commas between items, told by `first`). */
    private void walked(Consumer<boolean[]> walk, String path) throws IOException {
        start(null);
        out.append('[');
        walk.accept(new boolean[] {true});
        out.append(']');
        write(path);
    }

    /** References that are py4j gateway ids, for Python to make handles of. */
    private static Function<Object, String> handles(py4j.Gateway gateway) {
        return gateway == null ? null : gateway::putNewObject;
    }

    private void start(Function<Object, String> handles) {
        this.handles = handles;
        this.out = new StringBuilder(4096);
    }

    /** The JSON goes through a file beside the JVM: a py4j answer past 8 KB stalls ~40 ms
     * (its socket writes 8 KB at a time; Nagle's algorithm waits for an ACK the Python
     * side delays), where a file costs a fraction of a millisecond. */
    private void write(String path) throws IOException {
        Files.writeString(Path.of(path), out, StandardCharsets.UTF_8);
        out = null;
    }

    // --- plans -------------------------------------------------------------------
    private void node(LogicalPlan p) {
        out.append("{\"k\":");
        string(kind(p));
        handle(p);
        out.append(",\"out\":");
        attributes(p.output());
        out.append(",\"kids\":");
        array(p.children(), c -> node((LogicalPlan) c));
        if (p instanceof Project x) {
            tops("list", x.projectList());
        } else if (p instanceof Filter x) {
            Expression kept = withoutRuntimeFilters(x.condition());
            if (kept != null) {  // none: the filter is only runtime filters, lineage passes through
                field("cond");
                top(kept);
            }
        } else if (p instanceof Join x) {
            field("type");
            string(kind(x.joinType()));
            if (x.joinType() instanceof ExistenceJoin j) {
                field("exists");
                attribute(j.exists());
            }
            if (x.condition().isDefined()) {
                field("cond");
                top(x.condition().get());
            }
        } else if (p instanceof Aggregate x) {
            tops("keys", x.groupingExpressions());
            tops("list", x.aggregateExpressions());
        } else if (p instanceof Window x) {
            tops("list", x.windowExpressions());
            tops("partition", x.partitionSpec());
            tops("order", x.orderSpec());
        } else if (p instanceof Generate x) {
            field("gen");
            top((Expression) x.generator());
            field("generated");
            attributes(x.generatorOutput());
            field("kept");
            attributes(x.requiredChildOutput());
        } else if (p instanceof BaseEvalPythonUDTF x) {
            // Like a Generate: each input row's eval() rows follow it. The pickled handler
            // class tells whether it has a terminate() too, whose rows no one input row made.
            field("gen");
            top(x.udtf());
            field("generated");
            attributes(x.resultAttrs());
            field("kept");
            attributes(x.requiredChildOutput());
            field("command");
            string(command(x.udtf().func()));
        } else if (p instanceof FlatMapGroupsInPandas x) {
            groupMap(x.groupingAttributes(), (PythonUDF) x.functionExpr());
        } else if (p instanceof FlatMapGroupsInArrow x) {
            groupMap(x.groupingAttributes(), (PythonUDF) x.functionExpr());
        } else if (p instanceof FlatMapCoGroupsInPandas x) {
            groupMap(x.leftAttributes(), (PythonUDF) x.functionExpr());
            field("cogrouping");
            attributes(x.rightAttributes());
        } else if (p instanceof FlatMapCoGroupsInArrow x) {
            groupMap(x.leftAttributes(), (PythonUDF) x.functionExpr());
            field("cogrouping");
            attributes(x.rightAttributes());
        } else if (p instanceof MapInPandas x) {
            python((PythonUDF) x.functionExpr());
        } else if (p instanceof MapInArrow x) {
            python((PythonUDF) x.functionExpr());
        } else if (p instanceof Expand x) {
            field("projections");
            array(x.projections(), row -> list((scala.collection.Seq<?>) row, true));
        } else if (p instanceof Sample x) {
            tops("exprs", p.expressions());
            field("seeded");
            out.append(seeded(x));
        } else if (p.children().isEmpty()) {
            leaf(p);
        } else {  // a node ember passes through, or refuses naming it as Spark prints it
            tops("exprs", p.expressions());
            field("s");
            string(p.simpleString(200));
        }
        out.append('}');
    }

    /**
     * A condition without the runtime filters Spark's optimizer adds (bloom filters over a
     * join's other side, dynamic partition pruning): they only skip rows the join drops
     * anyway, and a filter ember rebuilds needs none (a node it leaves whole keeps them).
     * The condition itself when it has none; null when it is nothing else.
     */
    private static Expression withoutRuntimeFilters(Expression e) {
        if (e instanceof And x) {
            Expression left = withoutRuntimeFilters(x.left());
            Expression right = withoutRuntimeFilters(x.right());
            if (left == x.left() && right == x.right()) {
                return e;
            }
            return left == null ? right : right == null ? left : new And(left, right);
        }
        boolean runtime = e instanceof DynamicPruning
            || (e instanceof BloomFilterMightContain b && b.bloomFilterExpression() instanceof ScalarSubquery);
        return runtime ? null : e;
    }

    /** Whether a sample's seed is fixed: its fourth field is the seed, a `long` up to Spark 4.1
     * (always fixed), an `Option` from 4.2 on (none: each run draws its own). */
    private static boolean seeded(Sample x) {
        return !(x.productElement(3) instanceof Option<?> seed) || seed.isDefined();
    }

        /** A grouped map's keys (a cogroup's left ones) and function, and the function's pickled
     * code (ember wraps it). */
    private void groupMap(scala.collection.Seq<Attribute> keys, PythonUDF function) {
        field("grouping");
        attributes(keys);
        python(function);
    }

    /** A map's Python function and its pickled code (ember wraps it). */
    private void python(PythonUDF function) {
        field("fn");
        top(function);
        field("evalType");
        out.append(function.evalType());
        field("command");
        string(command(function.func()));
    }

    /** A Python function's pickled code, base64. */
    public String command(PythonFunction f) {
        return Base64.getEncoder().encodeToString((byte[]) f.command().toArray(ClassTag$.MODULE$.Byte()));
    }

    private void leaf(LogicalPlan p) {
        if (p instanceof LogicalRelation x) {
            field("rel");
            string(kind(x.relation()));
            if (x.relation() instanceof HadoopFsRelation r) {
                FileIndex location = r.location();
                if (x.catalogTable().isDefined() && r.partitionSchema().nonEmpty()) {
                    // Partition pruning leaves only the partitions a job reads in the index;
                    // rows are numbered over all of the table's files, whichever a job reads.
                    location = new CatalogFileIndex(r.sparkSession(), x.catalogTable().get(), 0L);
                }
                field("fmt");
                string(kind(r.fileFormat()));
                field("roots");
                array(location.rootPaths(), path -> string(path.toString()));
                field("options");
                options(r.options());
                field("files");
                files(location);
                if (handles != null && !(r.fileFormat() instanceof ParquetFileFormat)) {
                    field("bare");  // the scan without its `_metadata` column, which text rows are numbered over
                    string(handles.apply(new RowIndex().withoutMetadata(x)));
                }
                field("columns");
                array(r.dataSchema(), f -> string(((StructField) f).name()));
                field("partitioning");
                array(r.partitionSchema(), f -> column(((StructField) f).name(), ((StructField) f).dataType()));
            }
            if (x.relation() instanceof JDBCRelation r) {
                field("table");
                string(r.jdbcOptions().tableOrQuery());
                field("options");
                options(r.jdbcOptions().parameters());
            }
        } else if (p instanceof DataSourceV2ScanRelation x) {
            tableV2(x.relation());
        } else if (p instanceof DataSourceV2Relation x) {
            tableV2(x);
        } else if (p instanceof HiveTableRelation x) {
            hiveTable(x);
        } else if (p instanceof LocalRelation x) {
            field("data");
            out.append(System.identityHashCode(x.data()));
        } else if (p instanceof LogicalRDD x) {
            field("rdd");
            out.append(x.rdd().id());
        } else if (p instanceof Range x) {
            out.append(",\"start\":").append(x.start());
            out.append(",\"end\":").append(x.end());
            out.append(",\"step\":").append(x.step());
            out.append(",\"count\":").append(x.numElements().toString());
            out.append(",\"slices\":").append(x.numSlices().isDefined() ? x.numSlices().get().toString() : "null");
        }
    }

    /** A table of a V2 data source (a Python data source, say): its class, name and read
     * options, which identify it as a source; a scan reads it by its relation. */
    private void tableV2(DataSourceV2Relation x) {
        field("rel");
        string(kind(x.table()));
        field("table");
        string(x.table().name());
        field("options");
        options(CollectionConverters.asScala(x.options().asCaseSensitiveMap()));
    }

    /** [[uri, size, mtime in ms], ...]: each file of a file index (-1: not listed with it). */
    private void files(FileIndex location) {
        FileIndex listed = location instanceof CatalogFileIndex c ? c.filterPartitions(emptySeq()) : location;
        if (listed instanceof PartitioningAwareFileIndex x) {
            array(x.allFiles(), f -> {
                FileStatus status = (FileStatus) f;
                out.append('[');
                string(status.getPath().toUri().toString());
                out.append(',').append(status.getLen()).append(',').append(status.getModificationTime()).append(']');
            });
        } else {
            array(CollectionConverters.asScala(Arrays.asList(listed.inputFiles())), f -> {
                out.append('[');
                string((String) f);
                out.append(",-1,-1]");
            });
        }
    }

    /**
     * A metastore table Spark reads with Hive's own reader (a serde table the session does
     * not convert to a file source): its name, storage, columns, and every file of all its
     * partitions as Hadoop lists them for a read (hidden `_` and `.` files skipped), each
     * with its partition's values from the metastore, whichever partitions this job reads.
     */
    private void hiveTable(HiveTableRelation x) {
        var meta = x.tableMeta();
        field("table");
        string(meta.identifier().unquotedString());
        field("name");
        string(meta.identifier().table());
        field("serde");
        string(meta.storage().serde().getOrElse(() -> ""));
        field("input");
        string(meta.storage().inputFormat().getOrElse(() -> ""));
        field("handler");
        string(meta.properties().get("storage_handler").getOrElse(() -> ""));
        field("columns");
        array(x.dataCols(), a -> string(((Attribute) a).name()));
        field("partitioning");
        array(x.partitionCols(), a -> column(((Attribute) a).name(), ((Attribute) a).dataType()));
        SparkSession session = SparkSession.active();
        List<Object[]> locations = new ArrayList<>();  // [location, partition values]
        if (x.partitionCols().isEmpty()) {
            locations.add(new Object[] {meta.storage().locationUri(), List.of()});
        } else {
            var partitions = session.sessionState().catalog().listPartitions(meta.identifier(), Option.empty());
            for (CatalogTablePartition part : CollectionConverters.asJava(partitions)) {
                List<String> values = new ArrayList<>();
                for (Attribute column : CollectionConverters.asJava(x.partitionCols())) {
                    values.add(part.spec().get(column.name()).getOrElse(() -> null));
                }
                locations.add(new Object[] {part.storage().locationUri(), values});
            }
        }
        Configuration conf = session.sessionState().newHadoopConf();
        List<String> nested = new ArrayList<>();
        field("files");
        out.append('[');
        boolean first = true;
        for (Object[] location : locations) {
            Option<?> uri = (Option<?>) location[0];
            if (uri.isEmpty()) {
                continue;
            }
            org.apache.hadoop.fs.Path folder = new org.apache.hadoop.fs.Path((java.net.URI) uri.get());
            FileStatus[] listed;
            try {
                FileSystem fs = folder.getFileSystem(conf);
                listed = fs.exists(folder) ? fs.listStatus(folder) : new FileStatus[0];
            } catch (IOException e) {
                throw new java.io.UncheckedIOException(e);
            }
            for (FileStatus status : listed) {
                String name = status.getPath().getName();
                if (name.startsWith("_") || name.startsWith(".")) {
                    continue;
                }
                if (status.isDirectory()) {
                    nested.add(status.getPath().toUri().toString());
                    continue;
                }
                first = comma(first);
                out.append('[');
                string(status.getPath().toUri().toString());
                out.append(',').append(status.getLen()).append(',').append(status.getModificationTime()).append(",[");
                boolean firstValue = true;
                for (Object value : (List<?>) location[1]) {
                    firstValue = comma(firstValue);
                    if (value == null) {
                        out.append("null");
                    } else {
                        string((String) value);
                    }
                }
                out.append("]]");
            }
        }
        out.append(']');
        field("nested");
        array(CollectionConverters.asScala(nested), f -> string((String) f));
    }

    /** A reader's options, as a JSON object. */
    private void options(scala.collection.Map<String, String> options) {
        out.append('{');
        boolean first = true;
        for (scala.collection.Iterator<scala.Tuple2<String, String>> it = options.iterator(); it.hasNext(); ) {
            scala.Tuple2<String, String> option = it.next();
            if (SECRET.matcher(option._1()).find()) {
                continue;
            }
            first = comma(first);
            string(option._1());
            out.append(':');
            string(option._2());
        }
        out.append('}');
    }

    private static <T> scala.collection.immutable.Seq<T> emptySeq() {
        return CollectionConverters.asScala(new ArrayList<T>()).toList();
    }

    /**
     * A view right over another names nothing: the innermost name of a chain is the source's,
     * so one source keeps one name whichever view over it a job reads.
     */
    private void views(LogicalPlan p, boolean[] first) {
        String name = viewName(p);
        LogicalPlan leaf = name == null || namesInside(p.children().apply(0)) ? null : bareLeaf(p.children().apply(0));
        if (leaf != null) {
            first[0] = comma(first[0]);
            out.append('[');
            string(name);
            out.append(',');
            node(leaf);
            out.append(']');
        }
        for (scala.collection.Iterator<?> it = p.children().iterator(); it.hasNext(); ) {
            views((LogicalPlan) it.next(), first);
        }
        for (scala.collection.Iterator<?> it = p.subqueries().iterator(); it.hasNext(); ) {
            views((LogicalPlan) it.next(), first);
        }
    }

    private static String viewName(LogicalPlan p) {
        if (p instanceof View x) {
            return x.desc().identifier().table();
        }
        if (p instanceof SubqueryAlias x && x.identifier().qualifier().nonEmpty()) {
            return x.identifier().name();
        }
        return null;
    }

    /** Whether a named view or table sits in the chain of aliases, views and plain selections. */
    private static boolean namesInside(LogicalPlan p) {
        for (LogicalPlan q = p; q != null; q = chained(q)) {
            if (viewName(q) != null) {
                return true;
            }
        }
        return false;
    }

    /** The leaf under a chain of aliases, views and plain column selections, if that is all. */
    private static LogicalPlan bareLeaf(LogicalPlan p) {
        LogicalPlan q = p;
        while (!q.children().isEmpty()) {
            q = chained(q);
            if (q == null) {
                return null;
            }
        }
        return q;
    }

    /** The child of an alias, a view or a plain column selection (null for anything else). */
    private static LogicalPlan chained(LogicalPlan p) {
        if (p instanceof SubqueryAlias || p instanceof View) {
            return p.children().apply(0);
        }
        if (p instanceof Project x) {
            for (scala.collection.Iterator<?> it = x.projectList().iterator(); it.hasNext(); ) {
                if (!(it.next() instanceof AttributeReference)) {
                    return null;
                }
            }
            return x.child();
        }
        return null;
    }

    private void leaves(LogicalPlan p, boolean[] first) {
        if (p.children().isEmpty()) {
            first[0] = comma(first[0]);
            node(p);
        }
        for (scala.collection.Iterator<?> it = p.children().iterator(); it.hasNext(); ) {
            leaves((LogicalPlan) it.next(), first);
        }
    }

    // --- expressions -------------------------------------------------------------
    private void tops(String name, scala.collection.Seq<?> seq) {
        field(name);
        list(seq, true);
    }

    private void list(scala.collection.Seq<?> seq, boolean handles) {
        array(seq, e -> expr((Expression) e, handles));
    }

    /**
     * Whether an expression gives each row the same value whichever run computes it. Spark
     * calls `input_file_name()` and the input block's start and length nondeterministic (they
     * read the task's current file), yet a row read from a file always has the same ones: a
     * job tagging rows with their file is deterministic here, the rest as Spark says.
     */
    private static boolean repeatable(Expression e) {
        if (e.deterministic() || e instanceof InputFileName || e instanceof InputFileBlockStart
                || e instanceof InputFileBlockLength) {
            return true;
        }
        List<Expression> standIns = new ArrayList<>();
        for (Expression child : CollectionConverters.asJava(e.children())) {
            if (!repeatable(child)) {
                return false;
            }
            standIns.add(Literal.create(null, child.dataType()));
        }
        try {  // the node itself, over children that are: a Python UDF keeps its own flag
            return !standIns.isEmpty() && e.withNewChildren(CollectionConverters.asScala(standIns).toSeq()).deterministic();
        } catch (RuntimeException none) {
            return false;
        }
    }

    private void top(Expression e) {
        expr(e, true);
    }

    private void expr(Expression e, boolean withHandle) {
        out.append("{\"k\":");
        string(kind(e));
        if (withHandle) {
            handle(e);
        }
        field("t");
        string(e.toString());
        try {
            field("dt");
            string(e.dataType().simpleString());
        } catch (Exception none) {  // window specs, some generators and unresolved expressions have none
            out.append("null");
        }
        out.append(",\"det\":").append(repeatable(e));
        out.append(",\"refs\":");
        array(e.references(), a -> out.append(((Attribute) a).exprId().id()));
        out.append(",\"c\":");
        list(e.children(), e instanceof SpecifiedWindowFrame);  // a bound's value is built into frames
        if (e instanceof NamedExpression n && e.resolved()) {
            out.append(",\"id\":").append(n.exprId().id());
            field("n");
            string(n.name());
            out.append(",\"nullable\":").append(e.nullable());
        }
        if (e instanceof Literal x) {
            field("v");
            value(x.value());
        } else if (e instanceof InSet x) {
            field("set");
            array(x.hset(), this::value);
        } else if (e instanceof AggregateExpression x) {
            out.append(",\"distinct\":").append(x.isDistinct());
            out.append(",\"filtered\":").append(x.filter().isDefined());
        } else if (e instanceof ScalarSubquery x) {
            out.append(",\"outer\":").append(x.outerAttrs().nonEmpty());
            field("plan");
            node(x.plan());
        } else if (e instanceof SpecifiedWindowFrame x) {
            field("frame");
            string(kind(x.frameType()));
        }
        out.append('}');
    }

    private void attributes(scala.collection.Seq<?> seq) {
        array(seq, a -> attribute((Attribute) a));
    }

    private void attribute(Attribute a) {
        out.append('[').append(a.exprId().id()).append(',');
        string(a.name());
        out.append(',');
        string(a.dataType().simpleString());
        out.append(',').append(a.nullable()).append(']');
    }

    /** A literal's value as JSON: numbers, booleans and text as such (dates are day numbers,
     * decimals their exact text); anything else as {"opaque": class}. */
    private void value(Object v) {
        if (v == null) {
            out.append("null");
        } else if (v instanceof Boolean || v instanceof Integer || v instanceof Long
                || v instanceof Short || v instanceof Byte) {
            out.append(v);
        } else if (v instanceof Double || v instanceof Float) {
            double d = ((Number) v).doubleValue();
            if (Double.isNaN(d) || Double.isInfinite(d)) {
                out.append("{\"opaque\":\"nonfinite\"}");
            } else {
                out.append(d);
            }
        } else if (v instanceof UTF8String || v instanceof String) {
            string(v.toString());
        } else if (v instanceof Decimal x) {
            out.append("{\"decimal\":");
            string(x.toString());
            out.append('}');
        } else {
            out.append("{\"opaque\":");
            string(v.getClass().getSimpleName());
            out.append('}');
        }
    }

    // --- JSON --------------------------------------------------------------------
    private void handle(Object o) {
        if (handles != null) {
            field("h");
            string(handles.apply(o));
        }
    }

    private static String kind(Object o) {
        String name = o.getClass().getSimpleName();
        return name.endsWith("$") ? name.substring(0, name.length() - 1) : name;
    }

    /** A JSON array: `write` for each item, commas between. */
    /** A partition column as the message gives it: [name, Spark type]. */
    private void column(String name, DataType type) {
        out.append('[');
        string(name);
        out.append(',');
        string(type.simpleString());
        out.append(']');
    }

    private void array(scala.collection.Iterable<?> items, Consumer<Object> write) {
        out.append('[');
        boolean first = true;
        for (scala.collection.Iterator<?> it = items.iterator(); it.hasNext(); ) {
            first = comma(first);
            write.accept(it.next());
        }
        out.append(']');
    }

    private void field(String name) {
        out.append(",\"").append(name).append("\":");
    }

    private boolean comma(boolean first) {
        if (!first) {
            out.append(',');
        }
        return false;
    }

    private void string(String s) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '"' || c == '\\') {
                out.append('\\').append(c);
            } else if (c < 0x20) {
                out.append(String.format("\\u%04x", (int) c));
            } else {
                out.append(c);
            }
        }
        out.append('"');
    }
}
