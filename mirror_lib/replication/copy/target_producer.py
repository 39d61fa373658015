"""The slot's producer on the target, and what its failures mean: an outage the run waits
through (transient) or a fault that ends it. Used by :mod:`mirror_lib.replication.copy.writer`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message, Producer

from mirror_lib.errors import BrokerError, RecordTooLargeError
from mirror_lib.kafka.admin import (
    TOPIC_GONE_CODES,
    broker_names,
    first_answer,
    first_few,
    lost_brokers,
    metadata_now,
    replica_trouble,
    whole_numbers,
)
from mirror_lib.kafka.bounded import bounded
from mirror_lib.kafka.clients import TRANSACTION_TIMEOUT_MS
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.context import FlowContext

log = logging.getLogger(__name__)

#: What librdkafka calls with a produced record's outcome: its error (None: delivered) and it.
DeliveryReport = Callable[[KafkaError | None, Message], None]

BATCH_SIZE = 1_000_000  # our default producer batch.size
#: What a record batch's framing may add to the bytes librdkafka counts against batch.size.
FRAMING = 512
#: The limits' look-up may not hold a slot's set-up longer (a target that does not answer
#: fails the producer's own set-up anyway; a fan-out group waits FANOUT_INIT_S for it).
LOOKUP_S = 5.0
#: Slots :func:`fence_slots` fences at once: a producer each, for as long as its coordinator
#: takes to abort what the slot left open.
FENCE_THREADS = 16
TROUBLE_LOOKUP_S = 2.0  # a diagnosis of slow acknowledgements may hold the copy this long

_FENCED = {
    KafkaError._FENCED,
    KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH,
    KafkaError.INVALID_PRODUCER_ID_MAPPING,
}
_PASSING = {  # delivery failures an outage causes: the run retries them
    # a request still out to a broker that left the cluster (fenced, so gone from the metadata
    # librdkafka follows): its handle is destroyed and the request fails with this, abortable
    KafkaError._DESTROY_BROKER,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
}


_told: set[tuple[Any, ...]] = set()


def _first_time(*key: Any) -> bool:
    """True the first time ``key`` is seen in this process: a warning about a setting that
    holds for the whole run is said once per Python worker, not by every slot at every slice."""
    if key in _told:
        return False
    _told.add(key)
    return True


def _passing(err: KafkaError) -> bool:
    """An error an outage causes, that the run retries (not a fenced producer)."""
    code = err.code()
    # a topic deleted on the target (the metrics or offset-syncs topic, or a remote topic): the
    # restarted query's planner creates it again
    gone = code in TOPIC_GONE_CODES
    return (err.retriable() or code in _PASSING or gone) and code not in _FENCED


def passing_code(code: int) -> bool:
    """A delivery failure an outage causes (the transaction may stay open until it ends)."""
    return code in _PASSING


def batch_limit(ctx: FlowContext, remote_topics: Collection[str]) -> tuple[int, str] | None:
    """The smallest ``max.message.bytes`` of ``remote_topics`` on the target, with its topic
    (None when unknown). Kafka checks a whole record batch against it, and librdkafka, unlike
    the Java producer MM2 uses, never splits a batch the broker refuses as too large: a
    batch.size above it fails a catch-up's transactions on records far below the limit."""
    if not remote_topics:
        return None
    try:
        admin = ctx.admin_ops("target", timeout_s=LOOKUP_S)
        limits = whole_numbers(admin, sorted(remote_topics), "max.message.bytes")
    except BrokerError as exc:
        if _first_time(ctx.label, "unchecked", str(exc)):
            log.warning("%s: batch.size not checked against max.message.bytes: %s", ctx.label, exc)
        return None
    return min((limit, topic) for topic, limit in limits.items()) if limits else None


@dataclass(frozen=True)
class Trouble:
    """What the target's metadata shows about writes the copy waits for: reasons it refuses
    them (``refusals``: partitions without a leader or below ``min.insync.replicas``, or no
    broker answering), the bootstrap addresses that did not answer (``silent``) and the ids of
    brokers that hold replicas of the written partitions but are no longer in the cluster
    (``lost``: fenced by the controllers, or gone)."""

    refusals: tuple[str, ...]
    silent: tuple[str, ...] = ()
    lost: tuple[int, ...] = ()

    @property
    def refuses(self) -> bool:
        """The target itself refuses (or cannot take) the writes: a new producer would not
        help. Silent addresses alone are a lost broker whose requests a new producer re-sends
        to the partitions' new leaders."""
        return bool(self.refusals)

    @property
    def moved(self) -> bool:
        """A broker of the written partitions left the cluster and they are led and in sync
        on the others: the controllers moved them, and acknowledgements still missing are held
        on a connection to the broker that left."""
        return bool(self.lost) and not self.refusals

    def __str__(self) -> str:
        said = [first_few(self.refusals)] if self.refusals else []
        if self.silent:
            said.append(f"{', '.join(self.silent)} did not answer")
        if self.lost:
            said.append(f"{broker_names(self.lost)} left the cluster (fenced by its controllers)")
        return "; ".join(said)


