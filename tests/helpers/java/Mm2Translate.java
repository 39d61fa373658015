import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.mirror.RemoteClusterUtils;

/**
 * Prints, as one JSON line, what MirrorMaker 2's own client library answers for consumer groups:
 * RemoteClusterUtils.translateOffsets(props, remoteAlias, group, timeout) per group.
 *
 * Usage: Mm2Translate BOOTSTRAP REMOTE_ALIAS GROUP... [-Dkey=value client settings as
 * system properties prefixed "mm2client."]. Output: [{"group", "topic", "partition", "offset",
 * "metadata"}, ...], sorted by group, topic and partition.
 */
public final class Mm2Translate {
    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: Mm2Translate BOOTSTRAP REMOTE_ALIAS GROUP...");
            System.exit(2);
        }
        Map<String, Object> props = new HashMap<>();
        props.put("bootstrap.servers", args[0]);
        for (String name : System.getProperties().stringPropertyNames()) {
            if (name.startsWith("mm2client.")) {
                props.put(name.substring("mm2client.".length()), System.getProperty(name));
            }
        }
        List<Map<String, Object>> rows = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            String group = args[i];
            Map<TopicPartition, OffsetAndMetadata> offsets =
                RemoteClusterUtils.translateOffsets(props, args[1], group, Duration.ofSeconds(60));
            for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
                Map<String, Object> row = new LinkedHashMap<>();
                row.put("group", group);
                row.put("topic", e.getKey().topic());
                row.put("partition", e.getKey().partition());
                row.put("offset", e.getValue().offset());
                row.put("metadata", e.getValue().metadata());
                rows.add(row);
            }
        }
        rows.sort((a, b) -> {
            int c = ((String) a.get("group")).compareTo((String) b.get("group"));
            if (c == 0) c = ((String) a.get("topic")).compareTo((String) b.get("topic"));
            if (c == 0) c = Integer.compare((Integer) a.get("partition"), (Integer) b.get("partition"));
            return c;
        });
        System.out.println(new ObjectMapper().writeValueAsString(rows));
    }
}
