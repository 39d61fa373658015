"""The checkpoint job of a flow A->B (docs/mm2-reference.md#checkpoints), run once per tick.

It translates the committed offsets of A's consumer groups with the flow's exact segments, writes
MM2 Checkpoint records to ``A.checkpoints.internal`` on B (never backwards unless the group
rewound), and, with ``sync.group.offsets.enabled``, moves idle groups' offsets on B forward.
With ``emit.checkpoints.enabled = false`` there is no job, as in MM2: no checkpoints, no sync.
Its state (latest checkpoints, segments) is rebuilt from Kafka when a worker has no cached copy.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, Producer, TopicPartition

from mirror_lib.errors import BrokerError, DecodeError
from mirror_lib.kafka.admin import AUTH_ERRORS, admin_client, future_result
from mirror_lib.kafka.bounded import bounded
from mirror_lib.kafka.lookups import topic_ids, wait_futures
from mirror_lib.kafka.reader import read_topic
from mirror_lib.mm2.formats import TP, Checkpoint
from mirror_lib.offsets.checkpoints import (
    CheckpointStore,
    accept_group,
    compute_checkpoints,
    group_offsets_to_sync,
)
from mirror_lib.replication.context import FlowContext, flow_dir
from mirror_lib.replication.segment_view import SegmentView, load_view, save_view
from mirror_lib.replication.translate import reader_conf

log = logging.getLogger(__name__)


@dataclass
class CheckpointState:
    """What one checkpoint job has read so far, so each cycle reads only what is new.

    Owned by the job (a :class:`~mirror_lib.replication.companions.threads.CompanionJob`, or one
    ``--once`` round), never shared through the process: it is rebuilt from Kafka when new.
    """

    store: CheckpointStore = field(default_factory=CheckpointStore)
    segments: SegmentView = field(default_factory=SegmentView)
    checkpoints_position: int = 0
    last_group_sync: float = 0.0
    skipped: int = 0
    #: the source's groups as first listed, kept with ``refresh.groups.enabled = false``
    fixed_groups: tuple[str, ...] | None = None
    #: per side, the admin clients the per-group requests are spread over (:func:`_admins`)
    admins: dict[str, list[Any]] = field(default_factory=dict)
    #: the checkpoints this job wrote, by their offset on the topic: read back without decoding
    own: dict[int, Checkpoint] = field(default_factory=dict)

    def reread_checkpoints(self) -> None:
        """Forget the checkpoints known so far; the next cycle reads the topic again from its
        start (MM2 reloads its checkpoint store when a failed task restarts)."""
        self.store = CheckpointStore()
        self.checkpoints_position = 0
        self.skipped = 0
        self.own = {}


def _add_checkpoints(ctx: FlowContext, state: CheckpointState) -> None:
    """Read checkpoints written since the last cycle, by this or any other process; only those
    of groups the flow checkpoints, as MM2's store holds only its task's groups."""
    checkpoints = []
    for msg in read_topic(
        reader_conf(ctx), ctx.checkpoints_topic, start=state.checkpoints_position
    ):
        state.checkpoints_position = msg.offset() + 1
        cp = state.own.pop(msg.offset(), None)  # ours: decoding it cost most of a round
        if cp is None:
            try:
                cp = Checkpoint.decode(msg.key(), msg.value())
            except DecodeError:
                state.skipped += 1
                continue
        if ctx.should_checkpoint_group(cp.group):
            checkpoints.append(cp)
    state.store.load(checkpoints)


#: Admin clients per cluster for the per-group requests of a round. librdkafka sends one
#: client's requests to a group coordinator one after the other; measured on one broker,
#: offsets of 2,000 groups took 1.95 s through one client and 0.56 s through 16
#: (bench/journal/2026-12-02-scale-and-soak-smoke-runs.md).
GROUP_ADMINS = 8


def _admins(ctx: FlowContext, state: CheckpointState, side: str) -> list[Any]:
    """The job's admin clients on ``side``, made once and kept across rounds."""
    if side not in state.admins:
        conf = ctx.client(side, "admin")
        state.admins[side] = [admin_client(conf) for _ in range(GROUP_ADMINS)]
    return state.admins[side]


def _per_group(admins: list[Any], call: str, requests: list[Any], timeout_s: float) -> dict:
    """``call`` once per group request (confluent-kafka takes one group a call), spread over
    ``admins`` and all sent before any answer is awaited; group -> future."""
    futures: dict[str, Any] = {}
    for i, request in enumerate(requests):
        method = getattr(admins[i % len(admins)], call)
        futures |= method([request], request_timeout=timeout_s)
    return futures