def target_trouble(
    ctx: FlowContext,
    producer: Producer,
    written: Sequence[TP],
    min_isr: Mapping[str, int],
    silent_before: Collection[str] = (),
) -> Trouble | None:
    """Why the target may not acknowledge writes to ``written`` (remote partitions), from its
    metadata: a partition without a leader, or with fewer in-sync replicas than its
    ``min.insync.replicas`` (``min_isr``; the target then refuses writes with
    NOT_ENOUGH_REPLICAS, which librdkafka retries in silence), and the bootstrap addresses that
    did not answer. The metadata comes from ``producer``, else (it asked a broker that does not
    answer) from whichever bootstrap address answers first, those ``silent_before`` (an
    earlier look's) left out: a client for a broker that does not answer is slow to go. None:
    nothing seen."""
    silent: list[str] = []
    cluster = metadata_now(producer, TROUBLE_LOOKUP_S)
    if cluster is None:
        conf = ctx.client("target", "admin")
        cluster, silent = first_answer(conf, TROUBLE_LOOKUP_S, silent_before)
        if cluster is None:
            return Trouble((
                f"no broker of {ctx.where('target')} answered a metadata request in "
                f"{TROUBLE_LOOKUP_S:g}s",
            ))  # fmt: skip
    meta = cluster.topics
    found = Trouble(
        tuple(replica_trouble(meta, written, min_isr)),
        tuple(silent),
        lost_brokers(meta, cluster.brokers, written),
    )
    return found if found.refusals or found.silent or found.lost else None


def make_producer(
    ctx: FlowContext,
    slot: int,
    *,
    remote_topics: Collection[str] = (),
    init_timeout_s: float = 60,
) -> tuple[Producer, int]:
    """The slot's producer: transactional (fencing older instances), or at least once without
    transactions (idempotent unless the user turned that off for a target without idempotent
    producers), its batches no larger than any of ``remote_topics`` accepts; with its
    ``transaction.timeout.ms`` (the user's, else librdkafka's default), after which the broker
    aborts an open transaction."""
    defaults = {
        "batch.size": BATCH_SIZE,
        "acks": "all",
        # as Kafka Connect's producers: records wait for the answer in one batch instead of
        # going out as many small requests, which a target broker pays for in garbage
        "max.in.flight.requests.per.connection": 1,
        # with one request in flight, records gather while it is out: lingering longer only
        # delays the first record of each batch
        "linger.ms": 1,
        "queue.buffering.max.messages": max(500_000, 2 * ctx.settings.fanout_max_lag_records),
    }
    extra: dict[str, Any] = {}
    if ctx.settings.exactly_once:
        extra = {"enable.idempotence": True, "transactional.id": ctx.transactional_id(slot)}
    conf = ctx.producer("target", defaults, **extra)
    limit = batch_limit(ctx, remote_topics)
    wanted = int(conf.get("batch.size", BATCH_SIZE))
    if limit is not None and wanted > limit[0] - FRAMING:
        conf["batch.size"] = max(1, limit[0] - FRAMING)
        if wanted != BATCH_SIZE and _first_time(ctx.label, wanted, *limit):  # the user's own
            log.warning(
                "%s: the producer's batch.size %d is lowered to %d for this run: %s on the "
                "target accepts record batches of at most %d bytes (max.message.bytes)",
                ctx.label, wanted, conf["batch.size"], limit[1], limit[0],
            )  # fmt: skip
    producer = Producer(conf)
    if ctx.settings.exactly_once:
        bounded(
            lambda: producer.init_transactions(init_timeout_s),
            init_timeout_s,
            f"init_transactions on {ctx.where('target')}",
        )
    timeout = str(conf.get("transaction.timeout.ms", TRANSACTION_TIMEOUT_MS))
    return producer, int(timeout) if timeout.isdigit() else TRANSACTION_TIMEOUT_MS


