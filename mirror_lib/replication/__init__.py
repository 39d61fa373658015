"""The replication engine without Spark: the flow context, the copy loop and its ledger, events,
topic/config sync, heartbeats, checkpoints, supervision, translation, verify, cutover, failover.

Imports ``tables`` and below; never pyspark.
"""
