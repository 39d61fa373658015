"""Supervision of a run's queries: transient vs terminal, backoff, outage events and status."""

from __future__ import annotations

import traceback

import pytest

from mirror_lib.config.global_settings import RunSettings
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import (
    BrokerError,
    DataLossError,
    MirrorRuntimeError,
    RecordTooLargeError,
    is_transient_text,
)
from mirror_lib.kafka import admin as kafka_admin
from mirror_lib.replication.companions import supervise
from mirror_lib.replication.companions.supervise import (
    Supervisor,
    Unit,
    backoff,
    current_outages,
)
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.events import QueryRestart
from tests.helpers.fake_admin import RecordingAdminOps
from tests.helpers.fake_metadata import FakeCluster, topics_of
from tests.helpers.fake_query import FakeQuery


def text_of(exc: Exception) -> str:
    """What Spark shows of an error raised in a Python worker: its traceback."""
    try:
        raise exc
    except Exception as raised:
        return "org.apache.spark...PythonException:\n" + "".join(traceback.format_exception(raised))


def config(tmp_path, **extra: str):
    props = {
        "clusters": "A, B",
        "A.bootstrap.servers": "127.0.0.1:9",
        "B.bootstrap.servers": "127.0.0.1:10",
        "A->B.enabled": "true",
        "mirror.state.dir": str(tmp_path),
        **extra,
    }
    return parse_config(props)


def test_transient_and_terminal_errors_are_told_apart_from_a_failed_query_text():
    assert is_transient_text(text_of(BrokerError("listing topics failed", transient=True)))
    assert not is_transient_text(text_of(BrokerError("authorization failed", transient=False)))
    assert not is_transient_text(text_of(RecordTooLargeError("record t[0] offset 3 too large")))
    assert not is_transient_text(text_of(DataLossError("t[0]: range gone")))
    assert is_transient_text("KafkaException: KafkaError{code=_TRANSPORT,val=-195}")
    assert is_transient_text("KafkaError{code=COORDINATOR_LOAD_IN_PROGRESS,val=14}")
    assert not is_transient_text("KafkaError{code=SASL_AUTHENTICATION_FAILED,val=58}")
    assert not is_transient_text("java.lang.NullPointerException")
    assert is_transient_text("SparkException: Python worker failed to connect back.")
    assert is_transient_text("SparkException: Python worker exited unexpectedly (crashed).")
    # The last of our errors decides (a terminal one raised while handling a transient one).
    both = text_of(BrokerError("x", transient=True)) + text_of(DataLossError("gap"))
    assert not is_transient_text(both)


def test_a_transient_error_says_so_before_python_3_11_too(monkeypatch):
    """Python 3.10 has no exception notes: the message carries the note instead."""
    import mirror_lib.errors as errors

    monkeypatch.setattr(errors.sys, "version_info", (3, 10, 14))
    assert is_transient_text(text_of(BrokerError("listing topics failed", transient=True)))
    assert not is_transient_text(text_of(BrokerError("authorization failed", transient=False)))


def test_backoff_doubles_up_to_its_cap():
    assert [backoff(n) for n in range(1, 7)] == [1, 2, 4, 8, 10, 10]


def test_errors_name_cluster_role_bootstrap_and_unselected_heartbeat_pairs(tmp_path):
    cfg = config(tmp_path)
    ctx = FlowContext.create(cfg, "A->B")
    assert ctx.where("target") == "target cluster B (bootstrap 127.0.0.1:10)"
    assert ctx.where("A") == "source cluster A (bootstrap 127.0.0.1:9)"
    assert ctx.label == "flow A->B"
    reverse = FlowContext.create(cfg, "B->A")
    assert reverse.label == (
        "heartbeats B->A, emitted for every cluster pair as MM2 does; turn off with "
        "`B->A.emit.heartbeats.enabled = false`"
    )