def _source_groups(
    ctx: FlowContext, admins: list[Any], state: CheckpointState
) -> dict[str, dict[TP, tuple[int, str]]]:
    """The source's groups the flow checkpoints, with their committed offsets. Listed every
    cycle, or, with ``refresh.groups.enabled = false``, only the first time (as MM2). One
    OffsetFetch per group, spread over ``admins`` (:data:`GROUP_ADMINS`)."""
    names = state.fixed_groups
    timeout_s = ctx.settings.admin_timeout_ms / 1000
    if names is None:
        listing = future_result(
            admins[0].list_consumer_groups(request_timeout=timeout_s),
            "listing consumer groups",
            timeout_s + 5,
        )
        names = tuple(sorted(x.group_id for x in listing.valid))
        if not ctx.settings.refresh_groups:
            state.fixed_groups = names
    wanted = [ConsumerGroupTopicPartitions(g) for g in names if accept_group(g, ctx.group_filter)]
    answers = wait_futures(
        _per_group(admins, "list_consumer_group_offsets", wanted, timeout_s),
        "group offsets",
        timeout_s + 5,
    )
    return {
        g: {
            (tp.topic, tp.partition): (tp.offset, tp.metadata or "")
            for tp in result.topic_partitions
            if tp.offset >= 0
        }
        for g, result in answers.items()
    }


def _sync_group_offsets(ctx: FlowContext, state: CheckpointState) -> int:
    """Commit on B the translated offsets of the groups idle there (never backwards).

    The groups are described in a request per admin client, and their offsets fetched and
    committed a group a request, spread over the job's admin clients (see
    :func:`_source_groups`)."""
    admins = _admins(ctx, state, "target")
    timeout_s = ctx.settings.admin_timeout_ms / 1000
    groups = sorted(state.store.groups())
    if not groups:
        return 0
    describes: dict[str, Any] = {}
    for i, admin in enumerate(admins):  # a share of the groups each, all in flight at once
        if share := groups[i :: len(admins)]:
            describes |= admin.describe_consumer_groups(share, request_timeout=timeout_s)
    described = wait_futures(describes, "describe group", timeout_s + 5)
    fetches = [ConsumerGroupTopicPartitions(g) for g in groups]
    current = wait_futures(
        _per_group(admins, "list_consumer_group_offsets", fetches, timeout_s),
        "offsets",
        timeout_s + 5,
    )
    commits: list[Any] = []
    for group in groups:
        desc = described[group]
        target = {(tp.topic, tp.partition): tp.offset for tp in current[group].topic_partitions}
        latest = state.store.latest(group)
        plan = group_offsets_to_sync(
            checkpoints=latest,
            target_state=str(desc.state.name) if desc.state is not None else None,
            target_members=len(desc.members),
            target_offsets=target,
        )
        if plan:
            commits.append(
                ConsumerGroupTopicPartitions(  # with the commit's metadata, as MM2
                    group,
                    [
                        TopicPartition(t, p, off, metadata=latest[(t, p)].metadata)
                        for (t, p), off in sorted(plan.items())
                    ],
                )
            )
    changed = 0
    futures = _per_group(admins, "alter_consumer_group_offsets", commits, timeout_s)
    for request in commits:
        try:
            future_result(futures[request.group_id], "alter group offsets", timeout_s + 5)
        except BrokerError as exc:  # e.g. a member joined meanwhile: MM2 logs and moves on
            log.warning("group %s on %s not synced: %s", request.group_id, ctx.target, exc)
            continue
        changed += len(request.topic_partitions)
    return changed


def run_checkpoints(
    ctx: FlowContext, state: CheckpointState | None = None, *, force_group_sync: bool = False
) -> tuple[int, int]:
    """One checkpoint cycle; returns (checkpoints written, undecodable records skipped).

    ``state``: the job's reading so far (None: a one-off cycle that reads from the start).
    ``force_group_sync`` syncs group offsets now instead of waiting for their interval.
    With ``emit.checkpoints.enabled = false`` it does nothing, group sync included: MM2's
    checkpoint connector has no tasks then.
    """
    s = ctx.settings
    if not s.emit_checkpoints:
        return 0, 0
    state = state if state is not None else CheckpointState()
    _add_checkpoints(ctx, state)
    groups = _source_groups(ctx, _admins(ctx, state, "source"), state)
    offsets = {
        (group, tp): upstream
        for group, committed in groups.items()
        for tp, (upstream, _meta) in committed.items()
        if ctx.should_replicate(tp[0])
    }
    view = state.segments
    view.update(ctx, offsets)
    emitted: list[Checkpoint] = []
    for group, committed in groups.items():
        emitted += compute_checkpoints(
            group=group,
            committed=committed,
            translate=lambda t, p, u: view.translate((t, p), u),
            policy=ctx.policy,
            source_alias=ctx.flow.mm2_source,  # MirrorCheckpointTask's names (as MM2's)
            target_alias=ctx.flow.mm2_target,
            should_replicate_topic=ctx.should_replicate,
            store=state.store,
        )
    if emitted:
        try:
            state.own |= _write_checkpoints(ctx, emitted)
        except BaseException:
            # the store already holds them, and whether a failed commit landed is unknown: the
            # topic says what was written, so that a retry emits what was not
            state.reread_checkpoints()
            raise
    now = time.monotonic()
    due = now - state.last_group_sync >= s.sync_group_offsets_interval or force_group_sync
    if s.sync_group_offsets and due:
        state.last_group_sync = now
        _sync_group_offsets(ctx, state)
    view.settle(offsets)
    return len(emitted), state.skipped + view.skipped


