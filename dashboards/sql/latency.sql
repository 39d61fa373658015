-- Replication latency per topic per minute (ms): p50 and p99.
SELECT minute, topic, latency_ms_p50, latency_ms_p99, latency_ms_max
FROM latency_per_minute
ORDER BY minute, topic
