package ember.jvm;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

import org.apache.spark.sql.catalyst.catalog.HiveTableRelation;
import org.apache.spark.sql.catalyst.expressions.Add;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.CaseWhen;
import org.apache.spark.sql.catalyst.expressions.EqualTo;
import org.apache.spark.sql.catalyst.expressions.ExprId;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GetStructField;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.execution.datasources.HadoopFsRelation;
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.Option;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A Parquet scan's rid, `_metadata.row_index` plus the rows of the files before the row's
 * own, made resolved: resolving `_metadata.row_index` through a DataFrame cost one
 * analysis (~12 ms) per scan per capture.
 */
public final class RowIndex {
    /** The scan's rows with their rid after its columns, named `name` with exprId `id`.
     * `uris` and `offsets`: each file's path as Spark reads it and its first rid (empty for
     * one file). The scan's `_metadata` column holds only the fields read (the job's own,
     * if it reads some, then the rid's), as Spark's optimizer would prune it: this plan
     * skips that rule, and its scan would build the whole struct (file path, name, size,
     * block, modification time) for every row it reads. */
    public LogicalPlan numbered(LogicalRelation scan, List<String> uris, List<? extends Number> offsets, String name, ExprId id) {
        LogicalRelation read = withFields(scan, uris.size() > 1 ? List.of("row_index", "file_path") : List.of("row_index"), true);
        AttributeReference meta = (AttributeReference) read.output().last();
        List<NamedExpression> columns = new ArrayList<>(CollectionConverters.asJava(scan.output()));
        columns.add(new Alias(rid(meta, uris, offsets), name, id, seq(List.of()), Option.empty(), seq(List.of())));
        return new Project(seq(columns), read);
    }

    /** The scan with its `_metadata` column holding `fields` after those it held, last in its
     * output; a scan without one gets one only if `always` (else it is returned as it is:
     * Spark's analyzer then finds the hidden column whole). The fields it held keep their
     * places, so the job's own reads of them stay right. */
    public LogicalRelation withFields(LogicalRelation scan, List<String> needed, boolean always) {
        AttributeReference base = metadata(scan);
        List<StructField> fields = new ArrayList<>();
        boolean held = false;
        for (AttributeReference a : CollectionConverters.asJava(scan.output())) {
            if (same(a, base)) {
                base = a;
                held = true;
                fields.addAll(Arrays.asList(((StructType) a.dataType()).fields()));
            }
        }
        if (!held && !always) {
            return scan;
        }
        StructType whole = (StructType) ((HadoopFsRelation) scan.relation()).fileFormat().createFileMetadataCol().dataType();
        for (String field : needed) {
            if (fields.stream().noneMatch(f -> f.name().equals(field))) {
                fields.add(whole.apply(field));
            }
        }
        AttributeReference meta = base.withDataType(new StructType(fields.toArray(new StructField[0])));
        List<AttributeReference> output = new ArrayList<>();
        for (AttributeReference a : CollectionConverters.asJava(scan.output())) {
            if (!a.exprId().equals(meta.exprId())) {
                output.add(a);
            }
        }
        output.add(meta);
        return scan.copy(scan.relation(), seq(output), scan.catalogTable(), scan.isStreaming(), scan.stream());
    }

    /** A Hive table's scan as it is: it has no `_metadata` column, and its rows' file and
     * split come from `input_file_name()` and `input_file_block_start()` instead. */
    public HiveTableRelation withFields(HiveTableRelation scan, List<String> needed, boolean always) {
        return scan;
    }

    /** The scan without the `_metadata` column a job reads (then pruned to the fields it
     * reads): its rows are the source's own, and Spark's analyzer finds the hidden column
     * whole for a reader that needs other fields. */
    public LogicalRelation withoutMetadata(LogicalRelation scan) {
        AttributeReference base = metadata(scan);
        List<AttributeReference> output = new ArrayList<>();
        for (AttributeReference a : CollectionConverters.asJava(scan.output())) {
            if (!same(a, base)) {
                output.add(a);
            }
        }
        return scan.copy(scan.relation(), seq(output), scan.catalogTable(), scan.isStreaming(), scan.stream());
    }

    /** The rid alone, over `scan`'s `_metadata` column: the one in its output if it reads
     * one (`withFields` gives it the fields the rid reads), else the hidden one, which a plan
     * reading it gets from Spark's analyzer. */
    public Expression rid(LogicalRelation scan, List<String> uris, List<? extends Number> offsets) {
        AttributeReference meta = metadata(scan);
        for (AttributeReference a : CollectionConverters.asJava(scan.output())) {
            if (same(a, meta)) {
                return rid(a, uris, offsets);
            }
        }
        return rid(meta, uris, offsets);
    }

    /** Whether `a` is the scan's `_metadata` column, however pruned. */
    private static boolean same(AttributeReference a, AttributeReference meta) {
        return a.name().equals(meta.name()) && a.metadata().equals(meta.metadata());
    }

    private static AttributeReference metadata(LogicalRelation scan) {
        for (AttributeReference a : CollectionConverters.asJava(scan.metadataOutput())) {
            if (a.name().equals("_metadata")) {
                return a;
            }
        }
        throw new IllegalArgumentException("this scan has no _metadata column: " + scan.simpleString(80));
    }

    private static Expression rid(AttributeReference meta, List<String> uris, List<? extends Number> offsets) {
        Expression rid = field(meta, "row_index");
        if (uris.size() > 1) {
            Expression path = field(meta, "file_path");
            List<Tuple2<Expression, Expression>> branches = new ArrayList<>();
            for (int i = 0; i < uris.size(); i++) {
                Expression same = new EqualTo(path, Literal.create(uris.get(i), DataTypes.StringType));
                branches.add(new Tuple2<>(same, Literal.create(offsets.get(i).longValue(), DataTypes.LongType)));
            }
            rid = new Add(rid, new CaseWhen(seq(branches), Option.empty()));
        }
        return rid;
    }

    private static Expression field(AttributeReference meta, String name) {
        return new GetStructField(meta, ((StructType) meta.dataType()).fieldIndex(name), Option.apply(name));
    }

    private static <T> scala.collection.immutable.Seq<T> seq(List<T> items) {
        return CollectionConverters.asScala(items).toSeq();
    }
}
