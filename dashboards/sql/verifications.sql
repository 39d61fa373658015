-- Per partition: the latest `mirror verify` result (complete, behind, stray, or the first difference).
SELECT flow, topic, partition, status, behind, total_records, verified_to, diff_upstream_offset,
       diff_downstream_offset, detail, verified_ts, age_seconds
FROM verification_status
ORDER BY CASE status WHEN 'different' THEN 0 WHEN 'stray' THEN 0 WHEN 'behind' THEN 1 ELSE 2 END,
         flow, topic, partition
