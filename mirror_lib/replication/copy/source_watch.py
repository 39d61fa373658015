"""Whether a copy task's source still answers and its slice still moves: :class:`SourceWatch`.

librdkafka only retries a source that stopped answering, which would hide an outage from the
run, and a bounded slice (``--once``, a rewind) that reads nothing for minutes would hold its
partitions without saying why. The watch turns both into transient errors that say where each
target and the reader were, so the run reports the outage and retries.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from mirror_lib.errors import BrokerError
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.source_reader import Reader, Record

STALL_SECONDS = 60.0  # a bounded slice that read nothing this long fails (transient)
SILENCE_PROBE_S = 10.0  # no word from the source this long: ask it for metadata, every 5 s
SOURCE_DOWN_S = 30.0  # no answer this long: the slice fails (transient) so the run reports it


class SourceWatch:
    """What a copy task last heard from its source, and when its slice last moved."""

    def __init__(self, ctx: FlowContext, until: dict[TP, int]) -> None:
        self.ctx, self.until = ctx, until
        self.last_heard = self.next_probe = self.last_progress = time.monotonic()

    def moved(self) -> None:
        """The readers returned records."""
        self.last_progress = time.monotonic()

    def check_stalled(self, readers: Sequence[Reader]) -> None:
        """Fail a bounded slice (transient) that read nothing for STALL_SECONDS."""
        if self.until and time.monotonic() - self.last_progress > STALL_SECONDS:
            raise self.stall_error(readers)

    def check_source(self, readers: Sequence[Reader], heard: Sequence[Record]) -> None:
        """Fail the slice (transient) when the source has not answered for SOURCE_DOWN_S
        (``heard``: some of what the readers returned this time).

        An idle source sends nothing, so after SILENCE_PROBE_S of silence the task asks it for
        metadata.
        """
        now = time.monotonic()
        if any((e := m.error()) is None or e.code() == KafkaError._PARTITION_EOF for m in heard):
            self.last_heard = now
            return
        if now - self.last_heard < SILENCE_PROBE_S or now < self.next_probe:
            return
        self.next_probe = now + 5.0
        try:
            readers[0].consumer.list_topics(timeout=5)
            self.last_heard = time.monotonic()
        except KafkaException as exc:
            silent = time.monotonic() - self.last_heard
            if silent > SOURCE_DOWN_S:
                raise BrokerError(
                    f"{self.ctx.where('source')} did not answer for {silent:.0f}s "
                    f"({exc.args[0].str()}); nothing was lost, the run retries",
                    transient=True,
                ) from exc

    def stall_error(self, readers: Sequence[Reader]) -> BrokerError:
        """The error of a slice that read nothing for STALL_SECONDS: per open partition, where
        each target continues and where the slice ends, where the reader's consumer is and
        whether the target's commit waits for acknowledgements; what an on-call engineer needs
        to tell a silent source from a reader gone past a target's records."""
        where = []
        for reader in readers:
            wanted = reader.positions()
            at: dict[TP, int] = {}
            with contextlib.suppress(KafkaException):
                asked = [TopicPartition(t, p) for t, p in sorted(wanted)]
                at = {(tp.topic, tp.partition): tp.offset for tp in reader.consumer.position(asked)}
            for w in reader.writers:
                pending = "; its commit waits for acknowledgements" if w.strategy.holding else ""
                for (t, p), expect in sorted(w.open_positions().items()):
                    read = at.get((t, p))
                    where.append(
                        f"{t}[{p}] for {w.name} at offset {expect} of {self.until.get((t, p))} "
                        f"(the reader at {'?' if read is None or read < 0 else read}{pending})"
                    )
        return BrokerError(
            f"no data from {self.ctx.where('source')} for {STALL_SECONDS:.0f}s while copying "
            + ("; ".join(where) or "nothing left open"),
            transient=True,
        )
