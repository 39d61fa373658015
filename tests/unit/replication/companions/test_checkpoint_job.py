"""One checkpoint cycle of a flow A->B over fake clusters: what is written to the checkpoints
topic and which group offsets on B are altered (docs/mm2-reference.md#checkpoints); where the
job saves its segments, and that saving never fails a cycle."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import pytest
from confluent_kafka import KafkaError

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import BrokerError
from mirror_lib.mm2.formats import Checkpoint
from mirror_lib.offsets.segments import Segment, SegmentIndex
from mirror_lib.replication import segment_view
from mirror_lib.replication.companions import checkpoint_job
from mirror_lib.replication.companions.checkpoint_job import (
    CheckpointState,
    SavedCheckpoints,
    run_checkpoints,
)
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.segment_view import SegmentView
from tests.helpers.fake_admin import RecordingAdminOps
from tests.helpers.fake_groups import FakeGroupAdmin, topic_reader
from tests.helpers.fake_kafka import FakeProducer

PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "127.0.0.1:1",
    "B.bootstrap.servers": "127.0.0.1:2",
    "A->B.enabled": "true",
    "A->B.topics": "orders",
}
SHIFT = 100  # orders-0 lands on B 100 offsets further on


@dataclass
class Clusters:
    source: FakeGroupAdmin
    target: FakeGroupAdmin
    log: FakeProducer  # the records on B, the checkpoints topic among them

    def checkpoints(self) -> list[Checkpoint]:
        return [
            Checkpoint.decode(key, value)
            for topic, _p, key, value in self.log.records
            if topic == "A.checkpoints.internal"
        ]


@pytest.fixture
def clusters(monkeypatch: pytest.MonkeyPatch) -> Clusters:
    c = Clusters(FakeGroupAdmin(), FakeGroupAdmin(), FakeProducer())
    by_servers = {"127.0.0.1:1": c.source, "127.0.0.1:2": c.target}
    monkeypatch.setattr(
        checkpoint_job, "admin_client", lambda conf: by_servers[conf["bootstrap.servers"]]
    )
    for module in (checkpoint_job, segment_view):
        monkeypatch.setattr(module, "read_topic", topic_reader(c.log))
    monkeypatch.setattr(checkpoint_job, "Producer", lambda conf: c.log)
    monkeypatch.setattr(
        FlowContext, "admin_ops", lambda self, side, timeout_s=None: RecordingAdminOps(brokers=3)
    )
    return c


def _ctx(**props: str) -> FlowContext:
    return FlowContext.create(parse_config({**PROPS, **props}), "A->B")


def _state() -> CheckpointState:
    """A job's state whose segments say: orders-0's offsets 0..9999 were copied to 100..10099."""
    view = SegmentView(default_from=-1, position=0)
    view.indexes[("orders", 0)] = SegmentIndex([Segment(0, 9999, SHIFT, 9999 + SHIFT)])
    return CheckpointState(segments=view)


def _write_earlier(c: Clusters, *checkpoints: Checkpoint) -> None:
    """Checkpoints already on B's checkpoints topic (an earlier run, or another process)."""
    for cp in checkpoints:
        c.log.produce("A.checkpoints.internal", cp.value(), cp.key(), partition=0)
    c.log.flush()


def test_a_checkpoint_whose_write_failed_is_written_by_the_next_cycle(clusters) -> None:
    """The job is retried with the same state after a transient failure (CompanionJob); the
    checkpoint that was not written must not count as written then."""
    ctx, state = _ctx(), _state()
    clusters.source.offsets["app"] = {("orders", 0): (700, "")}
    clusters.log.commit_fails_with = KafkaError(KafkaError._MSG_TIMED_OUT)
    with pytest.raises(BrokerError) as failed:
        run_checkpoints(ctx, state)
    assert failed.value.transient and clusters.checkpoints() == []

    clusters.log.commit_fails_with = None  # the group stopped committing: its offset stays
    assert run_checkpoints(ctx, state) == (1, 0)
    assert clusters.checkpoints() == [Checkpoint("app", "A.orders", 0, 700, 700 + SHIFT)]
    assert run_checkpoints(ctx, state) == (0, 0)  # written once: suppressed from now on


