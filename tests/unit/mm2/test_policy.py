"""Tests of mirror_lib.mm2.policy against docs/mm2-reference.md#internal-topics,
#replication-policies and #mirrorclient."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from mirror_lib.errors import ConfigError
from mirror_lib.mm2.policy import (
    VALID_POLICY_CLASSES,
    DefaultReplicationPolicy,
    IdentityReplicationPolicy,
    ReplicationPolicy,
    checkpoint_topic_name,
    checkpoint_topics,
    heartbeat_topics,
    is_cycle,
    java_split,
    make_policy,
    remote_topics,
    replication_hops,
    upstream_clusters,
)

DEFAULT = DefaultReplicationPolicy()
UNDERSCORE = DefaultReplicationPolicy("__", separator_configured=True)
UNDERSCORE_COMPAT = DefaultReplicationPolicy(
    "__", internal_separator_enabled=False, separator_configured=True
)
JAVA = "org.apache.kafka.connect.mirror."

# --- names --------------------------------------------------------------------------------------


def test_default_names() -> None:
    assert DEFAULT.separator == "." and DEFAULT.internal_separator == "."
    assert DEFAULT.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert DEFAULT.checkpoints_topic("A") == "A.checkpoints.internal"
    assert DEFAULT.heartbeats_topic() == "heartbeats"
    assert DEFAULT.format_remote_topic("A", "orders") == "A.orders"
    assert DEFAULT.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert DEFAULT.format_remote_topic("B", "A.heartbeats") == "B.A.heartbeats"


def test_double_underscore_separator_names() -> None:
    assert UNDERSCORE.internal_separator == "__"
    assert UNDERSCORE.checkpoints_topic("A") == "A__checkpoints__internal"
    assert UNDERSCORE.offset_syncs_topic("B") == "mm2-offset-syncs__B__internal"
    assert UNDERSCORE.format_remote_topic("A", "orders") == "A__orders"
    assert UNDERSCORE.format_remote_topic("A", "heartbeats") == "A__heartbeats"
    assert UNDERSCORE.heartbeats_topic() == "heartbeats"


def test_internal_separator_disabled_compat_mode() -> None:
    assert UNDERSCORE_COMPAT.internal_separator == "."
    assert UNDERSCORE_COMPAT.checkpoints_topic("A") == "A.checkpoints.internal"
    assert UNDERSCORE_COMPAT.offset_syncs_topic("B") == "mm2-offset-syncs.B.internal"
    assert UNDERSCORE_COMPAT.format_remote_topic("A", "orders") == "A__orders"
    assert UNDERSCORE_COMPAT.heartbeats_topic() == "heartbeats"
    assert UNDERSCORE_COMPAT.is_checkpoints_topic("A.checkpoints.internal")
    assert not UNDERSCORE_COMPAT.is_checkpoints_topic("A__checkpoints__internal")


@pytest.mark.parametrize("configured", [True, False])
@pytest.mark.parametrize("enabled", [True, False])
def test_default_separator_internal_names_are_dotted_either_way(
    configured: bool, enabled: bool
) -> None:
    # The flag is only read when the separator key is present; with "." the result is "." anyway.
    policy = DefaultReplicationPolicy(".", enabled, configured)
    assert policy.internal_separator == "."
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"


def test_custom_separator_counts_as_configured() -> None:
    # A non-default separator can only come from config, so the flag applies (default true).
    assert DefaultReplicationPolicy("__").internal_separator == "__"
    assert DefaultReplicationPolicy("__", False).internal_separator == "."


def test_empty_separator_is_config_error() -> None:
    with pytest.raises(ConfigError) as err:
        DefaultReplicationPolicy("")
    assert err.value.key == "replication.policy.separator"


# --- internal topics (Kafka 4.x rules) --------------------------------------------------------


@pytest.mark.parametrize(
    "topic",
    [
        "__consumer_offsets",
        ".hiddentopic",
        "mm2-offset-syncs.B.internal",
        "mm2-offsets.A.internal",
        "mm2-status.A.internal",
        "mm2foo.internal",
        "A.checkpoints.internal",
        "B.A.checkpoints.internal",
    ],
)
def test_internal_topics(topic: str) -> None:
    assert DEFAULT.is_internal_topic(topic)


@pytest.mark.parametrize(
    "topic", ["foo.internal", "foo-internal", "mm2-offsets-A-internal", "orders", "x.replica"]
)
def test_not_internal_in_kafka_4(topic: str) -> None:
    # Kafka 3.x treated the first three as internal; 4.x (KAFKA-17200) does not.
    assert not DEFAULT.is_internal_topic(topic)
    assert not DEFAULT.is_mm2_internal_topic(topic)


def test_mm2_internal_and_checkpoints_predicates() -> None:
    assert DEFAULT.is_checkpoints_topic("A.checkpoints.internal")
    assert not DEFAULT.is_checkpoints_topic("mm2-offset-syncs.B.internal")
    assert DEFAULT.is_mm2_internal_topic("mm2-offset-syncs.B.internal")
    assert DEFAULT.is_mm2_internal_topic("A.checkpoints.internal")
    assert not DEFAULT.is_mm2_internal_topic("__consumer_offsets")
    assert UNDERSCORE.is_mm2_internal_topic("mm2-offset-syncs__B__internal")
    assert UNDERSCORE.is_checkpoints_topic("A__checkpoints__internal")
    # With isep "__" the dotted names are not recognised (Java behaves the same).
    assert not UNDERSCORE.is_checkpoints_topic("A.checkpoints.internal")
    assert not UNDERSCORE.is_internal_topic("A.checkpoints.internal")


@pytest.mark.parametrize("topic", ["heartbeats", "A.heartbeats", "B.A.heartbeats"])
def test_heartbeats_topics(topic: str) -> None:
    assert DEFAULT.is_heartbeats_topic(topic)


@pytest.mark.parametrize("topic", ["heartbeats.A", "xheartbeats", "A.xheartbeats", "beats"])
def test_not_heartbeats_topics(topic: str) -> None:
    assert not DEFAULT.is_heartbeats_topic(topic)


def test_heartbeats_with_custom_separator() -> None:
    assert UNDERSCORE.is_heartbeats_topic("A__heartbeats")
    assert UNDERSCORE.is_heartbeats_topic("B__A__heartbeats")
    assert not UNDERSCORE.is_heartbeats_topic("A.heartbeats")


# --- DefaultReplicationPolicy -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("", [""]),
        ("x", ["x"]),
        ("A.", ["A"]),
        ("A..", ["A"]),
        (".", []),
        ("..", []),
        (".x", ["", "x"]),
        ("A..x", ["A", "", "x"]),
        ("A.B.", ["A", "B"]),
        ("A.B.x", ["A", "B", "x"]),
    ],
)
def test_java_split(text: str, parts: list[str]) -> None:
    assert java_split(text, ".") == parts


def test_java_split_on_an_empty_separator_splits_between_every_character() -> None:
    """Java's ``Pattern.quote("")`` matches everywhere: ``"dc1heartbeats".split(...)`` gives
    its characters, so MM2's topicSource of ``dc1heartbeats`` is ``d``."""
    assert java_split("dc1hb", "") == ["d", "c", "1", "h", "b"]
    assert java_split("", "") == [""]


