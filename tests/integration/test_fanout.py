"""Fan-out (issue 17): one read of A, written to B and C; each target stays an MM2 flow of its own.

Three brokers: the session's A and B, and C (the session's third broker, or a broker behind a
TCP proxy that the test cuts). Exactly-once is checked on the committed view computed by the raw
reader, never through the test broker's read_committed (it also returns aborted records).
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka.admin import AclOperation
from prometheus_client.parser import text_string_to_metric_families

from mirror_lib.app.status import flow_status
from mirror_lib.config.model import MirrorConfig
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import MirrorRuntimeError
from mirror_lib.replication.context import FlowContext, stable_slot
from mirror_lib.replication.translate import load_segments, translate
from mirror_lib.spark.flow_runner import FlowRunner
from mirror_lib.spark.runner import run_flows
from mirror_lib.tables.catch_up import materialize_once
from mirror_lib.testing.kafka_io import consume_all, create_topic, produce_exact
from tests.helpers.acls import deny_on_topic
from tests.helpers.exactly_once import (
    committed_count,
    committed_rows,
    exactly_once_problems,
    wait_exactly_once,
)
from tests.helpers.faults import ONE_SLOT
from tests.helpers.kafka_raw import committed_records
from tests.helpers.proxy import BLACKHOLE, OPEN, CountingProxy, bootstrap, proxied_broker
from tests.helpers.raw_groups import committed_offsets
from tests.helpers.waiting import wait_for
from tests.integration.conftest import flow_properties, metrics_events
from tests.integration.test_metrics_endpoint import MM2, free_port

GROUP = "A->B,C"


def fanout_properties(
    a: str, b: str, c: str, state_dir: Path, topic: str, **extra: str
) -> dict[str, str]:
    """mm2.properties of A->B and A->C sharing one read of A (only ``topic``)."""
    props = flow_properties(a, b, state_dir, topics=topic)
    props.update({
        "clusters": "A, B, C",
        "C.bootstrap.servers": c,
        "A->C.enabled": "true",
        "mirror.fanout.enabled": "true",
        "tasks.max": "2",  # two slots per target: the ledgers below are read per slot
    })  # fmt: skip
    props.update(extra)
    return props


def records(n: int, partitions: int, tag: str, size: int = 0, start: int = 0) -> list[dict]:
    return [
        {
            "key": f"{tag}-k{i}".encode(),
            "value": f"{tag}-v{i}-".encode() + b"x" * size,
            "partition": i % partitions,
        }
        for i in range(start, start + n)
    ]


def ledger(bootstrap: str, flow: str, remote: str, partitions: int, slots: int) -> dict[int, int]:
    """The flow's delivery ledger on its target, read by its group names
    ``__mirror_ledger.<flow>.<slot>`` over a raw connection (works while a proxy is cut)."""
    out: dict[int, int] = {}
    for slot in range(slots):
        for p, offset in committed_offsets(
            bootstrap, f"__mirror_ledger.{flow}.{slot}", remote, partitions
        ).items():
            out[p] = max(offset, out.get(p, -1))
    return out


def source_ends(bootstrap: str, topic: str) -> dict[int, int]:
    """Next offset per partition of a non-transactional source topic."""
    ends: dict[int, int] = {}
    for r in consume_all(bootstrap, topic):
        ends[r.partition] = r.offset + 1
    return ends


def seconds_until(
    check: Callable[[], bool], timeout_s: float, what: str, alive: Callable[[], None]
) -> float:
    """Seconds until ``check()`` held (:func:`~tests.helpers.waiting.wait_for`)."""
    started = time.monotonic()
    wait_for(check, timeout_s, what, alive, poll_s=0.5)
    return time.monotonic() - started


def run_once(spark, config: MirrorConfig) -> None:
    run_flows(spark, config, once=True, timeout_s=240, report=lambda *_: None)


def test_fanout_delivers_exactly_once_to_b_and_c_each_with_its_own_translation(
    spark, brokers, third_broker, tmp_path, unique_name
):
    topic, remote, partitions, n = unique_name, f"A.{unique_name}", 4, 1200
    create_topic(brokers.source, topic, partitions)
    produce_exact(brokers.source, topic, records(n, partitions, "a"))
    # C's remote topic already holds p + 1 records in partition p (say, of an earlier copy):
    # the same source record lands at other offsets on C than on B, so a target that used the
    # other's offset syncs would translate wrongly.
    before = {p: p + 1 for p in range(partitions)}
    create_topic(third_broker, remote, partitions)
    produce_exact(third_broker, remote, [
        {"key": b"earlier", "value": f"earlier-{p}-{i}".encode(), "partition": p}
        for p, k in before.items() for i in range(k)
    ])  # fmt: skip
    state = tmp_path / "state"
    config = parse_config(
        fanout_properties(brokers.source, brokers.target, third_broker, state, topic)
    )
    run_once(spark, config)

    queries = sorted((state / "flows").glob("*/replication"))
    assert len(queries) == 1, f"one replication query for the group, not one per flow: {queries}"
    assert json.loads((queries[0].parent / "flow.json").read_text())["flow"] == GROUP
    source = consume_all(brokers.source, topic)
    source_rows = committed_rows(brokers.source, topic, partitions)
    ends = source_ends(brokers.source, topic)
    assert sum(ends.values()) == n
    for alias, target, skip in (("B", brokers.target, {}), ("C", third_broker, before)):
        flow = f"A->{alias}"
        committed = committed_records(target, remote, partitions)
        copied = {p: recs[skip.get(p, 0) :] for p, recs in committed.items()}
        problems = exactly_once_problems(
            source_rows, {p: [(r.key, r.value) for r in recs] for p, recs in copied.items()}
        )
        assert not problems, f"{flow}: {problems}"
        down = {(p, r.value): r.offset for p, recs in copied.items() for r in recs}
        indexes = load_segments(FlowContext.create(config, flow))
        wrong = [
            (r.partition, r.offset, translate(indexes, topic, r.partition, r.offset), want)
            for r in source
            if (want := down[(r.partition, r.value)])
            != translate(indexes, topic, r.partition, r.offset)
        ]
        assert not wrong, f"{flow}: (partition, upstream, translated, actual) {wrong[:5]}"
        assert ledger(target, flow, remote, partitions, slots=2) == ends, (
            f"the ledger of {flow} on {alias} equals the source's end offsets"
        )
        events = metrics_events(target)
        batches = [e for e in events if e.get("type") == "batch" and e.get("topic") == topic]
        assert sum(e["records"] for e in batches) == n, (
            f"{alias}'s metrics topic counts every record once, and only its own copies"
        )


def test_healthy_targets_stay_in_the_shared_read_with_a_bound_below_one_read(
    spark, brokers, third_broker, tmp_path, unique_name
):
    """mirror.fanout.max.lag.records bounds how far a target may fall behind; records that
    healthy targets have not acknowledged yet right after one consume call are not lag."""
    topic, remote, partitions, n = unique_name, f"A.{unique_name}", 2, 600
    create_topic(brokers.source, topic, partitions)
    produce_exact(brokers.source, topic, records(n, partitions, "h"))
    props = fanout_properties(
        brokers.source, brokers.target, third_broker, tmp_path / "state", topic,
        # the run fails after 20 s of failing slices instead of the default 120 s
        **{"mirror.fanout.max.lag.records": "50", "mirror.outage.max.seconds": "20"},
    )  # fmt: skip
    run_once(spark, parse_config(props))
    for target in (brokers.target, third_broker):
        wait_exactly_once(brokers.source, topic, target, remote, partitions, 30)


@pytest.mark.parametrize("slots", [ONE_SLOT, 4])
def test_an_unreachable_target_does_not_stop_the_other_and_catches_up_later(
    spark, brokers, tmp_path, unique_name, slots
):
    if os.environ.get("MIRROR_TEST_EXTERNAL_CLUSTERS"):
        pytest.skip("proxy fault tests run on brokers this run starts (not MIRROR_TEST_*)")
    topic, remote, partitions = unique_name, f"A.{unique_name}", 2
    create_topic(brokers.source, topic, partitions)
    produce_exact(brokers.source, topic, records(300, partitions, "u"))
    with proxied_broker("C", tmp_path / "c") as (broker_c, proxy_c):
        c_direct = broker_c.bootstrap_servers  # checks read here, also during the cut
        props = fanout_properties(
            brokers.source, brokers.target, bootstrap(proxy_c), tmp_path / "state", topic,
            **{
                "tasks.max": str(slots),
                # below the 1000 records produced during the cut: C leaves the shared read once
                # they wait for it (the bounded buffer), at the next slice it is left out
                # because it does not answer the planner's probe, and when it is back it starts
                # 1200 behind B and catches up on a consumer of its own
                "mirror.fanout.max.lag.records": "500",
                "mirror.batch.duration.seconds": "10",
            },
        )  # fmt: skip
        runner = FlowRunner.of(spark, parse_config(props), GROUP)
        runner.start()
        try:
            alive = runner.raise_if_failed

            def on_b(count: int) -> Callable[[], bool]:
                return lambda: committed_count(brokers.target, remote, partitions) >= count

            def c_ledger() -> int:
                return sum(ledger(c_direct, "A->C", remote, partitions, slots=slots).values())

            wait_for(on_b(300), 150, "the first 300 records on B", alive)
            wait_for(lambda: c_ledger() >= 300, 60, "the first 300 records on C", alive)
            # asked until it holds: once (CI, 2026-11-24) the runner's first read of C's ledger,
            # right after the raw read above saw 300, still counted C one record short; 40 reads
            # in a row beside busy loops never did again, and the cause was not found. The end of
            # the test still checks each target's ledger and exactly-once.
            wait_for(
                lambda: runner.progress()["lags"] == {"A->B": 0, "A->C": 0},
                30, "progress reports no lag on either target", alive,
            )  # fmt: skip

            def slices() -> int:
                progress = runner.query.lastProgress
                return -1 if progress is None else int(progress["batchId"])

            proxy_c.set_mode(BLACKHOLE)  # C stops answering: connections hang
            cut_during = slices() + 1  # the slice running now (its progress comes at its end)
            produce_exact(brokers.source, topic, records(1000, partitions, "u", start=300))
            took = seconds_until(on_b(1300), 90, "B keeps replicating while C is cut", alive)
            print(f"B had the 1000 records produced during the cut after {took:.1f}s")
            # The slice C was cut in goes on without C; the next one is planned without C (it
            # does not answer the probe).
            took = seconds_until(lambda: slices() > cut_during, 90, "a slice after the cut", alive)
            print(f"a whole slice ran without C {took:.1f}s after the 1000 records")
            produce_exact(brokers.source, topic, records(200, partitions, "u", start=1300))
            took = seconds_until(on_b(1500), 60, "B keeps replicating in later slices", alive)
            print(f"B had the next 200 records after {took:.1f}s")
            assert c_ledger() == 300, "C's lag is in its ledger: 300 of 1500 delivered"
            assert committed_count(c_direct, remote, partitions) == 300
            # what `mirror run` reports per target (progress rows, metrics endpoint): C's ledger
            # cannot be read now, so its last known position counts
            assert runner.progress()["lags"] == {"A->B": 0, "A->C": 1200}

            proxy_c.set_mode(OPEN)
            took = seconds_until(
                lambda: c_ledger() >= 1500, 150, "C catches up after the cut", alive
            )
            print(f"C caught up {took:.1f}s after the proxy was restored")
            for target in (brokers.target, c_direct):
                wait_exactly_once(brokers.source, topic, target, remote, partitions, 30, alive)
            ends = source_ends(brokers.source, topic)
            assert ledger(c_direct, "A->C", remote, partitions, slots=slots) == ends
            assert ledger(brokers.target, "A->B", remote, partitions, slots=slots) == ends
        finally:
            proxy_c.set_mode(OPEN)
            runner.stop()


def fails_with_b_whole(
    spark, brokers, props: dict[str, str], error: str, topic: str, partitions: int
) -> str:
    """Run ``--once`` where C fails for good: the run fails with ``error`` (its text is returned)
    within 50 s, not by the stall watch, and B has every record exactly once. C's metrics topic
    says so as an ``error`` event that names the topic (an alert sees a target left out), and
    ``mirror status`` shows it once C's tables hold it."""
    started = time.monotonic()
    config = parse_config({**props, "mirror.outage.max.seconds": "60"})
    with pytest.raises(MirrorRuntimeError, match=error) as err:
        run_once(spark, config)
    assert time.monotonic() - started < 50, "failed by the stall watch, not at once"
    remote = f"A.{topic}"
    wait_exactly_once(brokers.source, topic, brokers.target, remote, partitions, 30)
    ends = source_ends(brokers.source, topic)
    assert ledger(brokers.target, "A->B", remote, partitions, slots=2) == ends
    third = props["C.bootstrap.servers"]
    told = [e for e in metrics_events(third) if e["type"] == "error" and topic in e["reason"]]
    left_out = {(e["flow"], e["error_type"]) for e in told if e["action"] == "left_out"}
    assert left_out == {("A->C", error)}, told  # besides the run's own error (action failed)
    materialize_once(config, "C", timeout_s=60)
    status = {h.flow: h.error for h in flow_status(config)}
    assert error in (status["A->C"] or ""), status
    return str(err.value)


