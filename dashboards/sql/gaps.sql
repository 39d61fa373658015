-- Data gaps, stale-data skips, outages (outage_started/outage_ended) and other flow events (decode errors, ...).
SELECT ts, type, flow, topic, partition, reason, action
FROM flow_events_recent
ORDER BY ts DESC
