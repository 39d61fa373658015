"""Topic and group filters with MM2's semantics (mm2.md §3.3, §6.3, §6.4).

Lists are Kafka ``LIST`` config values (comma-separated, whitespace around items ignored). Each
item is a regular expression that must match the *whole* name, and exclude wins over include.
Java-only regex spellings that Python's ``re`` lacks are translated: ``\\Q...\\E`` quoting,
``(?<name>...)`` named groups and ``\\z``. Kafka joins the items with ``|`` into one pattern; here
each item is compiled on its own, which matches the same names except that an inline flag such as
``(?i)`` applies only to its own item (in Java it also applies to the items after it).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Protocol

from mirror_lib.errors import ConfigError
from mirror_lib.mm2.policy import ReplicationPolicy, is_cycle

TOPICS_KEY = "topics"
TOPICS_EXCLUDE_KEY = "topics.exclude"
GROUPS_KEY = "groups"
GROUPS_EXCLUDE_KEY = "groups.exclude"

DEFAULT_TOPICS = ".*"
#: Kafka 4.0+ default (KIP-1074): only MM2's own ``mm2*.internal`` topics are excluded by name.
DEFAULT_TOPICS_EXCLUDE = r"mm2.*\.internal, .*\.replica, __.*"
#: Kafka 3.x default, for reference: also excluded user topics ending in .internal/-internal.
DEFAULT_TOPICS_EXCLUDE_3X = r".*[\-\.]internal, .*\.replica, __.*"
DEFAULT_GROUPS = ".*"
DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"

ListValue = str | Iterable[str]


def parse_list(value: ListValue | None) -> tuple[str, ...]:
    """Parse a Kafka LIST value: ``"a, b ,c"`` -> ``("a", "b", "c")``; empty items are dropped.

    An already-split iterable is accepted too; its items are trimmed the same way.
    """
    if value is None:
        return ()
    items = value.split(",") if isinstance(value, str) else value
    return tuple(s for s in (item.strip() for item in items) if s)


def java_regex_to_python(pattern: str) -> str:
    """Rewrite ``\\Q...\\E``, ``(?<name>`` and ``\\z`` (Java) into Python ``re`` syntax."""
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        if pattern[i] == "\\" and i + 1 < n:
            if pattern[i + 1] == "Q":
                end = pattern.find("\\E", i + 2)
                end = n if end < 0 else end
                out.append(re.escape(pattern[i + 2 : end]))
                i = end + 2
                continue
            out.append("\\Z" if pattern[i + 1] == "z" else pattern[i : i + 2])
            i += 2
        elif pattern.startswith("(?<", i) and i + 3 < n and pattern[i + 3] not in "=!":
            out.append("(?P<")
            i += 3
        else:
            out.append(pattern[i])
            i += 1
    return "".join(out)


def compile_patterns(value: ListValue | None, key: str) -> tuple[re.Pattern[str], ...]:
    """Compile every item of a LIST of regexes; an invalid one raises ConfigError naming ``key``."""
    compiled = []
    for item in parse_list(value):
        try:
            compiled.append(re.compile(java_regex_to_python(item)))
        except re.error as exc:
            expected = f"a comma-separated list of valid regular expressions ({exc})"
            raise ConfigError(key, item, expected) from exc
    return tuple(compiled)


def _matches(patterns: tuple[re.Pattern[str], ...], name: str) -> bool:
    return any(p.fullmatch(name) for p in patterns)


class _IncludeExcludeFilter:
    """Include/exclude lists of full-match regexes; an empty include list matches nothing."""

    def __init__(
        self,
        include: ListValue | None,
        exclude: ListValue | None,
        include_key: str,
        exclude_key: str,
    ) -> None:
        self.include = compile_patterns(include, include_key)
        self.exclude = compile_patterns(exclude, exclude_key)

    def _accepts(self, name: str) -> bool:
        return _matches(self.include, name) and not _matches(self.exclude, name)

    def __repr__(self) -> str:
        inc = [p.pattern for p in self.include]
        exc = [p.pattern for p in self.exclude]
        return f"{type(self).__name__}(include={inc!r}, exclude={exc!r})"


class TopicFilter(_IncludeExcludeFilter):
    """DefaultTopicFilter: ``topics`` minus ``topics.exclude`` (None means the Kafka default)."""

    def __init__(
        self,
        include: ListValue | None = None,
        exclude: ListValue | None = None,
        *,
        include_key: str = TOPICS_KEY,
        exclude_key: str = TOPICS_EXCLUDE_KEY,
    ) -> None:
        super().__init__(
            DEFAULT_TOPICS if include is None else include,
            DEFAULT_TOPICS_EXCLUDE if exclude is None else exclude,
            include_key,
            exclude_key,
        )

    def should_replicate_topic(self, topic: str) -> bool:
        """True if ``topic`` fully matches an include pattern and no exclude pattern."""
        return self._accepts(topic)


class GroupFilter(_IncludeExcludeFilter):
    """DefaultGroupFilter: ``groups`` minus ``groups.exclude`` (None means the Kafka default)."""

    def __init__(
        self,
        include: ListValue | None = None,
        exclude: ListValue | None = None,
        *,
        include_key: str = GROUPS_KEY,
        exclude_key: str = GROUPS_EXCLUDE_KEY,
    ) -> None:
        super().__init__(
            DEFAULT_GROUPS if include is None else include,
            DEFAULT_GROUPS_EXCLUDE if exclude is None else exclude,
            include_key,
            exclude_key,
        )

    def should_replicate_group(self, group: str) -> bool:
        """True if ``group`` fully matches an include pattern and no exclude pattern."""
        return self._accepts(group)


class TopicFilterLike(Protocol):
    """Anything with ``should_replicate_topic(topic) -> bool`` (a custom topic filter)."""

    def should_replicate_topic(self, topic: str) -> bool: ...


def should_replicate_topic(
    policy: ReplicationPolicy,
    topic_filter: TopicFilterLike,
    topic: str,
    target_alias: str,
    heartbeats_replication_enabled: bool = True,
) -> bool:
    """MirrorSourceConnector.shouldReplicateTopic for a topic on the source of a flow (§3.3).

    (filter accepts it, or heartbeats replication is on and it is a heartbeats topic) and it is
    not internal and it is not a cycle back to ``target_alias``.
    """
    wanted = topic_filter.should_replicate_topic(topic) or (
        heartbeats_replication_enabled and policy.is_heartbeats_topic(topic)
    )
    return (
        wanted and not policy.is_internal_topic(topic) and not is_cycle(policy, topic, target_alias)
    )