def test_identity_with_an_empty_separator_names_as_mm2_does() -> None:
    """MM2 4.3.1 runs an empty separator with IdentityReplicationPolicy (its names, read from
    its own MirrorMakerConfig): nothing joins the alias any more."""
    policy = make_policy("IdentityReplicationPolicy", "", True, True, source_cluster_alias="dc1")
    assert policy.format_remote_topic("dc1", "orders") == "orders"
    assert policy.format_remote_topic("dc1", "heartbeats") == "dc1heartbeats"
    assert policy.offset_syncs_topic("dc2") == "mm2-offset-syncsdc2internal"
    assert policy.checkpoints_topic("dc1") == "dc1checkpointsinternal"
    assert policy.is_checkpoints_topic("dc1checkpointsinternal")
    assert policy.is_internal_topic("mm2-offset-syncsdc2internal")
    assert policy.topic_source("orders") == "dc1"
    assert policy.topic_source("dc1heartbeats") == "d"  # as MM2's Java split answers
    assert not policy.is_heartbeats_topic("dc1heartbeats")  # MM2 says false too
    # with the internal separator off, the internal topics keep their dots
    dotted = make_policy("IdentityReplicationPolicy", "", False, True)
    assert dotted.checkpoints_topic("dc1") == "dc1.checkpoints.internal"
    assert dotted.format_remote_topic("dc1", "heartbeats") == "dc1heartbeats"
    with pytest.raises(ConfigError, match="a non-empty string"):
        make_policy("DefaultReplicationPolicy", "", True, True)


