"""Spark's own Kafka connector copying a topic: the job a Databricks user would write.

Usage: ``python bench/spark_kafka.py --source BS --target BS --topic T --dest D --checkpoint DIR
[--trigger availableNow | "0.5 seconds"]``. The job is ``readStream.format("kafka")`` ->
``writeStream.format("kafka")``, checkpointed; with ``includeHeaders`` and the ``partition``
column it keeps headers and partitions (the sink would otherwise pick partitions by key). Record
timestamps are not carried: the sink writes new ones. Delivery is at least once. On a cluster
the connector's jar is installed; locally ``spark.jars.packages`` fetches
``spark-sql-kafka-0-10_2.13`` at pyspark's own version from Maven Central (cached under
``~/.cache/mirror_lib/ivy``). Prints ``started query`` when the query runs and ``done`` when an
``availableNow`` run has copied everything.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pyspark
from pyspark.sql import SparkSession

PACKAGE = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
IVY = Path.home() / ".cache" / "mirror_lib" / "ivy"


def local_session() -> SparkSession:
    """A plain local session with the connector's jar, on loopback only, without the UI."""
    return (
        SparkSession.builder.master("local[*]")
        .appName("bench-spark-kafka")
        .config("spark.jars.packages", PACKAGE)
        .config("spark.jars.ivy", str(IVY))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for name in ("--source", "--target", "--topic", "--dest", "--checkpoint"):
        parser.add_argument(name, required=True)
    parser.add_argument("--trigger", default="availableNow")
    args = parser.parse_args()
    spark = local_session()

    # the user's job
    records = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", args.source)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .load()
    )
    writer = (
        records.select("key", "value", "headers", "partition")
        .writeStream.format("kafka")
        .option("kafka.bootstrap.servers", args.target)
        .option("topic", args.dest)
        .option("checkpointLocation", args.checkpoint)
    )
    if args.trigger == "availableNow":
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=args.trigger)
    query = writer.start()

    print("started query", flush=True)
    query.awaitTermination()
    print("done", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
