-- Records and bytes replicated per topic per minute.
SELECT minute, topic, records, bytes
FROM latency_per_minute
ORDER BY minute, topic
