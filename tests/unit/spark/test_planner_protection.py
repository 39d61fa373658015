"""The planner write-protects the flow's remote topics at its first plan (and as it creates
them), then on the ACL sync interval (mirror_lib.replication.companions.protection does the
work)."""

from __future__ import annotations

from tests.helpers.fake_planner import Clusters, fake_clusters, planner

PROPS = {"clusters": "A, B", "A.bootstrap.servers": "a:1", "B.bootstrap.servers": "b:1",
         "A->B.enabled": "true", "A->B.topics": "orders.*"}  # fmt: skip


def test_remote_topics_are_protected_at_the_first_plan_then_on_the_acl_interval(monkeypatch):
    clusters = Clusters({"orders": 1, "orders-eu": 2}, {"orders": "i1", "orders-eu": "i2"})
    clusters.bounds = {("orders", 0): (0, 5), ("orders-eu", 0): (0, 5), ("orders-eu", 1): (0, 5)}
    fake_clusters(monkeypatch, clusters)
    p = planner({**PROPS, "sync.topic.acls.interval.seconds": "3600"})
    first = p.plan(None, first=True)
    p.plan(first, first=False)
    topics = ["A.orders", "A.orders-eu"]
    assert p.parts.guard(p.ctx).refreshed == [topics]  # not again within the hour
    p._last_refresh["A->B"]["protect"] -= 3600  # an hour later
    p.plan(first, first=False)
    assert p.parts.guard(p.ctx).refreshed == [topics, topics]


def test_no_protection_when_the_setting_is_off(monkeypatch):
    clusters = Clusters({"orders": 1}, {"orders": "i1"}, {("orders", 0): (0, 5)})
    fake_clusters(monkeypatch, clusters)
    p = planner({**PROPS, "mirror.protect.remote.topics": "false"})
    p.plan(None, first=True)
    assert p.parts.guard(p.ctx).refreshed == []