def test_a_target_that_refuses_a_remote_topic_stops_only_itself(
    spark, brokers, third_broker, tmp_path, unique_name
):
    """C already has the remote topic with 2 of the source's 4 partitions and cannot grow it (an
    ACL denies ALTER; tansu has no CreatePartitions): C is left out of every slice, B gets every
    record, and
    once B has reached the snapshot the ``--once`` run fails naming C's topic, not by the stall
    watch. As MM2, where only the task of A->C fails."""
    topic, remote, partitions, n = unique_name, f"A.{unique_name}", 4, 400
    create_topic(brokers.source, topic, partitions)
    create_topic(third_broker, remote, 2)
    if brokers.real_kafka:
        deny_on_topic(third_broker, remote, AclOperation.ALTER)
    produce_exact(brokers.source, topic, records(n, partitions, "r"))
    props = fanout_properties(brokers.source, brokers.target, third_broker, tmp_path, topic)
    text = fails_with_b_whole(spark, brokers, props, "RemoteTopicError", topic, partitions)
    assert "flow A->C: target cluster C" in text and f"growing {remote} from 2 was refused" in text
    assert committed_count(third_broker, remote, 2) == 0, "nothing was copied to C"


def test_a_record_one_target_refuses_stops_only_that_target(
    spark, brokers, third_broker, tmp_path, unique_name
):
    """C's producer accepts records up to 2,000 bytes (a real case: targets with other limits),
    and one source record has 5,000. C stops at it, B gets every record, and the ``--once`` run
    fails naming C's record once B has reached the snapshot. Before, the group failed at C's
    error, so B stopped too."""
    topic, remote, partitions = unique_name, f"A.{unique_name}", 2
    create_topic(brokers.source, topic, partitions)
    batch = records(200, partitions, "s")
    batch.insert(101, {"key": b"big", "value": b"x" * 5000, "partition": 1})
    produce_exact(brokers.source, topic, batch)
    props = fanout_properties(
        brokers.source, brokers.target, third_broker, tmp_path, topic,
        **{"A->C.producer.message.max.bytes": "2000"},
    )  # fmt: skip
    text = fails_with_b_whole(spark, brokers, props, "RecordTooLargeError", topic, partitions)
    assert "target cluster C" in text and f"{topic}[1]" in text
    big = [r for r in consume_all(third_broker, remote, timeout_s=5) if r.key == b"big"]
    assert big == [], "C never had the record it refuses"


