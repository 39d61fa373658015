-- Per consumer group: checkpoint age, replication lag and heartbeat age of its flow.
SELECT source, target, group_id, partitions, checkpoint_age_seconds, replication_lag,
       heartbeat_age_seconds
FROM failover_readiness
ORDER BY source, target, group_id
