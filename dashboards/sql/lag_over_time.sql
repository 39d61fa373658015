-- Replication lag per topic per minute (records behind the source, summed over partitions).
SELECT minute, flow, topic, lag, partitions
FROM lag_per_minute
ORDER BY minute, flow, topic