def test_group_sync_leaves_groups_the_flow_excludes_alone(clusters) -> None:
    """A group excluded after it was checkpointed keeps its offsets on B (MM2's checkpoint store
    holds only the task's groups)."""
    ctx = _ctx(**{"sync.group.offsets.enabled": "true", "A->B.groups.exclude": "legacy"})
    _write_earlier(clusters, Checkpoint("legacy", "A.orders", 0, 400, 400 + SHIFT))
    clusters.target.offsets["legacy"] = {("A.orders", 0): (100, "")}  # reset on B on purpose
    clusters.source.offsets["app"] = {("orders", 0): (700, "")}

    run_checkpoints(ctx, _state(), force_group_sync=True)
    assert clusters.target.offsets["legacy"] == {("A.orders", 0): (100, "")}
    assert [a[0] for a in clusters.target.altered] == ["app"]  # the sync itself ran


def test_without_emitted_checkpoints_nothing_is_written_nor_synced(clusters) -> None:
    """emit.checkpoints.enabled = false: MM2's checkpoint connector has no tasks, so no group
    sync either; and the cycle does not count checkpoints it did not write."""
    ctx = _ctx(**{"emit.checkpoints.enabled": "false", "sync.group.offsets.enabled": "true"})
    clusters.source.offsets["app"] = {("orders", 0): (700, "")}

    assert run_checkpoints(ctx, _state(), force_group_sync=True) == (0, 0)
    assert clusters.checkpoints() == [] and clusters.target.altered == []


def test_group_sync_commits_the_checkpoint_with_its_metadata(clusters) -> None:
    """MM2 writes a group's offset on B with the upstream commit's metadata."""
    ctx = _ctx(**{"sync.group.offsets.enabled": "true"})
    clusters.source.offsets["app"] = {("orders", 0): (700, "app-v2")}

    assert run_checkpoints(ctx, _state(), force_group_sync=True) == (1, 0)
    assert clusters.target.altered == [("app", "A.orders", 0, 700 + SHIFT, "app-v2")]


def test_at_least_once_writes_checkpoints_without_a_transaction(clusters, monkeypatch) -> None:
    """mirror.delivery = at_least_once is for targets without transactions (nor, here,
    idempotent producers): the checkpoints go out flushed, not in a transaction."""
    confs: list[dict] = []
    monkeypatch.setattr(checkpoint_job, "Producer", lambda conf: confs.append(conf) or clusters.log)
    ctx = _ctx(**{"mirror.delivery": "at_least_once", "B.producer.enable.idempotence": "false"})
    clusters.source.offsets["app"] = {("orders", 0): (700, "")}

    assert run_checkpoints(ctx, _state()) == (1, 0)
    assert clusters.checkpoints() == [Checkpoint("app", "A.orders", 0, 700, 700 + SHIFT)]
    assert not clusters.log.transactional and clusters.log.committed == []
    assert "transactional.id" not in confs[0]
    assert confs[0]["enable.idempotence"] == "false"
    assert confs[0]["max.in.flight.requests.per.connection"] == 1