@pytest.mark.parametrize(
    ("topic", "source", "upstream", "original"),
    [
        ("", None, None, ""),
        ("x", None, None, "x"),
        ("A.", None, None, "A."),
        ("A..", None, None, "A.."),
        (".", None, None, "."),
        ("..", None, None, ".."),
        (".x", "", "x", "x"),
        ("A..x", "A", ".x", "x"),
        ("A.x", "A", "x", "x"),
        ("A.B.x", "A", "B.x", "x"),
        ("A.B.", "A", "B.", "B."),
        ("A.x.", "A", "x.", "x."),
    ],
)
def test_split_edge_cases(
    topic: str, source: str | None, upstream: str | None, original: str
) -> None:
    assert DEFAULT.topic_source(topic) == source
    assert DEFAULT.upstream_topic(topic) == upstream
    assert DEFAULT.original_topic(topic) == original


def test_double_underscore_split() -> None:
    assert UNDERSCORE.topic_source("A__orders") == "A"
    assert UNDERSCORE.upstream_topic("A__orders") == "orders"
    assert UNDERSCORE.topic_source("A.orders") is None
    assert UNDERSCORE.topic_source("A__") is None
    assert UNDERSCORE.topic_source("__x") == ""
    assert UNDERSCORE.topic_source("A___x") == "A"
    assert UNDERSCORE.upstream_topic("A___x") == "_x"
    assert UNDERSCORE.original_topic("B__A__orders") == "orders"


def test_a_topic_already_remote_is_prefixed_again() -> None:
    assert DEFAULT.format_remote_topic("A", "B.x") == "A.B.x"


ALIAS = st.text("ABCxyz019-", min_size=1, max_size=6)
TOPIC = st.text("abcXYZ09._-", min_size=1, max_size=12)
SEP = st.sampled_from([".", "_", "__", "..", "::"])


@given(sep=SEP, source=ALIAS, topic=TOPIC)
def test_topic_source_of_remote_topic(sep: str, source: str, topic: str) -> None:
    policy = DefaultReplicationPolicy(sep, separator_configured=True)
    assume(any(topic.split(sep)))  # a topic made only of separators leaves no second piece
    remote = policy.format_remote_topic(source, topic)
    assert policy.topic_source(remote) == source
    assert policy.upstream_topic(remote) == topic


@given(sep=SEP, aliases=st.lists(ALIAS, max_size=5), topic=TOPIC)
def test_original_topic_of_n_fold_remote(sep: str, aliases: list[str], topic: str) -> None:
    policy = DefaultReplicationPolicy(sep, separator_configured=True)
    assume(policy.topic_source(topic) is None and topic.replace(sep, ""))
    remote = topic
    for alias in aliases:
        remote = policy.format_remote_topic(alias, remote)
    assert policy.original_topic(remote) == topic
    assert policy.is_heartbeats_topic(remote) == (topic == "heartbeats")


# --- IdentityReplicationPolicy -------------------------------------------------------------------


def test_identity_plain_topics() -> None:
    policy = IdentityReplicationPolicy("A")
    assert policy.format_remote_topic("A", "orders") == "orders"
    assert policy.format_remote_topic("A", "B.orders") == "B.orders"
    assert policy.topic_source("orders") == "A"
    assert policy.topic_source("B.orders") == "A"
    assert policy.upstream_topic("orders") == "orders"
    assert policy.original_topic("B.orders") == "B.orders"
    assert IdentityReplicationPolicy().topic_source("orders") is None


