/*
 * A Delta LogStore for the crash tests of Spark's own format("delta") (tests/faults/test_delta_crash.py).
 *
 * It is Delta's LocalLogStore, except that when the environment variable HAREPLICA_SPARK_DELTA_FAULT is
 * POINT:VERSION[:TABLE] it stops at that point of the commit of table version VERSION (TABLE: the table
 * folder's name): "before-delta-commit" (the batch's data files are written, the commit file is not) or
 * "after-delta-commit" (the commit file is written; Spark has not yet written its own commit log).
 * There it writes the JSON file HAREPLICA_SPARK_DELTA_FAULT_MARKER and sleeps until the test SIGKILLs
 * the process (at most 600 s, then it fails the write).
 */

import io.delta.storage.LocalLogStore;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

public class FaultInjectingLogStore extends LocalLogStore {
    public FaultInjectingLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite, Configuration hadoopConf)
            throws IOException {
        String point = matchingPoint(path);
        if ("before-delta-commit".equals(point)) {
            stop(point, path);
        }
        super.write(path, actions, overwrite, hadoopConf);
        if ("after-delta-commit".equals(point)) {
            stop(point, path);
        }
    }

    /** The armed point when path is the commit file of the armed version (and table), else null. */
    private static String matchingPoint(Path path) {
        String spec = System.getenv("HAREPLICA_SPARK_DELTA_FAULT");
        if (spec == null || spec.isEmpty()) {
            return null;
        }
        String[] parts = spec.split(":");
        String commitFile = String.format("%020d.json", Long.parseLong(parts[1]));
        if (!path.getName().equals(commitFile)) {
            return null;
        }
        if (parts.length > 2 && !path.getParent().getParent().getName().equals(parts[2])) {
            return null;
        }
        return parts[0];
    }

    private static void stop(String point, Path path) throws IOException {
        String marker = System.getenv("HAREPLICA_SPARK_DELTA_FAULT_MARKER");
        String json = String.format("{\"point\": \"%s\", \"commitFile\": \"%s\", \"pid\": %d}", point,
                path.toString().replace("\\", "\\\\").replace("\"", "\\\""), ProcessHandle.current().pid());
        java.nio.file.Path tmp = Paths.get(marker + ".tmp");
        Files.write(tmp, json.getBytes(StandardCharsets.UTF_8));
        Files.move(tmp, Paths.get(marker), StandardCopyOption.ATOMIC_MOVE);
        try {
            Thread.sleep(600_000L);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        throw new IOException("injected fault " + point + " at " + path + ": the process was not killed");
    }
}
