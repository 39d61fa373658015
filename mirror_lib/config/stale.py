"""Stale-data policy: records too old to matter are not copied, and every skip is accounted for.

Opt-in per flow (``mirror.skip.older.than.ms``, limited to the topics of ``mirror.skip.topics``):
a record whose timestamp is older than ``now - older_than_ms`` when the copier reaches it is not
copied. Optional caps (``mirror.skip.max.records`` / ``mirror.skip.max.bytes``) bound what one
*outage* may discard per partition: an outage starts with the first skipped record and ends when
a fresh record (one the policy would copy anyway) is copied; past a cap, stale records are copied
again until then (a bounded discard). Records without a timestamp, or with one in the future,
are always copied. LogAppendTime is used like CreateTime: it is never earlier than CreateTime,
so a record stale by its append time is at least as stale by its creation time.

Pure logic, no Kafka calls: :class:`SkipPolicy` decides per record, :class:`PartitionSkips`
keeps one partition's outage budget and the skipped ranges of the open transaction, which the
copier turns into ``skip`` events (:func:`skip_event_fields`) in the same transaction that moves
the ledger past them. A skipped range is a gap for offset translation: no segment covers it.
:func:`keep` / :func:`resume` carry a partition's outage budget from one slice to the next in
the same worker process.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from mirror_lib.config.settings import FlowSettings
from mirror_lib.errors import ConfigError
from mirror_lib.mm2.filters import compile_patterns

#: Reasons written into skip events.
STALE = "stale"

OLDER_THAN_KEY = "mirror.skip.older.than.ms"
MAX_RECORDS_KEY = "mirror.skip.max.records"
MAX_BYTES_KEY = "mirror.skip.max.bytes"
TOPICS_KEY = "mirror.skip.topics"
ON_GAP_KEY = "mirror.on.gap"


def check_settings(flow: str, settings: FlowSettings, origin: str | None = None) -> None:
    """Refuse skip settings that cannot mean what they say (an enabled flow's settings).

    A cap without ``mirror.skip.older.than.ms`` would be ignored, and skipping on purpose
    contradicts ``mirror.on.gap = fail``, which promises that the flow stops rather than leave
    any source range out of the target.
    """
    older = settings.skip_older_than_ms
    if older == 0:
        for key, value in (
            (MAX_RECORDS_KEY, settings.skip_max_records),
            (MAX_BYTES_KEY, settings.skip_max_bytes),
        ):
            if value:
                raise ConfigError(
                    f"{flow}.{key}",
                    str(value),
                    f"0 (no cap) while {OLDER_THAN_KEY} is 0 (off): a cap only bounds what the "
                    f"stale-data policy skips; set {OLDER_THAN_KEY} too",
                    origin,
                )
        return
    if settings.on_gap == "fail":
        default = "" if ON_GAP_KEY in settings.explicit else " (the default)"
        raise ConfigError(
            f"{flow}.{OLDER_THAN_KEY}",
            str(older),
            f"0 (off) while {ON_GAP_KEY} = fail{default}, which promises that the flow "
            "fails rather than leave any source range out of the target; skipping stale records "
            f"leaves ranges out on purpose. Set {flow}.{ON_GAP_KEY} = skip together with "
            f"{OLDER_THAN_KEY} > 0, or keep {OLDER_THAN_KEY} = 0",
            origin,
        )


@dataclass(frozen=True)
class SkipPolicy:
    """The flow's stale-data policy; ``older_than_ms == 0`` means off."""

    older_than_ms: int = 0
    max_records: int = 0  # 0: no cap
    max_bytes: int = 0  # 0: no cap
    topics: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def from_settings(cls, settings: FlowSettings) -> SkipPolicy:
        """The policy of a flow's :class:`~mirror_lib.config.settings.FlowSettings`."""
        return cls(
            settings.skip_older_than_ms,
            settings.skip_max_records,
            settings.skip_max_bytes,
            compile_patterns(settings.skip_topics, TOPICS_KEY),
        )

    @property
    def enabled(self) -> bool:
        return self.older_than_ms > 0

    def applies_to(self, topic: str) -> bool:
        """True when the policy is on and ``topic`` matches ``mirror.skip.topics``."""
        return self.enabled and any(p.fullmatch(topic) for p in self.topics)

    def is_stale(self, timestamp_ms: int, now_ms: float) -> bool:
        """Older than the threshold at ``now_ms``; no timestamp (<= 0) is never stale."""
        return timestamp_ms > 0 and timestamp_ms < now_ms - self.older_than_ms


@dataclass
class SkippedRange:
    """Skipped records of one partition inside one transaction with no copied record between
    them: ``records`` may be fewer than ``last - first + 1`` (transaction markers, aborted
    records and compacted offsets in between are not records)."""

    first: int
    last: int
    records: int
    bytes: int
    oldest_ts: int
    newest_ts: int

    def add(self, offset: int, size: int, ts: int) -> None:
        self.last = offset
        self.records += 1
        self.bytes += size
        self.oldest_ts = min(self.oldest_ts, ts)
        self.newest_ts = max(self.newest_ts, ts)


@dataclass
class PartitionSkips:
    """One partition's outage budget and the skipped ranges of the open transaction.

    ``outage_records``/``outage_bytes`` count what the current outage skipped; ``capped`` is
    set once a cap is reached and stays until a fresh record is copied (the outage ends).
    :meth:`commit` and :meth:`abort` follow the copier's transaction.
    """

    policy: SkipPolicy
    outage_records: int = 0
    outage_bytes: int = 0
    capped: bool = False
    pending: list[SkippedRange] = field(default_factory=list)
    _open: bool = False  # the last record decided was skipped: the next skip extends its range
    _saved: tuple[int, int, bool] = (0, 0, False)

    def decide(self, offset: int, timestamp_ms: int, size: int, now_ms: float) -> bool:
        """True: skip the record at ``offset`` (and account for it); False: copy it."""
        if not self.policy.is_stale(timestamp_ms, now_ms):
            self.outage_records = self.outage_bytes = 0  # a fresh record ends the outage
            self.capped = self._open = False
            return False
        p = self.policy
        if self.capped or (
            (p.max_records and self.outage_records + 1 > p.max_records)
            or (p.max_bytes and self.outage_bytes + size > p.max_bytes)
        ):
            self.capped = True
            self._open = False
            return False
        self.outage_records += 1
        self.outage_bytes += size
        if self._open and self.pending:  # offsets in between (markers, aborted records) are
            self.pending[-1].add(offset, size, timestamp_ms)  # never copied either
        else:
            self.pending.append(SkippedRange(offset, offset, 1, size, timestamp_ms, timestamp_ms))
        self._open = True
        return True

    def commit(self) -> list[SkippedRange]:
        """The transaction committed: its skipped ranges (now final), and a new savepoint."""
        done, self.pending = self.pending, []
        self._open = False
        self._saved = (self.outage_records, self.outage_bytes, self.capped)
        return done

    def abort(self) -> None:
        """The transaction was aborted: its records will be read again, so forget its skips."""
        self.pending = []
        self._open = False
        self.outage_records, self.outage_bytes, self.capped = self._saved


#: (flow key, topic, partition) -> (ledger position, outage budget) a copy task left behind, so
#: the next slice in the same worker process goes on with the same outage (see :func:`resume`).
_CARRIED: dict[tuple[str, str, int], tuple[int, tuple[int, int, bool]]] = {}


def keep(flow: str, topic: str, partition: int, position: int, skips: PartitionSkips) -> None:
    """Remember the committed budget of a partition whose ledger stands at ``position``."""
    _CARRIED[(flow, topic, partition)] = (position, skips._saved)


def resume(
    flow: str, topic: str, partition: int, position: int, policy: SkipPolicy
) -> PartitionSkips:
    """The partition's budget for a task starting at ledger ``position``: the one an earlier task
    of this process left at exactly that position, else a fresh one (a new outage count)."""
    skips = PartitionSkips(policy)
    carried = _CARRIED.get((flow, topic, partition))
    if carried is not None and carried[0] == position:
        skips.outage_records, skips.outage_bytes, skips.capped = carried[1]
        skips._saved = carried[1]
    return skips


def record_size(msg: Any) -> int:
    """Key + value bytes (what ``mirror.commit.max.bytes`` and the batch metrics count)."""
    key, value = msg.key(), msg.value()
    return (len(key) if key else 0) + (len(value) if value else 0)


def split_stale(
    skips: PartitionSkips, msgs: Iterable[Any], now_ms: float
) -> tuple[list[Any], int | None]:
    """(records to copy, offset after the last skipped record or None) of one consume batch."""
    keep: list[Any] = []
    skipped_end: int | None = None
    for msg in msgs:
        if skips.decide(msg.offset(), msg.timestamp()[1], record_size(msg), now_ms):
            skipped_end = msg.offset() + 1
        else:
            keep.append(msg)
    return keep, skipped_end


class TargetSkips:
    """A copy task's stale-data budgets for one target: one :class:`PartitionSkips` a partition
    the policy covers, resumed from and kept for the next slice of the same worker process
    under ``key`` (the flow's options and name)."""

    def __init__(self, key: str, policy: SkipPolicy) -> None:
        self.key, self.policy = key, policy
        self.by_tp: dict[tuple[str, int], PartitionSkips] = {}

    def split(
        self, tp: tuple[str, int], committed: int, msgs: list[Any], now_ms: float
    ) -> tuple[list[Any], int | None]:
        """:func:`split_stale` for a partition whose ledger stands at ``committed``; all of
        ``msgs`` to copy where the policy does not cover the topic."""
        if not msgs or not self.policy.applies_to(tp[0]):
            return msgs, None
        if tp not in self.by_tp:  # the budget an earlier slice of this process left
            self.by_tp[tp] = resume(self.key, *tp, committed, self.policy)
        return split_stale(self.by_tp[tp], msgs, now_ms)

    def commit(self) -> None:
        """The transaction committed: its skipped ranges are final."""
        for skips in self.by_tp.values():
            skips.commit()

    def abort(self) -> None:
        """The transaction was aborted: forget its skips."""
        for skips in self.by_tp.values():
            skips.abort()

    def keep(self, committed: dict[tuple[str, int], int]) -> None:
        """At the slice's end: keep the budget of each partition at its committed position."""
        for tp, skips in self.by_tp.items():
            if tp in committed:
                keep(self.key, *tp, committed[tp], skips)


def skip_event_fields(rng: SkippedRange, policy: SkipPolicy) -> dict[str, Any]:
    """The fields of a ``skip`` event (besides flow, topic, remote topic and partition)."""
    return {
        "first_offset": rng.first,
        "last_offset": rng.last,
        "records": rng.records,
        "bytes": rng.bytes,
        "oldest_ts_ms": rng.oldest_ts,
        "newest_ts_ms": rng.newest_ts,
        "reason": STALE,
        "action": "skip",
        "older_than_ms": policy.older_than_ms,
    }
