"""mirror_lib: MirrorMaker-2-compatible Kafka replication as Spark Structured Streaming queries."""

__version__ = "0.1.0"
