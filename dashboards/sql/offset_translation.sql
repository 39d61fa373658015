-- Translated target offsets of every checkpointed group (what `mirror translate` prints).
SELECT source, target, group_id, topic, partition, upstream_offset, offset
FROM offset_translation
ORDER BY source, target, group_id, topic, partition
