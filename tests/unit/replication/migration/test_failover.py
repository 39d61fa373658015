"""`mirror failover`: a group's checkpoints committed on the target, never moving an offset back
unless asked to (as group sync and cutover), with the checkpoints' metadata."""

from __future__ import annotations

import pytest

from mirror_lib.app import cli
from mirror_lib.config.parse import parse_config
from mirror_lib.kafka import mirror_client
from mirror_lib.mm2.formats import Checkpoint
from mirror_lib.replication.companions import protection
from mirror_lib.replication.migration import failover
from mirror_lib.replication.migration.failover import KEPT, failover_group, format_failover
from tests.helpers.fake_groups import FakeGroupAdmin, topic_reader
from tests.helpers.fake_kafka import FakeProducer

PROPS = {
    "clusters": "A, B",
    "A.bootstrap.servers": "127.0.0.1:1",
    "B.bootstrap.servers": "127.0.0.1:2",
    "A->B.enabled": "true",
}


@pytest.fixture
def target(monkeypatch: pytest.MonkeyPatch) -> FakeGroupAdmin:
    """B: the group's checkpoints (A.orders-0 at 400, A.orders-1 at 50) and its offsets there
    (900: consumers ran on B after an earlier failover; 10: behind)."""
    log = FakeProducer()
    for cp in (
        Checkpoint("app", "A.orders", 0, 380, 400, "v0"),
        Checkpoint("app", "A.orders", 1, 45, 50, "v1"),
    ):
        log.produce("A.checkpoints.internal", cp.value(), cp.key(), partition=0)
    log.flush()
    admin = FakeGroupAdmin({"app": {("A.orders", 0): (900, ""), ("A.orders", 1): (10, "")}})
    monkeypatch.setattr(mirror_client, "read_topic", topic_reader(log))
    monkeypatch.setattr(failover, "_admin", lambda config, alias: admin)
    monkeypatch.setattr(failover, "check_flow_clusters", lambda *a, **kw: None)  # B is a fake
    monkeypatch.setattr(protection, "lift_flow_protection", lambda *a, **kw: None)  # no ACLs
    return admin


def test_apply_commits_each_checkpoints_metadata(target) -> None:
    """MirrorClient gives MM2's offset and metadata; a failover commits both."""
    target.offsets["app"] = {}  # nothing committed on B yet
    failover_group(parse_config(PROPS), "app", "A", "B", apply=True)
    assert target.altered == [("app", "A.orders", 0, 400, "v0"), ("app", "A.orders", 1, 50, "v1")]


def test_apply_keeps_an_offset_the_target_is_past_and_commits_the_metadata(target) -> None:
    rows = failover_group(parse_config(PROPS), "app", "A", "B", apply=True)
    assert [(r.partition, r.offset, r.current, r.action) for r in rows] == [
        (0, 400, 900, KEPT),
        (1, 50, 10, "committed"),
    ]
    assert target.altered == [("app", "A.orders", 1, 50, "v1")]
    assert target.offsets["app"][("A.orders", 0)] == (900, "")


def test_rewind_moves_it_back_only_when_asked(target) -> None:
    config = parse_config(PROPS)
    dry = failover_group(config, "app", "A", "B", rewind=True)
    assert [r.action for r in dry] == ["would rewind", "would commit"] and target.altered == []
    rows = failover_group(config, "app", "A", "B", apply=True, rewind=True)
    assert [r.action for r in rows] == ["rewound", "committed"]
    assert target.offsets["app"] == {("A.orders", 0): (400, "v0"), ("A.orders", 1): (50, "v1")}
    assert "2 offsets" in format_failover(rows, "app", "B", applied=True)
    assert "1 of them moved back" in format_failover(rows, "app", "B", applied=True)


def test_cli_names_the_kept_partitions(target, tmp_path, capsys) -> None:
    path = tmp_path / "mm2.properties"
    path.write_text("".join(f"{k} = {v}\n" for k, v in PROPS.items()))
    args = ["failover", str(path), "--group", "app", "--source", "A", "--target", "B"]
    assert cli.main([*args, "--apply"]) == 0
    out = capsys.readouterr().out
    assert "committed 1 offsets for group app on B" in out
    assert "kept 1 where the target is at or past the translated offset" in out
    assert "A.orders[0] at 900 (translated 400)" in out and "--rewind" in out
    assert cli.main([*args, "--json"]) == 0
    assert '"action": "kept (the target is at or past it)"' in capsys.readouterr().out


def test_cli_says_which_write_protection_it_lifts(target, tmp_path, capsys, monkeypatch) -> None:
    """The flow's remote topics become B's own: `failover` lifts their write protection."""
    asked = []

    def lift(config, flow, *, apply):
        asked.append((flow, apply))
        removed = [protection.deny_write("A.orders", "User:bob")]
        return protection.Lift("B", ["A.orders"], removed, apply)

    monkeypatch.setattr(protection, "lift_flow_protection", lift)
    path = tmp_path / "mm2.properties"
    path.write_text("".join(f"{k} = {v}\n" for k, v in PROPS.items()))
    args = ["failover", str(path), "--group", "app", "--source", "A", "--target", "B"]
    assert cli.main(args) == 0
    assert (
        "write protection would lift on B for 1 remote topic (A.orders): would remove DENY "
        "WRITE for A.orders: User:bob" in capsys.readouterr().out
    )
    assert cli.main([*args, "--apply"]) == 0
    assert "removed DENY WRITE for A.orders: User:bob" in capsys.readouterr().out
    assert asked == [("A->B", False), ("A->B", True)]
