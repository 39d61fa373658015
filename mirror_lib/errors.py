"""The one exception hierarchy of mirror_lib.

Two families: :class:`ConfigError` (bad input, found before anything starts; CLI exit 2) and
:class:`MirrorRuntimeError` (something failed while running; CLI exit code 1). Every error says
whether retrying the same call may succeed (``transient``).
"""

from __future__ import annotations


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


class DecodeError(MirrorRuntimeError):
    """Bytes of an internal record (offset sync, checkpoint, heartbeat, metrics) are undecodable.

    Callers count and skip such records; they never stop a query.
    """


class BrokerError(MirrorRuntimeError):
    """A Kafka cluster could not be reached or refused an operation."""


class UnsupportedOperationError(BrokerError):
    """The broker does not implement an API we need (for example the test broker and ACLs)."""


class DataLossError(MirrorRuntimeError):
    """A source range vanished (retention, truncation, re-created topic): a gap, never a reset."""


class RecordTooLargeError(MirrorRuntimeError):
    """The target refused a record because of its size; names topic, partition and offset."""


class EmbeddedBrokerError(MirrorRuntimeError):
    """An embedded test broker could not be started or stopped."""
