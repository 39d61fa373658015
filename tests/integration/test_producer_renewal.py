"""A copy task whose producer hangs in ``send_offsets_to_transaction`` goes on with a new one.

librdkafka 2.16 can block there for good when the ledger group's coordinator is the broker
being restarted (seen in a rolling restart of a three-broker target: 75 s, until the slice was
given up; librdkafka issues 5456 and 5511). The writer now gives such a call
``CALL_HANG_S``, then replaces its producer inside the slice: the new producer fences
the old one, the ledger says where to continue, and the query itself never stops. The hang is
forced here with the test hook ``MIRROR_TEST_HANG_SEND_OFFSETS``.
"""

from __future__ import annotations

import pytest

from mirror_lib.replication.testhooks import HANG_ENV, TOPIC_ENV
from mirror_lib.testing.kafka_io import create_topic, produce_exact
from tests.helpers.exactly_once import committed_count, wait_exactly_once
from tests.helpers.kafka_raw import aborted_records
from tests.helpers.mirror_cli import kill_group, start_mirror
from tests.helpers.waiting import keyed_records, process_alive, wait_for
from tests.integration.conftest import flow_properties, write_properties

pytestmark = pytest.mark.real_kafka

PARTITIONS = 4


def test_a_hung_send_offsets_is_replaced_by_a_new_producer_without_stopping_the_query(
    brokers, tmp_path, unique_name, subprocess_env
):
    topic, remote = unique_name, f"A.{unique_name}"
    create_topic(brokers.source, topic, PARTITIONS)
    produce_exact(brokers.source, topic, keyed_records(2_000, PARTITIONS))
    props = flow_properties(
        brokers.source,
        brokers.target,
        tmp_path / "state",
        topics=topic,
        **{"tasks.max": "2", "mirror.commit.max.records": "100"},
    )
    config = write_properties(tmp_path / "mm2.properties", props)
    hung = tmp_path / "hung"
    env = {**subprocess_env, HANG_ENV: str(hung), TOPIC_ENV: remote}
    log = tmp_path / "run.log"
    proc = start_mirror(config, env, "--duration", "600", log=log)
    alive = process_alive(proc, detail=lambda: log.read_text(errors="replace")[-3000:])
    try:
        wait_for(hung.exists, 240, "the hung send_offsets_to_transaction", alive)
        produce_exact(brokers.source, topic, keyed_records(1_000, PARTITIONS, first=2_000))
        wait_exactly_once(
            brokers.source, topic, brokers.target, remote, PARTITIONS, 240, alive=alive
        )
    finally:
        kill_group(proc)
    text = log.read_text(errors="replace")
    assert "a new producer took over" in text, text[-3000:]
    assert "outage:" not in text, "the query was restarted instead"
    assert committed_count(brokers.target, remote, PARTITIONS) == 3_000
    assert aborted_records(brokers.target, remote, PARTITIONS) > 0, "nothing was fenced"
