"""A topic filter that matches nothing names what the source lists, and why it may list less."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.replication.context import FlowContext
from mirror_lib.spark import runner

PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true", "A->B.topics": "orders", "A.security.protocol": "SASL_SSL",
         "A.sasl.mechanism": "SCRAM-SHA-512", "A.sasl.username": "mm2",
         "A.sasl.password": "pw"}  # fmt: skip


def test_an_empty_listing_says_an_authorizer_shows_only_what_the_principal_may_describe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Real Kafka lists only the topics the principal may DESCRIBE: "it has: no topics" alone
    sent a user with a missing ACL looking for a missing topic."""
    monkeypatch.setattr(runner, "list_topic_partitions", lambda admin, *a: {})
    ctx = FlowContext.create(parse_config(PROPS), "A->B")
    with pytest.raises(ConfigError) as refused:
        runner._check_matches(ctx, {}, True, print)
    assert "it has: no topics; with an authorizer, only the topics User:mm2 may DESCRIBE" in str(
        refused.value
    )