@dataclass
class SavedCheckpoints:
    """A checkpoint job's state that outlives its process: the segments it keeps are saved
    after each cycle (``<state>/flows/<A_to_B>/checkpoint-segments.json``, tied to the metrics
    topic's id), so that a ``--once`` round or a restarted run reads only what was written
    since. Nothing to go on from (none saved, or the topic was re-created): read from Kafka."""

    path: Path
    state: CheckpointState | None = None
    topic_id: str | None = None

    @classmethod
    def of(cls, ctx: FlowContext) -> SavedCheckpoints:
        """The saved state of ``ctx``'s flow (read on the first :meth:`run`)."""
        return cls(flow_dir(ctx.config, ctx.flow.name) / "checkpoint-segments.json")

    def run(self, ctx: FlowContext, *, force_group_sync: bool = False) -> tuple[int, int]:
        """One cycle (:func:`run_checkpoints`), then save."""
        if self.topic_id is None:  # asked again each cycle until the topic exists
            self.topic_id = _topic_id(ctx, ctx.metrics_topic)
        if self.state is None:
            self.state = CheckpointState(segments=load_view(self.path, self.topic_id))
        result = run_checkpoints(ctx, self.state, force_group_sync=force_group_sync)
        try:
            save_view(self.path, self.state.segments, self.topic_id)
        except OSError as exc:  # only the next run's reading is at stake: say so, go on
            log.warning("checkpoints of %s: segments not saved to %s (%s)", ctx.label,
                        self.path, exc)  # fmt: skip
        return result


def _topic_id(ctx: FlowContext, topic: str) -> str | None:
    try:
        return topic_ids(admin_client(ctx.client("target", "admin")), [topic]).get(topic)
    except BrokerError:  # no such topic yet (or no answer: the cycle itself will say)
        return None


def _write_checkpoints(ctx: FlowContext, checkpoints: list[Checkpoint]) -> dict[int, Checkpoint]:
    """Write one round; returns each checkpoint by its offset on the topic. With exactly-once
    delivery in one transaction: every partition's checkpoint appears together. At least once
    (for targets without transactions) without one: a round that is not acknowledged whole
    fails, and the next cycle writes what is missing."""
    ctx.admin_ops("target").create_compacted_topic(
        ctx.checkpoints_topic, ctx.settings.checkpoints_replication_factor
    )
    eos = ctx.settings.exactly_once
    txn_id = f"mirror-checkpoints-{ctx.flow.name}"
    txn = {"transactional.id": txn_id, "enable.idempotence": True}
    producer = Producer(ctx.producer("target", **(txn if eos else {})))
    failed: list[str] = []
    written: dict[int, Checkpoint] = {}

    def delivered(err: Any, msg: Any, *, cp: Checkpoint) -> None:
        if err is not None:
            failed.append(err.str())
        else:
            written[msg.offset()] = cp

    try:
        if eos:
            bounded(lambda: producer.init_transactions(30), 30, "checkpoints' init_transactions")
            producer.begin_transaction()
        now = int(time.time() * 1000)
        for cp in checkpoints:
            producer.produce(
                ctx.checkpoints_topic, cp.value(), cp.key(), partition=0, timestamp=now,
                on_delivery=functools.partial(delivered, cp=cp),
            )  # fmt: skip
        if eos:
            bounded(lambda: producer.commit_transaction(30), 30, "checkpoints' commit_transaction")
            producer.poll(0)  # their delivery reports, with offsets (one missed: decoded later)
        elif producer.flush(30) > 0 or failed:
            raise BrokerError(
                f"checkpoints of {ctx.label} not acknowledged by {ctx.where('target')}: "
                f"{', '.join(sorted(set(failed))) or 'no answer in 30 s'}",
                transient=True,
            )
        return written
    except KafkaException as exc:
        err = exc.args[0]
        raise BrokerError(
            f"checkpoints of {ctx.label} not committed on {ctx.where('target')} (transactional "
            f"id {txn_id}): {err.str()}",
            transient=err.name() not in AUTH_ERRORS,  # an ACL refused it: no retry mends that
        ) from exc
