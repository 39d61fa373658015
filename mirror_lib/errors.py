"""The one exception hierarchy of mirror_lib.

Two families: :class:`ConfigError` (bad input, found before anything starts; CLI exit 2) and
:class:`MirrorRuntimeError` (something failed while running; CLI exit code 1). Every error says
whether retrying the same call may succeed (``transient``). A transient error carries the note
:data:`TRANSIENT_NOTE`, so that the runner can tell it from a terminal one in the text of a failed
Spark query (Python tracebacks print notes): see :func:`is_transient_text`.
"""

from __future__ import annotations

import re
import sys

#: Printed under the message of every transient error in a traceback.
TRANSIENT_NOTE = "mirror_lib: transient (retrying may succeed)"
#: librdkafka / Kafka error codes that mean "try again" in a text without our own error.
_TRANSIENT_CODES = re.compile(
    r"\b(_TRANSPORT|_ALL_BROKERS_DOWN|_TIMED_OUT|_MSG_TIMED_OUT|_RESOLVE|_WAIT_COORD|"
    r"REQUEST_TIMED_OUT|NOT_LEADER_FOR_PARTITION|NOT_LEADER_OR_FOLLOWER|LEADER_NOT_AVAILABLE|"
    r"COORDINATOR_LOAD_IN_PROGRESS|COORDINATOR_NOT_AVAILABLE|NOT_COORDINATOR|"
    r"NETWORK_EXCEPTION|BROKER_NOT_AVAILABLE|REPLICA_NOT_AVAILABLE|NOT_ENOUGH_REPLICAS\w*|"
    r"CONCURRENT_TRANSACTIONS|UNKNOWN_TOPIC_OR_PART|OFFSET_NOT_AVAILABLE|FENCED_LEADER_EPOCH|"
    r"UNKNOWN_LEADER_EPOCH|_DESTROY_BROKER)\b"
    # Spark could not start a Python worker in time (a busy machine), or lost one while another
    # task of the run was interrupted: a restarted query gets fresh workers.
    r"|Python worker failed to connect back|SocketTimeoutException"
    r"|Python worker exited unexpectedly"
)


class MirrorError(Exception):
    """Base of every error raised by mirror_lib."""

    transient: bool = False
    exit_code: int = 1


class ConfigError(MirrorError, ValueError):
    """Invalid configuration or arguments: names the field, the bad value and the valid form."""

    exit_code = 2

    def __init__(self, key: str, value: object, expected: str, where: str | None = None) -> None:
        self.key = key
        self.value = value
        self.expected = expected
        self.where = where
        shown = "<missing>" if value is None else repr(value)
        text = f"{key} = {shown}: expected {expected}"
        if where:
            text += f" (looked in {where})"
        super().__init__(text)


class MirrorRuntimeError(MirrorError, RuntimeError):
    """A failure while running; the message says what failed and what was kept."""

    exit_code = 1

    def __init__(self, message: str, *, transient: bool | None = None) -> None:
        super().__init__(message)
        if transient is not None:
            self.transient = transient
        if self.transient and sys.version_info >= (3, 11):
            self.add_note(TRANSIENT_NOTE)
        elif self.transient:  # no notes before Python 3.11: the message carries it
            self.args = (f"{message}\n{TRANSIENT_NOTE}",)


class DecodeError(MirrorRuntimeError):
    """Bytes of an internal record (offset sync, checkpoint, heartbeat, metrics) are undecodable.

    Callers count and skip such records; they never stop a query.
    """


class BrokerError(MirrorRuntimeError):
    """A Kafka cluster could not be reached or refused an operation."""


class HungCallError(BrokerError):
    """A client call did not return within its deadline and its client is given up (librdkafka
    can hang inside a transactional call: :mod:`mirror_lib.kafka.bounded`). Transient.
    ``cause_named``: the message names why (a broker that left the cluster), so whoever tells
    it need not look for a cause again."""

    transient = True

    def __init__(self, message: str, *, cause_named: bool = False) -> None:
        super().__init__(message)
        self.cause_named = cause_named


class UnsupportedOperationError(BrokerError):
    """The broker does not implement an API we need (for example the test broker and ACLs)."""


class DataLossError(MirrorRuntimeError):
    """A source range vanished (retention, truncation, re-created topic): a gap, never a reset."""


class RemoteTopicError(MirrorRuntimeError):
    """The target refused to create a remote topic or to grow it to the source's partition
    count, so some source partitions have no partition of the same number to be copied to."""


class RecordTooLargeError(MirrorRuntimeError):
    """The target refused a record because of its size; names topic, partition and offset."""


class EmbeddedBrokerError(MirrorRuntimeError):
    """An embedded test broker could not be started or stopped."""


def is_transient_text(text: str) -> bool:
    """Whether the text of a failure (e.g. a failed query's exception) is worth retrying.

    Our own errors decide (the last mirror_lib error in the text, with or without
    :data:`TRANSIENT_NOTE`); without one, known retriable Kafka error codes do. Anything else
    (auth, authorization, a record too large, a gap, a bug) is terminal.
    """
    ours = list(re.finditer(r"mirror_lib\.errors\.(\w+):", text))
    if ours:
        return TRANSIENT_NOTE in text[ours[-1].start() :]
    return bool(_TRANSIENT_CODES.search(text))
