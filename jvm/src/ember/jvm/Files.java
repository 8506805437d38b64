package ember.jvm;

import java.io.FileNotFoundException;
import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.parquet.hadoop.ParquetFileReader;
import org.apache.parquet.hadoop.util.HadoopInputFile;
import org.apache.spark.sql.classic.SparkSession;

/**
 * Source files as the engine's file systems see them, for a client that cannot read them
 * itself (a Spark Connect client on another machine): each file's size and modification
 * time, which tell a change since capture, and a Parquet file's row count off its footer,
 * which numbers its rows as `_metadata.row_index` does.
 */
public final class Files {
    private Files() {
    }

    /** [size, modification time in ms, rows] per URI, as JSON; a missing file is [-1, -1, 0],
     * rows are counted only where `parquet`. */
    public static String facts(SparkSession session, JsonNode uris, boolean parquet) throws IOException {
        Configuration conf = session.sessionState().newHadoopConf();
        ObjectMapper mapper = new ObjectMapper();
        ArrayNode out = mapper.createArrayNode();
        for (JsonNode uri : uris) {
            Path path;
            try {
                path = new Path(new URI(uri.asText()));
            } catch (URISyntaxException malformed) {
                throw new IllegalArgumentException("ember's Connect plugin got a malformed file URI: " + uri.asText(), malformed);
            }
            ArrayNode row = out.addArray();
            FileStatus status;
            try {
                status = path.getFileSystem(conf).getFileStatus(path);
            } catch (FileNotFoundException gone) {
                row.add(-1).add(-1).add(0);
                continue;
            }
            row.add(status.getLen()).add(status.getModificationTime());
            if (parquet) {
                try (ParquetFileReader reader = ParquetFileReader.open(HadoopInputFile.fromStatus(status, conf))) {
                    row.add(reader.getRecordCount());
                }
            } else {
                row.add(0);
            }
        }
        return mapper.writeValueAsString(out);
    }
}
