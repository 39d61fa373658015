"""A source partition that ends before the flow's position is a gap, never a silent wait.

The planner compares topic ids with its last slice, but a query on a new checkpoint (a new
``mirror.state.dir``, a deleted state folder) has no last slice: it takes the id from the flow's
metrics topic, and failing that probes where the partition ends. Before, a topic re-created
with fewer records than were copied made ``--once`` report "caught up" and copy nothing; with
more, the flow skipped every new record below its old position.

Records deleted under the flow (retention, DeleteRecords), which tansu cannot do, are tested on
Apache Kafka in test_kafka_faults.py. A log truncated below the flow's position by an unclean
leader election needs more than one broker; a re-created, shorter topic stands for it here.
"""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.kafka.lookups import partition_bounds
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.source_gaps import ends_before
from mirror_lib.spark.runner import run_flows
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.integration.conftest import metrics_events


def run_once(spark, config) -> None:
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)


def values(n: int, tag: str) -> list[dict]:
    return [{"value": f"{tag}{i}", "partition": 0} for i in range(n)]


def recreate(bootstrap: str, topic: str, records: list[dict]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic])[topic].result(10)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=10).topics:
        assert time.monotonic() < deadline, "the deleted topic is still listed after 30 s"
        time.sleep(0.2)
    create_topic(bootstrap, topic, 1)
    produce_exact(bootstrap, topic, records)


@pytest.mark.parametrize(
    ("again", "on_gap"), [(10, "fail"), (40, "fail"), (40, "skip")],
    ids=["shorter-fail", "longer-fail", "longer-skip"],
)  # fmt: skip
def test_a_topic_recreated_under_a_new_checkpoint_is_a_gap(
    spark, brokers, make_config, unique_name, tmp_path, again, on_gap
):
    """30 records are copied, the topic is re-created with ``again`` records, and ``--once``
    runs on a new checkpoint. The planner takes the id the records were copied from out of
    the flow's newest ``segments`` event: with 10 the flow waited for offset 30 (before any
    check), with 40 it skipped ``new0..new29`` (before the recorded id)."""
    create_topic(brokers.source, unique_name, 1)
    produce_exact(brokers.source, unique_name, values(30, "old"))
    run_once(spark, make_config(topics=unique_name))
    recreate(brokers.source, unique_name, values(again, "new"))
    fresh = make_config(
        topics=unique_name,
        **{"mirror.state.dir": str(tmp_path / "fresh"), "A->B.mirror.on.gap": on_gap},
    )
    if on_gap == "fail":
        with pytest.raises(MirrorRuntimeError, match=r"topic was deleted and re-created"):
            run_once(spark, fresh)
    else:
        run_once(spark, fresh)
    copied = [r.value.decode() for r in consume_all(brokers.target, f"A.{unique_name}")]
    new = [f"new{i}" for i in range(again)] if on_gap == "skip" else []
    assert copied == [f"old{i}" for i in range(30)] + new
    gaps = [e for e in metrics_events(brokers.target) if e["type"] == "gap"]
    gaps = [e for e in gaps if e["topic"] == unique_name]
    assert [(g["expected_offset"], g["available_end"], g["action"]) for g in gaps] == [
        (30, again, on_gap)
    ]


def test_the_test_brokers_short_listed_end_is_not_a_gap(brokers, make_config, unique_name):
    """A position inside the log is never reported, one past its end is, with the end. tansu
    lists a partition's end as its last batch's base offset + 1, so there positions 20 and 25
    lie past the listed end but inside the log, which the fetch clears; Kafka lists 25."""
    create_topic(brokers.source, unique_name, 1)
    producer = Producer({"bootstrap.servers": brokers.source, "linger.ms": 200})
    for i in range(25):
        producer.produce(unique_name, f"r{i}".encode(), partition=0)
    assert producer.flush(30) == 0
    ctx = FlowContext.create(make_config(topics=unique_name), "A->B")
    admin = AdminClient({"bootstrap.servers": brokers.source})
    tp = (unique_name, 0)
    bounds = partition_bounds(admin, [tp])
    assert ends_before(ctx, {tp: 20}, bounds) == {}
    assert ends_before(ctx, {tp: 25}, bounds) == {}
    assert ends_before(ctx, {tp: 40}, bounds) == {tp: 25}