def test_a_slot_where_only_the_refused_target_has_work_ends_the_run_once_b_is_done(
    spark, brokers, third_broker, tmp_path, unique_name
):
    """C replicates a topic B does not, and refuses a record of it; that topic's partition has a
    slot of its own, where C is the only target. Once B is done everywhere, that slot fails with
    C's error. Before, the slot just ended at every slice (it could not know whether B still
    copied in another slot), and the run ended by the stall watch after
    ``mirror.outage.max.seconds`` with a stall error instead of C's."""
    shared = unique_name
    only_c = next(  # a name whose one partition is not in the shared topic's slot
        f"{shared}-c{i}" for i in range(10) if stable_slot(f"{shared}-c{i}", 0, 2)
        != stable_slot(shared, 0, 2)
    )  # fmt: skip
    for topic in (shared, only_c):
        create_topic(brokers.source, topic, 1)
    produce_exact(brokers.source, shared, records(100, 1, "s"))
    batch = records(50, 1, "c")
    batch.insert(20, {"key": b"big", "value": b"x" * 5000, "partition": 0})
    produce_exact(brokers.source, only_c, batch)
    props = fanout_properties(
        brokers.source, brokers.target, third_broker, tmp_path, shared,
        **{"A->C.topics": f"{shared}, {only_c}", "A->C.producer.message.max.bytes": "2000"},
    )  # fmt: skip
    text = fails_with_b_whole(spark, brokers, props, "RecordTooLargeError", shared, 1)
    assert "target cluster C" in text and f"{only_c}[0]" in text
    big = [r for r in consume_all(third_broker, f"A.{only_c}", timeout_s=5) if r.key == b"big"]
    assert big == [], "C never had the record it refuses"