def test_identity_heartbeats_behave_like_default() -> None:
    policy = IdentityReplicationPolicy("A")
    assert policy.format_remote_topic("A", "heartbeats") == "A.heartbeats"
    assert policy.topic_source("heartbeats") is None
    assert policy.topic_source("B.A.heartbeats") == "B"
    assert policy.upstream_topic("B.A.heartbeats") == "A.heartbeats"
    assert policy.original_topic("B.A.heartbeats") == "heartbeats"
    assert policy.is_heartbeats_topic("A.heartbeats")
    # Plain suffix match: "xheartbeats" gets the prefix but is not a heartbeats topic.
    assert policy.format_remote_topic("A", "xheartbeats") == "A.xheartbeats"
    assert not policy.is_heartbeats_topic("A.xheartbeats")


def test_identity_internal_names_follow_default() -> None:
    policy = IdentityReplicationPolicy("A", "__", separator_configured=True)
    assert policy.checkpoints_topic("A") == "A__checkpoints__internal"
    assert policy.format_remote_topic("A", "heartbeats") == "A__heartbeats"
    assert policy.is_internal_topic("mm2-offset-syncs__B__internal")


@given(topic=TOPIC, alias=ALIAS)
def test_identity_keeps_names(topic: str, alias: str) -> None:
    assume(not topic.endswith("heartbeats"))
    policy = IdentityReplicationPolicy(alias)
    assert policy.format_remote_topic(alias, topic) == topic
    assert policy.original_topic(topic) == topic


# --- make_policy -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        (JAVA + "DefaultReplicationPolicy", DefaultReplicationPolicy),
        ("DefaultReplicationPolicy", DefaultReplicationPolicy),
        (JAVA + "IdentityReplicationPolicy", IdentityReplicationPolicy),
        (" IdentityReplicationPolicy ", IdentityReplicationPolicy),
    ],
)
def test_make_policy_names(name: str, cls: type[ReplicationPolicy]) -> None:
    assert type(make_policy(name)) is cls


def test_make_policy_passes_settings() -> None:
    policy = make_policy("IdentityReplicationPolicy", "__", False, True, source_cluster_alias="A")
    assert isinstance(policy, IdentityReplicationPolicy)
    assert policy.source_cluster_alias == "A"
    assert policy.separator == "__"
    assert policy.checkpoints_topic("A") == "A.checkpoints.internal"
    underscore = make_policy(JAVA + "DefaultReplicationPolicy", "__", separator_configured=True)
    assert underscore.checkpoints_topic("A") == "A__checkpoints__internal"


@pytest.mark.parametrize("name", ["", "Default", "com.example.MyPolicy", JAVA + "Nope"])
def test_make_policy_unknown_class(name: str) -> None:
    with pytest.raises(ConfigError) as err:
        make_policy(name)
    assert err.value.key == "replication.policy.class"
    assert err.value.value == name
    for valid in VALID_POLICY_CLASSES:
        assert valid in err.value.expected


def test_make_policy_empty_separator() -> None:
    with pytest.raises(ConfigError) as err:
        make_policy("DefaultReplicationPolicy", separator="", separator_configured=True)
    assert err.value.key == "replication.policy.separator"


# --- cycles ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "cycle"),
    [("x", False), ("B.x", True), ("C.B.x", True), ("C.x", False), ("C.D.x", False), (".x", False)],
)
def test_is_cycle_for_flow_a_to_b(topic: str, cycle: bool) -> None:
    assert is_cycle(DEFAULT, topic, "B") is cycle


def test_is_cycle_identity_stops() -> None:
    assert not is_cycle(IdentityReplicationPolicy("A"), "x", "B")
    assert not is_cycle(IdentityReplicationPolicy(), "B.x", "B")
    # A (mis)configured source alias equal to the target is reported as a cycle, as in Java.
    assert is_cycle(IdentityReplicationPolicy("B"), "x", "B")
    assert is_cycle(IdentityReplicationPolicy("A"), "C.B.heartbeats", "B")


