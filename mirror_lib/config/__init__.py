"""Configuration: mm2.properties parsing, per-flow settings, the config model, Java client
settings -> librdkafka, the describer, Databricks paths and driver secrets.

Pure (no Kafka, no Spark); imports ``errors`` and ``mm2``.
"""
