package ember.jvm;

import java.util.ArrayList;
import java.util.List;

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
import org.apache.spark.sql.execution.datasources.LogicalRelation;
import org.apache.spark.sql.types.DataTypes;
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
     * one file). */
    public LogicalPlan numbered(LogicalRelation scan, List<String> uris, List<? extends Number> offsets, String name, ExprId id) {
        List<NamedExpression> columns = new ArrayList<>(CollectionConverters.asJava(scan.output()));
        columns.add(new Alias(rid(scan, uris, offsets), name, id, seq(List.of()), Option.empty(), seq(List.of())));
        return new Project(seq(columns), scan.withMetadataColumns());
    }

    /** The rid alone, over `scan`'s `_metadata` column (a plan reading it gets that column
     * from Spark's analyzer). */
    public Expression rid(LogicalRelation scan, List<String> uris, List<? extends Number> offsets) {
        AttributeReference meta = null;
        for (AttributeReference a : CollectionConverters.asJava(scan.metadataOutput())) {
            if (a.name().equals("_metadata")) {
                meta = a;
            }
        }
        if (meta == null) {
            throw new IllegalArgumentException("this scan has no _metadata column: " + scan.simpleString(80));
        }
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
