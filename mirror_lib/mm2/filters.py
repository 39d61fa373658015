"""Topic and group filters with MM2's semantics (docs/mm2-reference.md#filter-defaults).

Lists are Kafka ``LIST`` config values (comma-separated, whitespace around items ignored). As in
MM2's DefaultTopicFilter/DefaultGroupFilter the items are joined with ``|`` into one regular
expression that must match the *whole* name, and exclude wins over include. So a comma always
splits, also inside ``{m,n}`` or ``(a, b)``: ``(a, b)-x`` is the pattern ``(a|b)-x``. Java-only
spellings that Python's ``re`` lacks are translated (``\\Q...\\E`` quoting, ``(?<name>...)``
groups, ``\\z``, an inline flag such as ``(?i)`` after the start), and a ``{`` that Java would
refuse is refused.
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


#: An inline flag group without a colon, e.g. ``(?i)`` or ``(?-i)``: in Java it applies up to the
#: end of the enclosing group, including later alternatives; Python allows it only at the start.
_INLINE_FLAGS = re.compile(r"\(\?([a-zA-Z]+(?:-[a-zA-Z]*)?|-[a-zA-Z]+)\)")
#: Java's counted repetition; any other unescaped ``{`` outside a class is a Java syntax error.
_REPETITION = re.compile(r"\{\d+(?:,\d*)?\}")
#: Escapes followed by a ``{...}`` argument (Java ``\p{L}``, ``\x{263A}``, ``\N{name}``).
_BRACED_ESCAPES = "pPxN"


class _Translator:
    """One pass over a Java pattern that writes the Python ``re`` equivalent."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self.out: list[str] = []
        self.i = 0
        self.class_depth = 0  # Java allows nested character classes
        self.flags: list[list[str]] = [[]]  # per open group: inline flags opened in it

    def run(self) -> str:
        while self.i < len(self.pattern):
            if self.pattern[self.i] == "\\" and self.i + 1 < len(self.pattern):
                self._escape()
            elif self.class_depth:
                self._in_class()
            else:
                self._outside_class()
        self.out.append(")" * len(self.flags[0]))
        return "".join(self.out)

    def _escape(self) -> None:
        p, i = self.pattern, self.i
        nxt = p[i + 1]
        if nxt == "Q":
            end = p.find("\\E", i + 2)
            end = len(p) if end < 0 else end
            self.out.append(re.escape(p[i + 2 : end]))
            self.i = end + 2
            return
        if nxt == "z" and not self.class_depth:
            self.out.append("\\Z")
        elif nxt in _BRACED_ESCAPES and p.startswith("{", i + 2) and "}" in p[i + 2 :]:
            end = p.index("}", i + 2)
            self.out.append(p[i : end + 1])  # Python refuses what it lacks (bad escape)
            self.i = end + 1
            return
        else:
            self.out.append(p[i : i + 2])
        self.i = i + 2

    def _open_class(self) -> None:
        p, i = self.pattern, self.i
        self.class_depth += 1
        first = i + 2 if p.startswith("[^", i) else i + 1
        if p.startswith("]", first):  # a ']' first in a class is a literal
            first += 1
        self.out.append(p[i:first])
        self.i = first

    def _in_class(self) -> None:
        ch = self.pattern[self.i]
        if ch == "[" or self.pattern.startswith("&&", self.i):
            # Java's class union ([ab[cd]]) and intersection ([a-z&&[^x]]): Python's re would
            # read them as other classes and match other names without a word
            raise re.error(
                "a class inside a class or '&&' (Java's union and intersection of character "
                "classes): write one flat class, e.g. [a-wyz] for [a-z&&[^x]]",
                self.pattern,
                self.i,
            )
        if ch == "]":
            self.class_depth -= 1
        self.out.append(ch)
        self.i += 1

    def _outside_class(self) -> None:
        p, i = self.pattern, self.i
        ch = p[i]
        flags = _INLINE_FLAGS.match(p, i)
        if ch == "[":
            self._open_class()
            return
        if flags:
            self.out.append(f"(?{flags[1]}:")
            self.flags[-1].append(flags[1])
            self.i = flags.end()
            return
        if ch == "(":
            self.flags.append([])
            named = p.startswith("(?<", i) and i + 3 < len(p) and p[i + 3] not in "=!"
            self.out.append("(?P<" if named else "(")
            self.i += 3 if named else 1
            return
        if ch == ")" and len(self.flags) > 1:
            self.out.append(")" * len(self.flags.pop()) + ")")
        elif ch == "|":
            opened = self.flags[-1]
            self.out.append(")" * len(opened) + "|" + "".join(f"(?{f}:" for f in opened))
        elif ch == "{":
            counted = _REPETITION.match(p, i)
            if counted is None:
                raise re.error(
                    "a '{' that is not a repetition {n}, {n,} or {n,m} (Java refuses it; a "
                    "literal brace is written \\{)",
                    p,
                    i,
                )
            self.out.append(counted[0])
            self.i = counted.end()
            return
        else:
            self.out.append(ch)
        self.i += 1


def java_regex_to_python(pattern: str) -> str:
    """The Python ``re`` form of a Java pattern; raises :class:`re.error` where Java would fail.

    Rewrites ``\\Q...\\E``, ``(?<name>``, ``\\z`` and inline flags after the start (``a|(?i)b``
    becomes ``a|(?i:b)``: scoped, as Java applies them).
    """
    return _Translator(pattern).run()


def compile_patterns(value: ListValue | None, key: str) -> tuple[re.Pattern[str], ...]:
    """MM2's compiled LIST of regexes: one pattern (the items joined with ``|``), or none for an
    empty list (matches nothing). One that does not compile is a ConfigError naming ``key``."""
    items = parse_list(value)
    if not items:
        return ()
    joined = "|".join(items)
    try:
        # ASCII: Java's \w, \d, \s and (?i) match ASCII only unless (?U) says otherwise
        return (re.compile(java_regex_to_python(joined), re.ASCII),)
    except re.error as exc:
        shown = value if isinstance(value, str) else ", ".join(items)
        expected = (
            "a comma-separated list of regular expressions that form one valid pattern when "
            "MM2 splits the list at every comma (also one inside {m,n} or (...)) and joins the "
            f"items with '|': {joined!r} does not compile ({exc.msg})"
        )
        raise ConfigError(key, shown, expected) from exc


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
        inc = self.include[0].pattern if self.include else None
        exc = self.exclude[0].pattern if self.exclude else None
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
        """True if ``topic`` fully matches the include pattern and not the exclude pattern."""
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
        """True if ``group`` fully matches the include pattern and not the exclude pattern."""
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
    """MirrorSourceConnector.shouldReplicateTopic for a topic on the source of a flow
    (docs/mm2-reference.md#which-topics-a-flow-replicates).

    (filter accepts it, or heartbeats replication is on and it is a heartbeats topic) and it is
    not internal and it is not a cycle back to ``target_alias``.
    """
    wanted = topic_filter.should_replicate_topic(topic) or (
        heartbeats_replication_enabled and policy.is_heartbeats_topic(topic)
    )
    return (
        wanted and not policy.is_internal_topic(topic) and not is_cycle(policy, topic, target_alias)
    )
