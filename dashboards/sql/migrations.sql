-- Per partition: where `mirror cutover` stands (migrating, migrated, retired), A's end offset at
-- the cutover and the matching offset on B.
SELECT flow, topic, partition, status, source_end_offset, target_offset, groups, status_ts
FROM migration_status
ORDER BY flow, topic, partition
