"""Spark: the session, the Python data sources (slice planner, sink, records source, Delta),
materialization and the flow runner.

The only layer below ``app`` that imports pyspark.
"""
