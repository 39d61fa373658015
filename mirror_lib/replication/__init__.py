"""The replication engine without Spark, in rooms by role (each a sub-package; ``make lint``
holds their order, ARCHITECTURE.md):

- ``migration``: verify, cutover, failover, Spark-checkpoint translation, MM2 take-over/hand-back;
- ``companions``: topic/ACL sync, write protection, checkpoints, heartbeats, supervision;
- ``metrics``: run events, flow status, the Prometheus endpoint;
- ``copy``: the source reader, the writers, their transactions, the delivery ledger;
- ``planning``: what ends a slice early, a micro-batch's budget.

Shared by every room, and importing none: ``context`` (a flow at run time), ``events``,
``translate`` and ``segment_view`` (exact offset translation), ``testhooks``.

Imports ``tables`` and below; never pyspark.
"""