def test_the_source_is_read_once_for_two_targets(
    spark, brokers, third_broker, tmp_path, unique_name
):
    if os.environ.get("MIRROR_TEST_EXTERNAL_CLUSTERS"):
        pytest.skip("counts bytes through a proxy in front of a broker this run starts")
    partitions, n, size = 4, 2000, 4000
    read: dict[int, int] = {}
    with proxied_broker("A", tmp_path / "a", CountingProxy) as (broker_a, proxy_a):
        assert isinstance(proxy_a, CountingProxy)
        for targets in (1, 2):
            topic = f"{unique_name}-{targets}"
            data = records(n, partitions, f"r{targets}", size)
            create_topic(broker_a.bootstrap_servers, topic, partitions)
            produce_exact(broker_a.bootstrap_servers, topic, data)
            props = fanout_properties(
                bootstrap(proxy_a), brokers.target, third_broker, tmp_path / f"state{targets}",
                topic, **({} if targets == 2 else {"A->C.enabled": "false"}),
            )  # fmt: skip
            proxy_a.reset()
            run_once(spark, parse_config(props))
            read[targets] = proxy_a.reset()
            for target in (brokers.target, third_broker)[:targets]:
                assert committed_count(target, f"A.{topic}", partitions) == n
            payload = sum(len(r["key"]) + len(r["value"]) for r in data)
            assert read[targets] >= payload, f"{targets} target(s): A sent less than the data"
    print(f"bytes read from A: one target {read[1]:,}, two targets {read[2]:,}")
    assert read[2] < 1.5 * read[1], (
        f"two targets read {read[2]:,} bytes from A, one target {read[1]:,}: A is read twice"
    )


