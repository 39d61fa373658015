"""Kafka access over confluent-kafka: client configs (the only place secrets are resolved), the
admin port, read-only offset look-ups, topic readers, MirrorClient.

Imports the layers below (``errors``, ``mm2``, ``config``, ``offsets``); never Spark.
"""
