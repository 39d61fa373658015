"""Replication policies with MirrorMaker 2's exact naming semantics
(docs/mm2-reference.md#replication-policies).

Internal-topic rules follow **Kafka 4.x (KAFKA-17200 / KIP-1074)**: MM2-internal means "starts
with ``mm2`` and ends with ``<isep>internal``" or a checkpoints topic; other internal topics start
with ``__`` or ``.``. Kafka 3.x treated every topic ending in ``.internal`` or ``-internal`` as
internal, so user topics like ``foo.internal`` (or Streams ``...-internal`` topics) were never
replicated; under 4.x they are, unless ``topics.exclude`` excludes them.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable

from mirror_lib.errors import ConfigError

POLICY_CLASS_KEY = "replication.policy.class"
SEPARATOR_KEY = "replication.policy.separator"
INTERNAL_SEPARATOR_ENABLED_KEY = "replication.policy.internal.topic.separator.enabled"
DEFAULT_SEPARATOR = "."
HEARTBEATS_TOPIC = "heartbeats"
_JAVA_PACKAGE = "org.apache.kafka.connect.mirror."


def java_split(text: str, separator: str) -> list[str]:
    """Java ``Pattern.compile(Pattern.quote(sep)).split(text)``: trailing empty strings dropped.

    No match gives ``[text]`` (so ``"" -> [""]``); ``"A." -> ["A"]``, ``".x" -> ["", "x"]``,
    ``"A..x" -> ["A", "", "x"]``, ``".." -> []``. An empty separator matches between every two
    characters, as Java's empty pattern does: ``"Ahb" -> ["A", "h", "b"]``.
    """
    if separator == "":
        return list(text) or [""]
    if separator not in text:
        return [text]
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


class ReplicationPolicy(ABC):
    """Maps topic names between clusters (Java ``ReplicationPolicy``, Kafka 4.x defaults)."""

    separator: str = DEFAULT_SEPARATOR
    #: Remote topics keep their names, so cycles cannot be detected (identity naming).
    keeps_names: bool = False
    #: An empty separator is allowed: identity naming uses it only for what it still prefixes.
    allows_empty_separator: bool = False

    @abstractmethod
    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """Name on the target of ``topic`` replicated from cluster ``source_alias``."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """Alias of the cluster ``topic`` was replicated from, or None if it is not remote."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """Name of ``topic`` one hop upstream, or None if it is not remote."""

    def original_topic(self, topic: str) -> str:
        """Follow ``upstream_topic`` until it returns None or the same name."""
        while True:
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return topic
            topic = upstream

    def heartbeats_topic(self) -> str:
        """Name of the heartbeats topic (never affected by the separator)."""
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """Offset-syncs topic naming ``cluster_alias`` (the cluster it is *not* on)."""
        return f"mm2-offset-syncs.{cluster_alias}.internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """Checkpoints topic for source ``cluster_alias``."""
        return f"{cluster_alias}.checkpoints.internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        """True for ``heartbeats`` and any remote copy of it (``A.heartbeats``, ...)."""
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_checkpoints_topic(self, topic: str) -> bool:
        """True if ``topic`` is a checkpoints topic."""
        return topic.endswith(".checkpoints.internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """4.x rule: (starts with ``mm2`` and ends with ``.internal``) or a checkpoints topic."""
        mm2 = topic.startswith("mm2") and topic.endswith(".internal")
        return mm2 or self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        """4.x rule: MM2-internal, or starts with ``__`` or ``.`` (never replicated)."""
        return self.is_mm2_internal_topic(topic) or topic.startswith(("__", "."))


class DefaultReplicationPolicy(ReplicationPolicy):
    """Prefixes the source alias: ``A`` + sep + ``topic`` (Java ``DefaultReplicationPolicy``).

    The internal separator ``isep`` is ``separator`` only if the separator key was configured and
    ``replication.policy.internal.topic.separator.enabled`` is true, else ``.`` (Java reads the
    flag only when the separator key is present). A separator other than ``.`` can only come from
    configuration, so it counts as configured even when ``separator_configured`` is False.
    """

    def __init__(
        self,
        separator: str = DEFAULT_SEPARATOR,
        internal_separator_enabled: bool = True,
        separator_configured: bool = False,
    ) -> None:
        if not isinstance(separator, str) or (separator == "" and not self.allows_empty_separator):
            raise ConfigError(SEPARATOR_KEY, separator, "a non-empty string")
        self.separator = separator
        configured = separator_configured or separator != DEFAULT_SEPARATOR
        use_sep = configured and internal_separator_enabled
        self.internal_separator = isep = separator if use_sep else DEFAULT_SEPARATOR
        self._internal_suffix = isep + "internal"
        self._checkpoints_suffix = isep + "checkpoints" + self._internal_suffix

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.separator!r}, isep={self.internal_separator!r})"

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """``source_alias`` + sep + ``topic``, applied even if ``topic`` is already remote."""
        return source_alias + self.separator + topic

    def topic_source(self, topic: str) -> str | None:
        """First piece of a Java-style split on the literal separator; None if < 2 pieces."""
        parts = java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        """``topic`` without its ``<source><sep>`` prefix; None if not remote."""
        source = self.topic_source(topic)
        if source is None:
            return None
        return topic[len(source) + len(self.separator) :]

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """``mm2-offset-syncs`` + isep + alias + isep + ``internal``."""
        return "mm2-offset-syncs" + self.internal_separator + cluster_alias + self._internal_suffix

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """alias + isep + ``checkpoints`` + isep + ``internal``."""
        return cluster_alias + self._checkpoints_suffix

    def is_checkpoints_topic(self, topic: str) -> bool:
        """Ends with isep + ``checkpoints`` + isep + ``internal``."""
        return topic.endswith(self._checkpoints_suffix)

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """4.x: (starts with ``mm2`` and ends with isep + ``internal``) or a checkpoints topic.

        Kafka 3.x used "ends with isep + ``internal``" alone, so ``foo.internal`` was internal.
        """
        mm2 = topic.startswith("mm2") and topic.endswith(self._internal_suffix)
        return mm2 or self.is_checkpoints_topic(topic)


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Keeps topic names unchanged (Java ``IdentityReplicationPolicy``); cannot detect cycles.

    Topics that *look like* heartbeats (plain suffix match on ``heartbeats``) are handled exactly
    like :class:`DefaultReplicationPolicy`. Every other topic is its own remote name, its source
    is ``source_cluster_alias`` (None if not configured), and it is its own upstream topic.
    """

    keeps_names = True
    allows_empty_separator = True  # MM2 runs it: ``A`` + ``heartbeats``, ``Acheckpointsinternal``

    def __init__(
        self,
        source_cluster_alias: str | None = None,
        separator: str = DEFAULT_SEPARATOR,
        internal_separator_enabled: bool = True,
        separator_configured: bool = False,
    ) -> None:
        super().__init__(separator, internal_separator_enabled, separator_configured)
        self.source_cluster_alias = source_cluster_alias

    def _looks_like_heartbeat(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        """``topic`` unchanged, except heartbeat-looking topics which get the prefix."""
        hb = self._looks_like_heartbeat(topic)
        return super().format_remote_topic(source_alias, topic) if hb else topic

    def topic_source(self, topic: str) -> str | None:
        """Configured source alias, except for heartbeat-looking topics (Default rule)."""
        hb = self._looks_like_heartbeat(topic)
        return super().topic_source(topic) if hb else self.source_cluster_alias

    def upstream_topic(self, topic: str) -> str | None:
        """``topic`` itself, except for heartbeat-looking topics (Default rule)."""
        return super().upstream_topic(topic) if self._looks_like_heartbeat(topic) else topic


_POLICIES: dict[str, type[DefaultReplicationPolicy]] = {
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}
VALID_POLICY_CLASSES: tuple[str, ...] = tuple(
    name for short in _POLICIES for name in (_JAVA_PACKAGE + short, short)
)


def make_policy(
    class_name: str,
    separator: str = DEFAULT_SEPARATOR,
    internal_separator_enabled: bool = True,
    separator_configured: bool = False,
    source_cluster_alias: str | None = None,
) -> ReplicationPolicy:
    """Build a policy from ``replication.policy.class`` (full Java or short class name)."""
    name = class_name.strip() if isinstance(class_name, str) else ""
    cls = _POLICIES.get(name.removeprefix(_JAVA_PACKAGE))
    if cls is None:
        raise ConfigError(POLICY_CLASS_KEY, class_name, "one of " + ", ".join(VALID_POLICY_CLASSES))
    args = (separator, internal_separator_enabled, separator_configured)
    if cls is IdentityReplicationPolicy:
        return IdentityReplicationPolicy(source_cluster_alias, *args)
    return cls(*args)


def is_cycle(policy: ReplicationPolicy, topic: str, target_alias: str) -> bool:
    """True if ``topic`` (on the source) already passed through ``target_alias`` (MM2's cycle
    rule)."""
    seen = {topic}
    while True:
        source = policy.topic_source(topic)
        if source is None:
            return False
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream in seen:  # `upstream == topic`: Identity-like policies
            return False
        seen.add(upstream)
        topic = upstream


def checkpoint_topic_name(
    policy: ReplicationPolicy, source_alias: str, target_alias: str, topic: str
) -> str:
    """Target-side name of a checkpointed topic (MirrorCheckpointTask's rename)."""
    if policy.topic_source(topic) == target_alias:
        return policy.original_topic(topic)
    return policy.format_remote_topic(source_alias, topic)


# --- MirrorClient helpers over a list of topic names (docs/mm2-reference.md#mirrorclient) ----


def heartbeat_topics(policy: ReplicationPolicy, topics: Iterable[str]) -> set[str]:
    """Topics for which ``is_heartbeats_topic`` holds."""
    return {t for t in topics if policy.is_heartbeats_topic(t)}


def checkpoint_topics(policy: ReplicationPolicy, topics: Iterable[str]) -> set[str]:
    """Topics for which ``is_checkpoints_topic`` holds."""
    return {t for t in topics if policy.is_checkpoints_topic(t)}


def _source_chain(policy: ReplicationPolicy, topic: str) -> list[str]:
    """Aliases along the topicSource chain, stopping at None or at a repeated alias."""
    chain: list[str] = []
    current: str | None = topic
    while current is not None:
        source = policy.topic_source(current)
        if source is None or source in chain:
            break
        chain.append(source)
        current = policy.upstream_topic(current)
    return chain


def upstream_clusters(policy: ReplicationPolicy, topics: Iterable[str]) -> set[str]:
    """Union of the source chains of all heartbeat topics (``B.A.heartbeats`` -> {B, A})."""
    return {alias for t in heartbeat_topics(policy, topics) for alias in _source_chain(policy, t)}


def replication_hops(policy: ReplicationPolicy, topics: Iterable[str], alias: str) -> int:
    """Fewest hops from ``alias`` over all heartbeat topics; -1 if no chain reaches it."""
    chains = [_source_chain(policy, t) for t in heartbeat_topics(policy, topics)]
    return min((c.index(alias) + 1 for c in chains if alias in c), default=-1)


def remote_topics(
    policy: ReplicationPolicy, topics: Iterable[str], source: str | None = None
) -> set[str]:
    """Non-internal topics with a source; only those whose immediate source is ``source``."""
    sources = {t: policy.topic_source(t) for t in topics if not policy.is_internal_topic(t)}
    return {t for t, s in sources.items() if s is not None and (source is None or s == source)}