def test_a_left_out_target_is_counted_on_the_metrics_endpoint_while_b_goes_on(
    spark, brokers, third_broker, tmp_path, unique_name
):
    """A continuous fan-out run with ``--metrics-port``, where C refuses one record for good:
    scraped live, ``mirror_errors_total{flow="A->C",action="left_out"}`` is 1 while B's records
    all count and B's lag is 0, and C's lag stays above 0 (an alert on either sees C stopped)."""
    topic, partitions = unique_name, 2
    create_topic(brokers.source, topic, partitions)
    batch = records(200, partitions, "m")
    batch.insert(101, {"key": b"big", "value": b"x" * 5000, "partition": 1})
    produce_exact(brokers.source, topic, batch)
    port = free_port()
    props = fanout_properties(
        brokers.source, brokers.target, third_broker, tmp_path, topic,
        **{"A->C.producer.message.max.bytes": "2000", "mirror.metrics.port": str(port)},
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}/metrics"

    def samples() -> dict[tuple[str, str], dict[str, float]]:
        """(sample name, flow) -> {source partition or action: value} of this test's topic."""
        out: dict[tuple[str, str], dict[str, float]] = {}
        text = urllib.request.urlopen(url, timeout=10).read().decode()
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                if s.labels.get("source_topic", topic) == topic and "flow" in s.labels:
                    key = s.labels.get("partition") or s.labels.get("action") or ""
                    out.setdefault((s.name, s.labels["flow"]), {})[key] = s.value
        return out

    seen: list[dict] = []

    class Seen(Exception):
        """Ends the run once the endpoint shows both flows' state."""

    def on_progress(_rows: list[dict]) -> None:
        seen.append(samples())
        b_records = seen[-1].get((MM2 + "record_count", "A->B"), {})
        b_lag = seen[-1].get(("mirror_lag_records", "A->B"), {})
        c_errors = seen[-1].get(("mirror_errors_total", "A->C"), {})
        # the counter's sample exists (at 0) before C is left out: wait for its count
        left_out = c_errors.get("left_out", 0)
        if sum(b_records.values()) >= 201 and b_lag and not any(b_lag.values()) and left_out:
            raise Seen

    with pytest.raises(Seen):
        run_flows(
            spark, parse_config(props), duration_s=150, on_progress=on_progress,
            progress_interval_s=1, report=lambda *_: None,
        )  # fmt: skip
    last = seen[-1]
    assert last[("mirror_errors_total", "A->C")] == {"left_out": 1.0}
    assert last[("mirror_errors_total", "A->B")] == {"left_out": 0.0}
    assert last[(MM2 + "record_count", "A->B")] == {"0": 100.0, "1": 101.0}
    assert last[("mirror_lag_records", "A->B")] == {"0": 0.0, "1": 0.0}
    assert last[("mirror_lag_records", "A->C")]["1"] > 0, "C never gets past the big record"
