import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.connect.mirror.Checkpoint;
import org.apache.kafka.connect.mirror.Heartbeat;
import org.apache.kafka.connect.mirror.OffsetSync;

/**
 * Reads every record of a topic with a plain KafkaConsumer (read_committed, from the beginning
 * to the end offsets taken at start) and runs MirrorMaker 2's own deserializer of KIND on each.
 *
 * Usage: Mm2Decode BOOTSTRAP TOPIC KIND, KIND one of offset-sync, checkpoint, heartbeat.
 * Output, one JSON line: {"records": n, "failed": [{"partition", "offset", "error"}],
 * "decoded": [...]} with the decoded fields of each record in log order.
 */
public final class Mm2Decode {
    public static void main(String[] args) throws Exception {
        if (args.length != 3) {
            System.err.println("usage: Mm2Decode BOOTSTRAP TOPIC offset-sync|checkpoint|heartbeat");
            System.exit(2);
        }
        String topic = args[1];
        String kind = args[2];
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", "mm2-decode-" + UUID.randomUUID());
        props.put("enable.auto.commit", "false");
        props.put("isolation.level", "read_committed");
        List<Map<String, Object>> decoded = new ArrayList<>();
        List<Map<String, Object>> failed = new ArrayList<>();
        int records = 0;
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            List<TopicPartition> tps = new ArrayList<>();
            for (PartitionInfo p : consumer.partitionsFor(topic, Duration.ofSeconds(30))) {
                tps.add(new TopicPartition(topic, p.partition()));
            }
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            Map<TopicPartition, Long> ends = consumer.endOffsets(tps, Duration.ofSeconds(30));
            long deadline = System.currentTimeMillis() + 60_000;
            while (!reached(consumer, ends)) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("did not reach the end of " + topic);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    if (r.offset() >= ends.get(new TopicPartition(r.topic(), r.partition()))) {
                        continue;
                    }
                    records++;
                    try {
                        decoded.add(decode(kind, r));
                    } catch (RuntimeException e) {
                        Map<String, Object> f = new LinkedHashMap<>();
                        f.put("partition", r.partition());
                        f.put("offset", r.offset());
                        f.put("error", e.toString());
                        failed.add(f);
                    }
                }
            }
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("records", records);
        out.put("failed", failed);
        out.put("decoded", decoded);
        System.out.println(new ObjectMapper().writeValueAsString(out));
    }

    private static boolean reached(KafkaConsumer<byte[], byte[]> consumer, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (consumer.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }

    private static Map<String, Object> decode(String kind, ConsumerRecord<byte[], byte[]> r) {
        Map<String, Object> row = new LinkedHashMap<>();
        row.put("offset", r.offset());
        switch (kind) {
            case "offset-sync": {
                OffsetSync s = OffsetSync.deserializeRecord(r);
                row.put("topic", s.topicPartition().topic());
                row.put("partition", s.topicPartition().partition());
                row.put("upstream", s.upstreamOffset());
                row.put("downstream", s.downstreamOffset());
                break;
            }
            case "checkpoint": {
                Checkpoint c = Checkpoint.deserializeRecord(r);
                row.put("group", c.consumerGroupId());
                row.put("topic", c.topicPartition().topic());
                row.put("partition", c.topicPartition().partition());
                row.put("upstream", c.upstreamOffset());
                row.put("downstream", c.downstreamOffset());
                row.put("metadata", c.metadata());
                break;
            }
            case "heartbeat": {
                Heartbeat h = Heartbeat.deserializeRecord(r);
                row.put("source", h.sourceClusterAlias());
                row.put("target", h.targetClusterAlias());
                row.put("timestamp", h.timestamp());
                break;
            }
            default:
                throw new IllegalArgumentException("unknown kind " + kind);
        }
        return row;
    }
}
