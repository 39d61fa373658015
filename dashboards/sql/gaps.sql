-- Data gaps and other flow events (vanished source ranges, decode errors).
SELECT ts, type, flow, topic, partition, reason, action
FROM flow_events_recent
ORDER BY ts DESC