@given(aliases=st.lists(ALIAS, max_size=5), target=ALIAS)
def test_is_cycle_property(aliases: list[str], target: str) -> None:
    remote = "x"
    for alias in aliases:
        remote = DEFAULT.format_remote_topic(alias, remote)
    assert is_cycle(DEFAULT, remote, target) == (target in aliases)


# --- checkpoint rename -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("topic", "renamed"),
    [("x", "A.x"), ("B.x", "x"), ("C.x", "A.C.x"), ("B.C.x", "x"), ("C.B.x", "A.C.B.x")],
)
def test_checkpoint_topic_name(topic: str, renamed: str) -> None:
    assert checkpoint_topic_name(DEFAULT, "A", "B", topic) == renamed


def test_checkpoint_topic_name_identity() -> None:
    assert checkpoint_topic_name(IdentityReplicationPolicy("A"), "A", "B", "x") == "x"


# --- MirrorClient helpers -----------------------------------------------------------------------

ON_C = [
    "heartbeats",
    "B.heartbeats",
    "B.A.heartbeats",
    "orders",
    "B.orders",
    "B.A.orders",
    "B.checkpoints.internal",
    "mm2-offset-syncs.B.internal",
    "__consumer_offsets",
]


def test_mirror_client_helpers() -> None:
    assert heartbeat_topics(DEFAULT, ON_C) == {"heartbeats", "B.heartbeats", "B.A.heartbeats"}
    assert checkpoint_topics(DEFAULT, ON_C) == {"B.checkpoints.internal"}
    assert upstream_clusters(DEFAULT, ON_C) == {"B", "A"}
    assert replication_hops(DEFAULT, ON_C, "A") == 2
    assert replication_hops(DEFAULT, ON_C, "B") == 1
    assert replication_hops(DEFAULT, ON_C, "Z") == -1
    assert replication_hops(DEFAULT, [*ON_C, "A.heartbeats"], "A") == 1
    remote = {"B.heartbeats", "B.A.heartbeats", "B.orders", "B.A.orders"}
    assert remote_topics(DEFAULT, ON_C) == remote
    assert remote_topics(DEFAULT, ON_C, "B") == remote
    assert remote_topics(DEFAULT, ON_C, "A") == set()


def test_upstream_only_from_bh_a_heartbeats() -> None:
    assert upstream_clusters(DEFAULT, ["B.A.heartbeats"]) == {"B", "A"}
    assert replication_hops(DEFAULT, ["A.heartbeats"], "A") == 1
    assert upstream_clusters(DEFAULT, ["heartbeats", "orders"]) == set()
    assert replication_hops(DEFAULT, [], "A") == -1


def test_repeated_alias_chain() -> None:
    topics = ["A.B.A.heartbeats"]
    assert upstream_clusters(DEFAULT, topics) == {"A", "B"}
    assert replication_hops(DEFAULT, topics, "B") == 2
    assert replication_hops(DEFAULT, topics, "C") == -1


def test_remote_topics_identity() -> None:
    topics = [
        "orders",
        "heartbeats",
        "A.heartbeats",
        "__consumer_offsets",
        "B.checkpoints.internal",
    ]
    assert remote_topics(IdentityReplicationPolicy("B"), topics) == {"orders", "A.heartbeats"}
    assert remote_topics(IdentityReplicationPolicy("B"), topics, "B") == {"orders"}
    assert remote_topics(IdentityReplicationPolicy(), topics) == {"A.heartbeats"}


@given(aliases=st.lists(ALIAS, min_size=1, max_size=5))
def test_hops_property(aliases: list[str]) -> None:
    topic = "heartbeats"
    for alias in reversed(aliases):
        topic = DEFAULT.format_remote_topic(alias, topic)
    # The chain is read from the left; a repeated alias ends it.
    chain: list[str] = []
    for alias in aliases:
        if alias in chain:
            break
        chain.append(alias)
    assert upstream_clusters(DEFAULT, [topic]) == set(chain)
    for i, alias in enumerate(chain):
        assert replication_hops(DEFAULT, [topic], alias) == i + 1
