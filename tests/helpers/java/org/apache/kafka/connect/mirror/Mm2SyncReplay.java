package org.apache.kafka.connect.mirror;

import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.UUID;

import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;

/**
 * Replays an offset-syncs topic into MirrorMaker 2's own OffsetSyncStore (started first, so
 * every sync is applied as a running checkpoint task applies it) and prints its translation of
 * upstream offsets: MM2's conservative rule over the same syncs, from MM2's own class. In MM2's
 * package only to reach the store's package-private test constructor and hooks.
 *
 * Usage: Mm2SyncReplay BOOTSTRAP SYNCS_TOPIC TOPIC:PARTITION:OFFSET...
 * Output, one JSON line: [{"topic", "partition", "upstream", "downstream"}], downstream -1 when
 * the store has no translation (too old) and null when it has no sync for the partition.
 */
public final class Mm2SyncReplay {
    static final class Store extends OffsetSyncStore {
        @Override
        void backingStoreStart() {
            // no Kafka-based log: records are fed by hand
        }

        void feed(ConsumerRecord<byte[], byte[]> record) {
            handleRecord(record);
        }
    }

    public static void main(String[] args) throws Exception {
        Store store = new Store();
        store.start(false);
        Properties props = new Properties();
        props.put("bootstrap.servers", args[0]);
        props.put("group.id", "mm2-replay-" + UUID.randomUUID());
        props.put("enable.auto.commit", "false");
        try (KafkaConsumer<byte[], byte[]> consumer =
                 new KafkaConsumer<>(props, new ByteArrayDeserializer(), new ByteArrayDeserializer())) {
            TopicPartition tp = new TopicPartition(args[1], 0);
            List<TopicPartition> tps = List.of(tp);
            consumer.assign(tps);
            consumer.seekToBeginning(tps);
            long end = consumer.endOffsets(tps, Duration.ofSeconds(30)).get(tp);
            long deadline = System.currentTimeMillis() + 60_000;
            while (consumer.position(tp) < end) {
                if (System.currentTimeMillis() > deadline) {
                    throw new IllegalStateException("did not reach the end of " + args[1]);
                }
                for (ConsumerRecord<byte[], byte[]> r : consumer.poll(Duration.ofMillis(500))) {
                    if (r.offset() < end) {
                        store.feed(r);
                    }
                }
            }
        }
        List<Map<String, Object>> rows = new ArrayList<>();
        for (int i = 2; i < args.length; i++) {
            String[] q = args[i].split(":");
            TopicPartition upstream = new TopicPartition(q[0], Integer.parseInt(q[1]));
            long offset = Long.parseLong(q[2]);
            OptionalLong d = store.translateDownstream("replay", upstream, offset);
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("topic", q[0]);
            row.put("partition", upstream.partition());
            row.put("upstream", offset);
            row.put("downstream", d.isPresent() ? d.getAsLong() : null);
            rows.add(row);
        }
        System.out.println(new ObjectMapper().writeValueAsString(rows));
    }
}
