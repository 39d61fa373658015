"""How a setting's string becomes a value: the parsers of :class:`Setting` and the class itself.

Each parser takes ``(key, raw)`` and returns the value or raises a :class:`ConfigError` that
names the key, the value and what would be valid.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mirror_lib.errors import ConfigError
from mirror_lib.mm2.filters import compile_patterns, parse_list


def split_list(text: str) -> tuple[str, ...]:
    """MM2's comma-separated list: items trimmed, empty items (e.g. a trailing comma) dropped."""
    return parse_list(text)


def boolean(key: str, raw: str) -> bool:
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ConfigError(key, raw, "true or false")
    return value == "true"


def int_at_least(minimum: int) -> Callable[[str, str], int]:
    return _whole_number(minimum, None, f"a whole number >= {minimum}")


def int_between(minimum: int, maximum: int) -> Callable[[str, str], int]:
    return _whole_number(minimum, maximum, f"a whole number from {minimum} to {maximum}")


def _whole_number(minimum: int, maximum: int | None, valid: str) -> Callable[[str, str], int]:
    def parse(key: str, raw: str) -> int:
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(key, raw, valid) from None
        if value < minimum or (maximum is not None and value > maximum):
            raise ConfigError(key, raw, valid)
        return value

    return parse


def replication_factor(key: str, raw: str) -> int:
    value = int_at_least(-1)(key, raw)
    if value == 0:
        raise ConfigError(key, raw, "a replication factor >= 1, or -1 for the broker default")
    return value


def seconds(key: str, raw: str) -> float:
    try:
        value = float(raw.strip())
    except ValueError:
        raise ConfigError(key, raw, "a positive number of seconds") from None
    if not value > 0:
        raise ConfigError(
            key, raw, "a positive number of seconds (to turn the feature off use its .enabled key)"
        )
    return value


def choice(*choices: str) -> Callable[[str, str], str]:
    def parse(key: str, raw: str) -> str:
        value = raw.strip().lower()
        if value not in choices:
            raise ConfigError(key, raw, "one of " + ", ".join(choices))
        return value

    return parse


def regex_list(key: str, raw: str) -> tuple[str, ...]:
    """The items of a LIST of regexes, checked as MM2 compiles them: joined with ``|``."""
    compile_patterns(raw, key)  # the filters' own compilation, so both accept the same values
    return split_list(raw)


def text(key: str, raw: str) -> str:
    return raw.strip()


def principal(key: str, raw: str) -> str:
    """A Kafka principal ``Type:name`` (e.g. ``User:CN=mirror,OU=data``), or empty."""
    value = raw.strip()
    kind, sep, name = value.partition(":")
    if value and (not sep or not kind or not name.strip() or name.strip() == "*"):
        raise ConfigError(
            key,
            raw,
            "a Kafka principal as Type:name (e.g. User:CN=mirror,OU=data), not a "
            "wildcard; or empty",
        )
    return value


def nonempty(key: str, raw: str) -> str:
    if not raw:
        raise ConfigError(
            key,
            raw,
            "a non-empty string (empty only with replication.policy.class = "
            "IdentityReplicationPolicy, or together with an empty source.cluster.alias: the "
            "pre-3.0 idiom for keeping topic names)",
        )
    return raw


@dataclass(frozen=True)
class Setting:
    """One known key: its attribute name (on :class:`~mirror_lib.config.settings.FlowSettings`
    or the global keys), default and parser."""

    key: str
    attr: str
    default: str
    parse: Callable[[str, str], Any]
    doc: str
    aliases: tuple[str, ...] = ()


_DAY_MS = 24 * 3600 * 1000


def metrics_retention(key: str, raw: str) -> int:
    """``retention.ms`` of the metrics topic: at least a day (the checkpoint job and
    ``mirror verify`` read the topic back), or -1 for unlimited."""
    value = int_at_least(-1)(key, raw)
    if value != -1 and value < _DAY_MS:
        raise ConfigError(key, raw, f"milliseconds >= {_DAY_MS} (a day), or -1 for unlimited")
    return value
