-- Current replication lag per partition (source end offset - replicated position).
SELECT flow, remote_topic, partition, lag, measured_ts
FROM replication_lag
ORDER BY lag DESC, flow, remote_topic, partition
