"""A flow whose source MirrorMaker 2 names otherwise (a top-level `source.cluster.alias`): the
heartbeats it writes carry MM2's name, as MM2's own connectors write them (their topic names are
held to MM2's in tests/integration/test_mm2_names.py)."""

from __future__ import annotations

import confluent_kafka

from mirror_lib.mm2.formats import Heartbeat
from mirror_lib.replication.companions import heartbeats
from tests.helpers.fake_kafka import FakeProducer


def test_heartbeats_carry_the_name_mm2_gives_the_source(aliased_ctx, monkeypatch):
    written = FakeProducer()
    monkeypatch.setattr(confluent_kafka, "Producer", lambda conf: written)
    monkeypatch.setattr(heartbeats, "ensure_heartbeats_topic", lambda ctx: None)
    assert heartbeats.emit_heartbeat(aliased_ctx) == 1
    ((topic, _partition, key, value),) = written.records
    beat = Heartbeat.decode(key, value)
    assert topic == "heartbeats"
    assert (beat.source_cluster_alias, beat.target_cluster_alias) == ("primary", "B")
