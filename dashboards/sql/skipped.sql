-- Stale records skipped on purpose (mirror.skip.older.than.ms) per topic per minute.
SELECT minute, topic, records, bytes, ranges
FROM skipped_per_minute
ORDER BY minute, topic
