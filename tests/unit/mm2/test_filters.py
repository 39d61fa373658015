"""Tests of mirror_lib.mm2.filters against
docs/mm2-reference.md#which-topics-a-flow-replicates and #filter-defaults."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_lib.errors import ConfigError
from mirror_lib.mm2.filters import (
    DEFAULT_GROUPS,
    DEFAULT_GROUPS_EXCLUDE,
    DEFAULT_TOPICS,
    DEFAULT_TOPICS_EXCLUDE,
    DEFAULT_TOPICS_EXCLUDE_3X,
    GroupFilter,
    TopicFilter,
    compile_patterns,
    java_regex_to_python,
    parse_list,
    should_replicate_topic,
)
from mirror_lib.mm2.policy import DefaultReplicationPolicy, IdentityReplicationPolicy

DEFAULT = DefaultReplicationPolicy()

# --- parse_list --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "items"),
    [
        ("a, b ,c", ("a", "b", "c")),
        ("a,b,", ("a", "b")),
        ("a,,b", ("a", "b")),
        (" a ", ("a",)),
        ("", ()),
        ("   ", ()),
        (" , ", ()),
        (None, ()),
        ([" a", "b ", ""], ("a", "b")),
        (r"mm2.*\.internal, .*\.replica, __.*", (r"mm2.*\.internal", r".*\.replica", "__.*")),
    ],
)
def test_parse_list(value: str | list[str] | None, items: tuple[str, ...]) -> None:
    assert parse_list(value) == items


ITEM = st.text("abc.*_-[]0", min_size=1, max_size=8)


@given(st.lists(ITEM, max_size=6), st.sampled_from([",", ", ", " , ", ",\t"]))
def test_parse_list_round_trip(items: list[str], sep: str) -> None:
    assert parse_list(sep.join(items)) == tuple(items)
    assert parse_list(sep.join(items) + ",") == tuple(items)


# --- defaults ----------------------------------------------------------------------------------


def test_default_constants() -> None:
    assert DEFAULT_TOPICS == ".*"
    assert DEFAULT_TOPICS_EXCLUDE == r"mm2.*\.internal, .*\.replica, __.*"
    assert DEFAULT_GROUPS == ".*"
    assert DEFAULT_GROUPS_EXCLUDE == "console-consumer-.*, connect-.*, __.*"


@pytest.mark.parametrize(
    ("topic", "accepted"),
    [
        ("orders", True),
        ("A.orders", True),
        ("foo.internal", True),  # Kafka 4.x: only mm2*.internal is excluded by name
        ("foo-internal", True),
        ("mm2-offset-syncs.B.internal", False),
        ("mm2-offsets.A.internal", False),
        ("x.replica", False),
        ("__consumer_offsets", False),
        ("heartbeats", True),
    ],
)
def test_default_topic_filter(topic: str, accepted: bool) -> None:
    assert TopicFilter().should_replicate_topic(topic) is accepted


@pytest.mark.parametrize("topic", ["foo.internal", "foo-internal", "mm2-status.A.internal"])
def test_3x_topic_exclude_default(topic: str) -> None:
    assert not TopicFilter(exclude=DEFAULT_TOPICS_EXCLUDE_3X).should_replicate_topic(topic)


@pytest.mark.parametrize(
    ("group", "accepted"),
    [
        ("my-group", True),
        ("console-consumer-12345", False),
        ("connect-mm2", False),
        ("__internal", False),
        ("my-connect-group", True),
    ],
)
def test_default_group_filter(group: str, accepted: bool) -> None:
    assert GroupFilter().should_replicate_group(group) is accepted


# --- matching semantics ------------------------------------------------------------------------


def test_full_match_and_exclude_wins() -> None:
    f = TopicFilter("ord, pay.*", "pay-secret.*")
    assert not f.should_replicate_topic("orders")  # "ord" must match the whole name
    assert f.should_replicate_topic("ord")
    assert f.should_replicate_topic("payments")
    assert not f.should_replicate_topic("pay-secret-1")
    assert not f.should_replicate_topic("xpayments")


def test_alternation_full_match() -> None:
    assert TopicFilter("a|ab", "").should_replicate_topic("ab")


def test_empty_lists() -> None:
    assert not TopicFilter("", "").should_replicate_topic("orders")  # empty include: nothing
    assert TopicFilter(".*", "").should_replicate_topic("__consumer_offsets")
    assert not GroupFilter(" , ", "").should_replicate_group("g")
    assert GroupFilter(["g.*"], []).should_replicate_group("g1")


def test_java_regex_spellings() -> None:
    assert java_regex_to_python(r"\Qa.b\E.*") == r"a\.b.*"
    assert java_regex_to_python(r"(?<name>x)\z") == r"(?P<name>x)\Z"
    assert java_regex_to_python(r"(?<=a)b(?<!c)") == r"(?<=a)b(?<!c)"
    assert java_regex_to_python(r"a\.b") == r"a\.b"
    f = TopicFilter(r"\Qa.b\E, (?<p>x)y", "")
    assert f.should_replicate_topic("a.b")
    assert not f.should_replicate_topic("axb")
    assert f.should_replicate_topic("xy")


def test_patterns_compiled_once_joined_with_a_bar_as_mm2_does() -> None:
    f = TopicFilter("a.*, b", "c")
    assert [p.pattern for p in f.include] == ["a.*|b"]
    assert [p.pattern for p in f.exclude] == ["c"]


def test_a_group_split_by_a_comma_is_one_pattern_again() -> None:
    # MM2: "(billing, shipping)-consumers" -> items "(billing", "shipping)-consumers" -> joined
    f = GroupFilter("(billing, shipping)-consumers", "")
    assert f.should_replicate_group("billing-consumers")
    assert f.should_replicate_group("shipping-consumers")
    assert not f.should_replicate_group("billing")


def test_a_comma_inside_a_repetition_is_refused_as_java_refuses_it() -> None:
    with pytest.raises(ConfigError) as err:
        TopicFilter("orders-v[0-9]{1,2}, payments", "", include_key="A->B.topics")
    assert err.value.key == "A->B.topics"
    assert err.value.value == "orders-v[0-9]{1,2}, payments"
    assert "joins the items with '|'" in err.value.expected
    assert "'orders-v[0-9]{1|2}|payments'" in err.value.expected


@pytest.mark.parametrize("pattern", ["{x}", "a{", "a{1", "a{,2}", "a{1|2}"])
def test_braces_java_refuses_are_refused(pattern: str) -> None:
    with pytest.raises(re.error, match="repetition"):
        java_regex_to_python(pattern)


@pytest.mark.parametrize("pattern", [r"a{2}", r"a{2,}", r"a{2,3}", r"[{}]", r"\{", r"\Q{\E"])
def test_braces_java_accepts_translate_to_a_pattern_python_compiles(pattern: str) -> None:
    re.compile(java_regex_to_python(pattern))


def test_an_inline_flag_after_the_start_applies_to_the_rest_as_in_java() -> None:
    assert java_regex_to_python("a|(?i)b|c") == "a|(?i:b)|(?i:c)"
    assert java_regex_to_python("(x(?i)y|z)w") == "(x(?i:y)|(?i:z))w"
    f = TopicFilter("a, (?i)b, c", "")
    assert [f.should_replicate_topic(t) for t in ("a", "A", "B", "C")] == [True, False, True, True]


@pytest.mark.parametrize(
    ("kwargs", "key", "bad"),
    [
        ({"include": "ok, a("}, "topics", "ok, a("),
        ({"exclude": "["}, "topics.exclude", "["),
        ({"include": "*x", "include_key": "A->B.topics"}, "A->B.topics", "*x"),
        ({"exclude": "(", "exclude_key": "A->B.topics.exclude"}, "A->B.topics.exclude", "("),
    ],
)
def test_invalid_topic_regex(kwargs: dict[str, str], key: str, bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        TopicFilter(**kwargs)
    assert err.value.key == key
    assert err.value.value == bad
    assert "regular expression" in err.value.expected
    assert key in str(err.value) and bad in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [({"include": "g("}, "groups"), ({"exclude": "g)"}, "groups.exclude")],
)
def test_invalid_group_regex(kwargs: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as err:
        GroupFilter(**kwargs)
    assert err.value.key == key
    assert isinstance(err.value.__cause__, re.error)
    assert err.value.__cause__.msg in err.value.expected  # carries the re error text


# --- MirrorSourceConnector.shouldReplicateTopic, flow A->B ---------------------------------


def test_cycles_are_skipped() -> None:
    f = TopicFilter()
    assert not should_replicate_topic(DEFAULT, f, "B.x", "B")
    assert not should_replicate_topic(DEFAULT, f, "C.B.x", "B")
    assert should_replicate_topic(DEFAULT, f, "C.x", "B")
    assert DEFAULT.format_remote_topic("A", "C.x") == "A.C.x"
    assert should_replicate_topic(DEFAULT, f, "x", "B")


def test_heartbeats_replicated_even_if_topics_does_not_match() -> None:
    f = TopicFilter("orders")
    assert should_replicate_topic(DEFAULT, f, "orders", "B")
    assert not should_replicate_topic(DEFAULT, f, "payments", "B")
    assert should_replicate_topic(DEFAULT, f, "heartbeats", "B")
    assert should_replicate_topic(DEFAULT, f, "C.heartbeats", "B")
    assert not should_replicate_topic(DEFAULT, f, "B.heartbeats", "B")  # still a cycle
    assert not should_replicate_topic(DEFAULT, f, "heartbeats", "B", False)
    assert not should_replicate_topic(
        DEFAULT, f, "C.heartbeats", "B", heartbeats_replication_enabled=False
    )


def test_heartbeats_excluded_by_filter_still_replicated() -> None:
    f = TopicFilter(".*", "heartbeats, .*heartbeats")
    assert should_replicate_topic(DEFAULT, f, "heartbeats", "B")
    assert not should_replicate_topic(DEFAULT, f, "heartbeats", "B", False)


@pytest.mark.parametrize(
    "topic",
    [
        "__consumer_offsets",
        ".hidden",
        "mm2-offset-syncs.B.internal",
        "A.checkpoints.internal",
        "C.checkpoints.internal",
    ],
)
def test_internal_topics_never_replicated(topic: str) -> None:
    everything = TopicFilter(".*", "")
    assert not should_replicate_topic(DEFAULT, everything, topic, "B")


def test_kafka4_replicates_user_internal_suffix() -> None:
    assert should_replicate_topic(DEFAULT, TopicFilter(), "foo.internal", "B")
    three_x = TopicFilter(exclude=DEFAULT_TOPICS_EXCLUDE_3X)
    assert not should_replicate_topic(DEFAULT, three_x, "foo.internal", "B")


def test_identity_policy_flow() -> None:
    policy = IdentityReplicationPolicy("A")
    f = TopicFilter()
    assert should_replicate_topic(policy, f, "x", "B")
    assert should_replicate_topic(policy, f, "B.x", "B")  # Identity cannot detect cycles
    assert should_replicate_topic(policy, f, "heartbeats", "B")
    assert not should_replicate_topic(policy, f, "B.heartbeats", "B")


@given(st.text("abcXYZ09._-", min_size=1, max_size=12))
def test_accepted_topics_are_not_internal(topic: str) -> None:
    if should_replicate_topic(DEFAULT, TopicFilter(".*", ""), topic, "B"):
        assert not DEFAULT.is_internal_topic(topic)
        assert DEFAULT.topic_source(topic) != "B"


@pytest.mark.parametrize("pattern", ["[a-z&&[^x]]+", "[ab[cd]]", "[a-c&&[b]]"])
def test_java_class_union_and_intersection_are_refused_not_misread(pattern):
    """Python's re reads a nested class or '&&' as another class: it would match other names."""
    with pytest.raises(ConfigError, match="flat class"):
        compile_patterns(pattern, "topics")


def test_shorthand_classes_and_case_folding_are_ascii_as_in_java():
    (word,) = compile_patterns(r"\w+", "groups")
    (folded,) = compile_patterns("(?i)grüppe", "groups")
    assert word.fullmatch("group_1") and not word.fullmatch("grüppe")
    assert folded.fullmatch("GRüPPE") and not folded.fullmatch("GRÜPPE")
