package org.apache.kafka.connect.mirror;

import java.io.InputStreamReader;
import java.io.Reader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Prints the names MirrorMaker 2 gives each flow of an mm2.properties file, from the connector
 * configurations its dedicated mode builds (MirrorMakerConfig.connectorBaseConfig, as
 * MirrorHerder does): the aliases it names the clusters by, the offset-syncs and checkpoints
 * topics, and the remote names of a topic and of the heartbeats topic. In MM2's package only to
 * reach the configurations' package-private replication policy.
 *
 * Usage: Mm2Names MM2_PROPERTIES TOPIC. Output, one JSON line: [{"flow", "enabled",
 * "source_alias", "target_alias", "offset_syncs", "checkpoints", "remote_topic",
 * "remote_heartbeats"}], one per cluster pair.
 */
public final class Mm2Names {
    public static void main(String[] args) throws Exception {
        Properties file = new Properties();
        try (Reader in = new InputStreamReader(Files.newInputStream(Paths.get(args[0])),
                StandardCharsets.ISO_8859_1)) {
            file.load(in);
        }
        Map<String, String> props = new HashMap<>();
        for (String name : file.stringPropertyNames()) {
            props.put(name, file.getProperty(name));
        }
        MirrorMakerConfig config = new MirrorMakerConfig(props);
        List<Map<String, Object>> rows = new ArrayList<>();
        for (SourceAndTarget pair : config.clusterPairs()) {
            MirrorSourceConfig source = new MirrorSourceConfig(
                config.connectorBaseConfig(pair, MirrorSourceConnector.class));
            MirrorCheckpointConfig checkpoint = new MirrorCheckpointConfig(
                config.connectorBaseConfig(pair, MirrorCheckpointConnector.class));
            ReplicationPolicy policy = source.replicationPolicy();
            String alias = source.sourceClusterAlias();
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("flow", pair.toString());
            row.put("enabled", source.enabled());
            row.put("source_alias", alias);
            row.put("target_alias", source.targetClusterAlias());
            row.put("offset_syncs", source.offsetSyncsTopic());
            row.put("checkpoints", checkpoint.checkpointsTopic());
            row.put("remote_topic", policy.formatRemoteTopic(alias, args[1]));
            row.put("remote_heartbeats", policy.formatRemoteTopic(alias, policy.heartbeatsTopic()));
            rows.add(row);
        }
        rows.sort((a, b) -> ((String) a.get("flow")).compareTo((String) b.get("flow")));
        System.out.println(new ObjectMapper().writeValueAsString(rows));
    }
}
