"""Spark: the session, the Python data sources (slice planner and copy tasks, records source,
Delta), materialization and the flow runner.

The only layer below ``app`` that imports pyspark.
"""