def test_group_sync_describes_many_groups_a_request(clusters) -> None:
    """Group sync asks B about its groups in a request per admin client, not one per group (a
    round of 5,000 groups in seconds, docs/performance.md#at-scale-and-over-time); each group's
    offsets are still their own call, as confluent-kafka takes one group a call, and every group
    that moves is committed."""
    ctx = _ctx(**{"sync.group.offsets.enabled": "true"})
    groups = 3 * checkpoint_job.GROUP_ADMINS
    for g in range(groups):
        clusters.source.offsets[f"app{g:02d}"] = {("orders", 0): (700 + g, "")}
    clusters.target.members["app02"] = 1  # active on B: never moved

    assert run_checkpoints(ctx, _state(), force_group_sync=True) == (groups, 0)
    described = [n for kind, n in clusters.target.calls if kind == "describe_consumer_groups"]
    assert len(described) == checkpoint_job.GROUP_ADMINS and sum(described) == groups
    assert len(clusters.target.altered) == groups - 1
    assert "app02" not in {a[0] for a in clusters.target.altered}


def test_a_round_reads_its_own_checkpoints_back_without_decoding_them(clusters, monkeypatch):
    """The next round reads the topic on from where it stood: the checkpoints it wrote itself
    are taken as written (decoding 50,000 of them was most of a 5,000-group round), another
    writer's are decoded."""
    ctx, state = _ctx(), _state()
    clusters.source.offsets["app"] = {("orders", 0): (700, "")}
    assert run_checkpoints(ctx, state) == (1, 0)
    _write_earlier(clusters, Checkpoint("other", "A.orders", 0, 400, 400 + SHIFT))
    decoded: list[bytes] = []
    real = Checkpoint.decode
    monkeypatch.setattr(Checkpoint, "decode", lambda k, v: decoded.append(k) or real(k, v))

    clusters.source.offsets["app"] = {("orders", 0): (800, "")}
    assert run_checkpoints(ctx, state) == (1, 0)
    assert len(decoded) == 1  # only the other writer's
    assert state.store.get("other", "A.orders", 0) is not None
    assert state.store.get("app", "A.orders", 0).upstream_offset == 800


def _saving_ctx(state_dir: str) -> FlowContext:
    return _ctx(**{"mirror.state.dir": state_dir})


def test_a_local_or_volume_state_dir_holds_the_file_in_the_flow_folder(tmp_path) -> None:
    path = SavedCheckpoints.of(_saving_ctx("/Volumes/main/mirror/state")).path
    assert str(path) == "/Volumes/main/mirror/state/flows/A_to_B/checkpoint-segments.json"
    assert SavedCheckpoints.of(_saving_ctx(str(tmp_path))).path == (
        tmp_path / "flows" / "A_to_B" / "checkpoint-segments.json"
    )


@pytest.fixture
def cycles(monkeypatch: pytest.MonkeyPatch) -> list:
    """run_checkpoints as a stub that reads one record; the metrics topic's id appears late."""
    ran: list = []
    ids = iter([None, "id-1"])

    def cycle(ctx, state, force_group_sync=False):
        ran.append((state, state.segments.position))  # the position it starts from
        state.segments.position = 7
        return 3, 0

    monkeypatch.setattr(checkpoint_job, "run_checkpoints", cycle)
    monkeypatch.setattr(checkpoint_job, "_topic_id", lambda ctx, topic: next(ids, "id-1"))
    return ran


def test_saving_waits_for_the_topic_id_and_a_failed_save_is_only_a_warning(
    tmp_path, cycles, caplog
) -> None:
    ctx = _saving_ctx(str(tmp_path))
    saved = SavedCheckpoints.of(ctx)
    assert saved.run(ctx) == (3, 0)
    assert not saved.path.exists()  # no topic id yet: nothing to tie the file to
    assert saved.run(ctx) == (3, 0)
    assert saved.path.exists() and cycles[0][0] is cycles[1][0]  # one state for the job's life
    assert SavedCheckpoints.of(ctx).run(ctx) == (3, 0)  # a new process
    assert [position for _state, position in cycles] == [None, 7, 7]

    blocked = SavedCheckpoints(tmp_path / "a-file" / "segments.json")
    (tmp_path / "a-file").write_text("not a folder")
    with caplog.at_level(logging.WARNING):
        assert blocked.run(ctx) == (3, 0)
    assert "segments not saved" in caplog.text