def fence_slots(
    ctx: FlowContext, slots: Iterable[int], timeout_s: float = 10.0
) -> dict[int, BrokerError]:
    """Fence the producers of ``ctx``'s copy tasks in ``slots``, all at once, and abort what
    they left open; returns the slots that were not fenced (the target is out), with why.

    ``init_transactions`` on a slot's ``transactional.id`` bumps its epoch: a copy task still
    running with an older one commits nothing more, and what it wrote uncommitted is aborted
    and copied again, with its metrics, by the next slice. The planner fences every slot
    before a query's first slice and whenever the slices' tasks change; a stopped query is
    fenced where the end of its tasks cannot be seen (Spark Connect, or Spark not killing
    them in time). Each fence waits for its coordinator to abort what the slot left open,
    which is why they run together (docs/how-it-works.md#task-slots). Once one fails, slots
    not begun yet are not tried (failed with that error): a target that is out fails them
    all, and a stop or a plan waits one fence's time for it, as slot by slot."""
    slots = list(slots)
    if not slots:
        return {}
    with ThreadPoolExecutor(min(len(slots), FENCE_THREADS), thread_name_prefix="fence") as pool:
        futures = {slot: pool.submit(fence_slot, ctx, slot, timeout_s) for slot in slots}
        wait(futures.values(), return_when=FIRST_EXCEPTION)
        pool.shutdown(cancel_futures=True)
    failed: dict[int, BrokerError] = {}
    for slot, future in futures.items():
        exc = None if future.cancelled() else future.exception()
        if isinstance(exc, BrokerError):
            failed[slot] = exc
        elif exc is not None:
            raise exc
    first = next(iter(failed.values()), None)
    for slot, future in futures.items():
        if future.cancelled() and first is not None:  # not tried: the first failure says why
            failed[slot] = first
    return dict(sorted(failed.items()))


def fence_slot(ctx: FlowContext, slot: int, timeout_s: float = 10.0) -> None:
    """Fence the producer of ``ctx``'s copy task in ``slot`` (:func:`fence_slots` fences
    several at once); a failure is a transient BrokerError."""
    try:  # the slot's own producer, as its copy task makes it: its init_transactions fences
        producer, _timeout_ms = make_producer(ctx, slot, init_timeout_s=timeout_s)
    except KafkaException as exc:
        raise BrokerError(
            f"fencing {ctx.transactional_id(slot)} on {ctx.where('target')} failed: {exc.args[0]}",
            transient=True,
        ) from exc
    producer.flush(0)


def timed_out_error(
    err: KafkaError, open_s: float, timeout_ms: int, target: str, setting: str
) -> BrokerError | None:
    """The error for a producer fenced after its transaction was open ``open_s`` seconds, past
    its ``transaction.timeout.ms`` (None if it was fenced sooner, or not fenced).

    The broker then aborted the transaction and bumped the producer's epoch, which librdkafka
    reports as fenced by a newer instance. Nothing of the transaction is visible and the ledger
    still holds its start, so this is transient: the query restarts and a new producer copies
    the slice again from the last commit. A producer fenced sooner met another instance of the
    same slot, and that stays terminal. ``open_s`` counts from before the transaction's first
    record, so it is never shorter than the broker's count.
    """
    if err.code() not in _FENCED or open_s * 1000 < timeout_ms:
        return None
    return BrokerError(
        f"the transaction to {target} was open for {open_s:.1f} s, longer than the producer's "
        f"transaction.timeout.ms = {timeout_ms}, so the broker aborted it ({err.str()}); "
        f"nothing of it is visible and the slice is copied again from its last commit (a task "
        f"that holds transactions this long needs a higher {setting})",
        transient=True,
    )


def commit_error(err: KafkaError, failed: list[KafkaError], target: str) -> BrokerError:
    """Why a commit to ``target`` failed. When records of the commit itself failed delivery (an
    outage that began after the data was acknowledged expires them), librdkafka ends the commit
    with an abortable error: it is transient exactly when each of those failures is."""
    text = err.str()
    transient = _passing(err) and not err.fatal()
    if failed and err.txn_requires_abort() and not err.fatal():
        text += f" ({', '.join(sorted({e.name() for e in failed}))})"
        transient = all(_passing(e) for e in failed)
    return BrokerError(f"committing to {target} failed: {text}", transient=transient)


def record_error(err: KafkaError, where: str, target: str) -> Exception:
    """Why producing the record at ``where`` to ``target`` failed."""
    if err.code() in (KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.RECORD_LIST_TOO_LARGE):
        return RecordTooLargeError(
            f"record {where} is larger than {target} accepts ({err.str()}); nothing from this "
            "transaction on was committed: raise the target topic's max.message.bytes and the "
            "producer's message.max.bytes, or, if each record is smaller than max.message.bytes, "
            "lower the producer's batch.size below it (librdkafka does not split a batch the "
            "broker refuses)"
        )
    return BrokerError(
        f"producing {where} to {target} failed: {err.str()}", transient=_passing(err)
    )
