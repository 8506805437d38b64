package ember.jvm;

import java.util.Base64;
import java.util.List;
import java.util.Optional;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.connect.proto.Relation;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
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
 * client's relation, base64 protobuf} answers the plan-out message of that relation.
 */
public final class ConnectPlugin implements RelationPlugin {
    static final String REQUEST = "type.googleapis.com/ember.Request";
    static final int VERSION = 1;

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
            if (!"plan_out".equals(command)) {
                throw new IllegalArgumentException("ember's Connect plugin does not know the request " + command);
            }
            Relation relation = Relation.parseFrom(Base64.getDecoder().decode(body.path("relation").asText()));
            SparkSession session = planner.session();
            Dataset<Row> ds = Dataset.ofRows(session, planner.transformRelation(relation));
            String text = new PlanDump().text(null, ds, body.path("excluded").asText());
            return Optional.of(answer(session, text));
        } catch (java.io.IOException malformed) {
            throw new IllegalArgumentException("ember's Connect plugin got a malformed request: " + malformed.getMessage(), malformed);
        }
    }

    /** One row, one string column `message`. */
    private static LogicalPlan answer(SparkSession session, String text) {
        StructType schema = new StructType().add("message", DataTypes.StringType, false);
        return session.createDataFrame(List.of(RowFactory.create(text)), schema).logicalPlan();
    }
}
