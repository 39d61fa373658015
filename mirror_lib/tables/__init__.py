"""The Delta tables: schemas, record decoding, the delta-rs writer/reader, SQL views, the one health
computation, command-written tables, run metrics.

Imports ``kafka`` and below; never pyspark (a Spark session, where needed, is handed in).
"""
