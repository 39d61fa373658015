"""A topic filter that matches nothing names what the source lists, and why it may list less."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.replication.context import FlowContext
from mirror_lib.spark import runner
from tests.helpers.fake_admin import RecordingAdminOps

PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true", "A->B.topics": "orders", "A.security.protocol": "SASL_SSL",
         "A.sasl.mechanism": "SCRAM-SHA-512", "A.sasl.username": "mm2",
         "A.sasl.password": "pw"}  # fmt: skip


def test_an_empty_listing_says_an_authorizer_shows_only_what_the_principal_may_describe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Real Kafka lists only the topics the principal may DESCRIBE: "it has: no topics" alone
    sent a user with a missing ACL looking for a missing topic."""
    monkeypatch.setattr(FlowContext, "admin_ops", lambda self, side, *a: RecordingAdminOps({}))
    ctx = FlowContext.create(parse_config(PROPS), "A->B")
    with pytest.raises(ConfigError) as refused:
        runner._check_matches(ctx, {}, True, print)
    assert "it has: no topics; with an authorizer, only the topics User:mm2 may DESCRIBE" in str(
        refused.value
    )


def test_the_warning_names_the_source_topics_through_the_flows_admin_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Continuous runs warn and go on; the source's own internal topics are not offered."""
    asked: list[str] = []

    def admin_ops(self: FlowContext, side: str, *a: object) -> RecordingAdminOps:
        asked.append(side)
        return RecordingAdminOps({"order-events": 3, "__consumer_offsets": 50})

    monkeypatch.setattr(FlowContext, "admin_ops", admin_ops)
    said: list[str] = []
    runner._check_matches(FlowContext.create(parse_config(PROPS), "A->B"), {}, False, said.append)
    assert asked == ["source"]
    assert len(said) == 1 and "matches no topic on A yet (it has: order-events; " in said[0]