def test_the_outage_probe_asks_with_the_flows_own_admin_settings(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from mirror_lib.kafka import admin

    cfg = config(tmp_path, **{"A->B.source.admin.socket.timeout.ms": "1234"})
    built: list[dict] = []

    def admin_client(conf, where=""):
        built.append(conf)
        return SimpleNamespace(list_topics=lambda timeout: SimpleNamespace(brokers={1: "b"}))

    monkeypatch.setattr(admin, "admin_client", admin_client)
    assert supervise.reachable(FlowContext.create(cfg, "A->B"), "source")
    assert built[0]["bootstrap.servers"] == "127.0.0.1:9"
    assert str(built[0]["socket.timeout.ms"]) == "1234"


class Harness:
    def __init__(self, tmp_path, monkeypatch, **extra: str) -> None:
        self.config = config(tmp_path, **extra)
        self.ctx = FlowContext.create(self.config, "A->B")
        self.published: list[dict] = []
        self.lines: list[str] = []
        self.down = {"B"}
        monkeypatch.setattr(
            supervise,
            "reachable",
            lambda ctx, side: {"source": ctx.source, "target": ctx.target}[side] not in self.down,
        )
        monkeypatch.setattr(
            supervise.events, "publish", lambda _ctx, evs, timeout_s=0: self.published.extend(evs)
        )
        self.query = FakeQuery()
        self.restarts = 0
        self.told: list[QueryRestart] = []  # what each restart told the query's copy tasks

        def restart(after: QueryRestart) -> FakeQuery:
            self.restarts += 1
            self.told.append(after)
            self.query = FakeQuery()
            return self.query

        self.unit = Unit("replication of A->B", self.ctx, lambda: self.query, restart)
        limit = RunSettings.of(self.config.properties).outage_limit_s
        self.sup = Supervisor(self.config, limit, self.lines.append, lambda _f: 42)

    def watch(self) -> None:
        def terminal() -> None:
            raise MirrorRuntimeError("terminal: " + str(self.query.exception()))

        self.sup.watch(self.unit, terminal)


def test_a_transient_failure_restarts_the_query_and_records_the_outage(tmp_path, monkeypatch):
    h = Harness(tmp_path, monkeypatch)
    h.query.fail(text_of(BrokerError("listing topics failed", transient=True)))
    h.watch()
    assert h.restarts == 1  # the first retry is immediate
    (outage,) = current_outages(h.config)
    assert (outage["cluster"], outage["role"], outage["records_behind"]) == ("B", "target", 42)
    assert "waiting for target cluster B (bootstrap 127.0.0.1:10)" in h.lines[0]
    assert h.published == []  # the target is down: its events wait
    h.query.fail(text_of(BrokerError("listing topics failed", transient=True)))
    h.watch()
    assert h.restarts == 1, "the second retry waits for its backoff"
    h.sup.outages["replication of A->B"].next_retry = 0
    h.watch()
    assert h.restarts == 2
    h.down.clear()
    h.query.batch()
    h.watch()
    assert [e["type"] for e in h.published] == ["outage_started", "outage_ended"]
    started, ended = h.published
    assert started["cluster"] == ended["cluster"] == "B" and ended["role"] == "target"
    assert ended["records_behind"] == 42 and ended["restarts"] == 2
    assert ended["duration_s"] >= 0 and started["outage_id"] == ended["outage_id"]
    assert "listing topics failed" in ended["last_error"] and ended["cause"] == started["cause"]
    # each restart told the query's copy tasks the outage, for their resumed events
    assert [t.outage_id for t in h.told] == [started["outage_id"]] * 2
    assert h.told[-1].why == f"an outage of target cluster B: {ended['last_error']}"
    assert current_outages(h.config) == []
    assert "outage over" in h.lines[-1]


def test_a_restart_tells_the_outages_cluster_once(tmp_path, monkeypatch):
    """A failure line that names the cluster is told as it is; one that does not is told with
    the cluster; another alias that merely begins with it (B2) is not the cluster."""
    h = Harness(tmp_path, monkeypatch)
    h.query.fail(text_of(BrokerError("target cluster B (bootstrap ...) timed out", transient=True)))
    h.watch()
    outage = h.sup.outages["replication of A->B"]
    assert h.told[-1].why == f"an outage: {outage.reason}"
    assert outage.reason.startswith("BrokerError: target cluster B (bootstrap")
    outage.reason = "BrokerError: target cluster B2 (bootstrap ...) timed out"
    assert outage.restart().why == f"an outage of target cluster B: {outage.reason}"


def test_an_outage_does_not_end_when_the_ledger_only_answers_again(tmp_path, monkeypatch):
    """Two brokers of B cut off: at the restart the ledger on B did not answer (-1), and once
    it did, the outage ended 5 s in, though B refused writes 70 s more. Only the ledger moving
    past what it first read ends it."""
    h = Harness(tmp_path, monkeypatch)
    delivered = [-1]  # the target's ledger does not answer yet
    h.unit = Unit(h.unit.name, h.ctx, lambda: h.query, h.unit.restart, lambda _q: delivered[0])
    h.query.fail(text_of(BrokerError("committing to B failed: Timed out", transient=True)))
    h.watch()
    assert h.restarts == 1 and h.sup.outages
    h.watch()
    assert h.sup.outages, "the ledger still does not answer"
    delivered[0] = 500  # it answers: what the query had copied before the outage
    h.watch()
    h.watch()
    assert h.sup.outages, "the ledger answered, but nothing was copied since the restart"
    delivered[0] = 501
    h.watch()
    assert not h.sup.outages
    assert [e["type"] for e in h.published] == ["outage_started", "outage_ended"]


def test_a_terminal_failure_stops_at_once(tmp_path, monkeypatch):
    h = Harness(tmp_path, monkeypatch)
    h.query.fail(text_of(RecordTooLargeError("record t[0] offset 3 is larger than B accepts")))
    with pytest.raises(MirrorRuntimeError, match=r"(?s)terminal: .*larger than B accepts"):
        h.watch()
    assert h.restarts == 0


def test_an_outage_longer_than_the_limit_fails_with_a_clear_message(tmp_path, monkeypatch):
    h = Harness(tmp_path, monkeypatch, **{"mirror.outage.max.seconds": "5"})
    h.query.fail(text_of(BrokerError("listing topics failed", transient=True)))
    h.watch()
    h.query.fail(text_of(BrokerError("listing topics failed", transient=True)))
    h.sup.outages["replication of A->B"].started -= 6
    with pytest.raises(
        MirrorRuntimeError,
        match=r"target cluster B \(bootstrap 127.0.0.1:10\) "
        r"still failing after \d+s of retries \(mirror.outage.max.seconds = 5\)",
    ):
        h.watch()  # fmt: skip


def test_admin_errors_name_the_cluster_from_the_flow_client_config(tmp_path):
    from mirror_lib.kafka.admin import where_from

    ctx = FlowContext.create(config(tmp_path), "A->B")
    assert where_from(ctx.client("target", "admin")) == "target cluster B (bootstrap 127.0.0.1:10)"
    assert where_from(ctx.client("source", "consumer")) == (
        "source cluster A (bootstrap 127.0.0.1:9)"
    )
    assert where_from({"bootstrap.servers": "h:1"}) == "cluster at bootstrap h:1"


def test_mirror_status_shows_what_a_live_run_waits_for(tmp_path, monkeypatch):
    from mirror_lib.app.status import FlowHealth, _add_outages, format_status

    h = Harness(tmp_path, monkeypatch)
    h.query.fail(text_of(BrokerError("listing topics failed", transient=True)))
    h.watch()
    row = FlowHealth("A->B", None, 0, None, None, None, None, None, None)
    _add_outages(h.config, [row])
    assert row.outage is not None
    assert "replication of A->B waiting for target cluster B (bootstrap 127.0.0.1:10)" in row.outage
    assert "A->B: outage: replication of A->B waiting" in format_status([row])
    assert row.outage_cause == "unreachable" and "cause unreachable" in row.outage
    h.sup.close()
    _add_outages(h.config, [row])
    assert row.outage is None


@pytest.mark.parametrize(
    ("text", "answers", "cause"),
    [
        (
            "target cluster B (...) did not acknowledge records in 30s: A.t[2] has 1 in-sync "
            "replica, fewer than its min.insync.replicas = 2, so the target refuses its writes "
            "(NOT_ENOUGH_REPLICAS) until a replica returns",
            True,
            "not_enough_replicas",
        ),
        ("target cluster B did not acknowledge records in 30s", True, "timed_out"),
        (
            "target cluster B did not acknowledge records in 30s: A.t[0] has no leader",
            True,
            "no_leader",
        ),
        ("target cluster B refuses writes: A.t[0], A.t[1] have no leader", True, "no_leader"),
        ("listing topics on source cluster A failed: _TRANSPORT", False, "unreachable"),
        ("init_transactions on target cluster B did not return within 75s", True, "coordinator"),
        ("something new", True, "other"),
    ],
)
def test_an_outage_has_a_cause_an_alert_can_use(text, answers, cause):
    assert supervise.outage_cause(text, answers) == cause


def test_a_later_diagnosis_of_the_target_replaces_the_first_cause(tmp_path, monkeypatch):
    """The copy task gives up on unacknowledged records before the controllers fence the cut
    brokers; at a later retry the target's metadata shows NOT_ENOUGH_REPLICAS, and the outage,
    ``mirror status`` and its ended event say so."""
    h = Harness(tmp_path, monkeypatch)
    h.down.clear()  # B answers, but refuses writes
    seen: list[str | None] = [None]
    monkeypatch.setattr(supervise, "target_refusal", lambda _ctx: seen[0])
    first = "target cluster B did not acknowledge records in 30s: b:2, b:3 did not answer"
    h.query.fail(text_of(BrokerError(first, transient=True)))
    h.watch()
    outage = h.sup.outages["replication of A->B"]
    assert outage.cause == "timed_out" and "did not answer" in outage.reason
    seen[0] = (
        "target cluster B (bootstrap 127.0.0.1:10) refuses writes: __transaction_state[0] has 1 "
        "in-sync replica, fewer than its min.insync.replicas = 2, so the target refuses its "
        "writes (NOT_ENOUGH_REPLICAS) until a replica returns"
    )
    spark_text = (
        "Job aborted due to stage failure: ...\ncimpl.KafkaException: KafkaError{"
        "code=COORDINATOR_NOT_AVAILABLE,val=15}"
    )
    h.query.fail(spark_text)
    outage.next_retry = 0
    h.watch()
    assert outage.cause == "not_enough_replicas" and outage.reason == seen[0]
    # the restart tells the diagnosis, which names the cluster, once
    assert h.told[-1].why == f"an outage: {seen[0]}"
    (shown,) = current_outages(h.config)
    assert shown["cause"] == "not_enough_replicas"
    seen[0] = None  # the diagnosis sees nothing: the failure's own line, not Spark's first
    h.query.fail(spark_text)
    outage.next_retry = 0
    h.watch()
    assert outage.reason == "KafkaException: KafkaError{code=COORDINATOR_NOT_AVAILABLE,val=15}"
    assert outage.cause == "coordinator"


def test_the_diagnosed_cause_is_in_mirror_status_while_the_restart_runs(tmp_path, monkeypatch):
    """A restart may take long in an outage (or fail): ``mirror status`` names the cause the
    diagnosis found before the restart begins, not the failure's first words."""
    h = Harness(tmp_path, monkeypatch)
    h.down.clear()  # B answers, but refuses writes
    refusal = (
        "target cluster B (bootstrap 127.0.0.1:10) refuses writes: A.t[0] has 1 in-sync "
        "replica, fewer than its min.insync.replicas = 2, so the target refuses its writes "
        "(NOT_ENOUGH_REPLICAS) until a replica returns"
    )
    monkeypatch.setattr(supervise, "target_refusal", lambda _ctx: refusal)
    shown: list[str] = []

    def restart(_after: QueryRestart) -> FakeQuery:
        shown.extend(o["cause"] for o in current_outages(h.config))
        raise BrokerError("reading the ledger on target cluster B timed out", transient=True)

    h.unit = Unit(h.unit.name, h.ctx, lambda: h.query, restart)
    h.query.fail(text_of(BrokerError("committing to B failed: Timed out waiting", transient=True)))
    h.watch()
    assert shown == ["not_enough_replicas"]
    assert "restart failed" in h.lines[-1]


def test_target_refusal_looks_at_the_flows_remote_topics_and_the_coordinators_logs(
    tmp_path, monkeypatch
):
    """Two brokers of three cut off: the transaction log falls below its min.insync.replicas,
    init_transactions answers COORDINATOR_NOT_AVAILABLE, and only the metadata says why."""
    ctx = FlowContext.create(config(tmp_path), "A->B")
    meta = topics_of(**{
        "A.t": {0: (1, [1, 2])},
        "__transaction_state": {0: (1, [1])},
        "B.elsewhere": {0: (1, [1])},  # another flow's remote topic: not this flow's
        "local": {0: (1, [1])},
    })  # fmt: skip
    target = RecordingAdminOps()
    for topic in meta:
        target.add_topic(topic, 1, {"min.insync.replicas": "2"})
    monkeypatch.setattr(FlowContext, "admin_ops", lambda self, side, timeout_s=None: target)
    answer: list[FakeCluster | None] = [FakeCluster(meta)]
    monkeypatch.setattr(kafka_admin, "first_answer", lambda _conf, _s, _skip=(): (answer[0], []))
    said = supervise.target_refusal(ctx)
    assert target.calls_of("describe_topic_configs") == [(["A.t", "__transaction_state"],)]
    assert said is not None and said.startswith(
        "target cluster B (bootstrap 127.0.0.1:10) refuses writes: "
    )
    assert "__transaction_state[0] has 1 in-sync replica" in said and "A.t[0]" not in said
    meta["__transaction_state"].partitions[0].isrs = [1, 2]
    assert supervise.target_refusal(ctx) is None
    answer[0] = None  # no broker answered: the outage says so already
    assert supervise.target_refusal(ctx) is None
