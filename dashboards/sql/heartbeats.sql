-- Heartbeat freshness and hops per cluster pair, as seen on each cluster.
SELECT cluster, source, target, hops, last_heartbeat, age_seconds, heartbeats
FROM heartbeat_freshness
ORDER BY cluster, hops, source, target
