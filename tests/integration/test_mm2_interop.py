"""MirrorMaker 2 side by side with us, on real Kafka (issue 41).

Two single-node clusters A and B and one real MirrorMaker 2 (dedicated mode, Apache Kafka's
own jars) for the whole module. MM2 replicates A->B with the aliases ``A``/``B``; our flow
replicates the same source topic between the same brokers under the aliases ``C``/``D``
(``C.bootstrap.servers`` is A's), so each writes its own remote topic and internal topics
(``A.orders`` / ``C.orders``, ``A.checkpoints.internal`` / ``C.checkpoints.internal``) and
neither reads the other's. MirrorMaker 2's own Java code is the judge: ``RemoteClusterUtils``
and the ``OffsetSync``/``Checkpoint``/``Heartbeat`` deserializers, compiled at test time
(tests/helpers/java).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from mirror_lib.config.parse import parse_config
from mirror_lib.mm2.formats import Checkpoint, Heartbeat, OffsetSync
from mirror_lib.replication.migration.failover import translate_group
from mirror_lib.testing.failover import (
    GROUPS,
    PARTITIONS,
    TOPIC,
    DataSet,
    client,
    failover_figures,
    make_dataset,
    mm2_properties,
    mm2_settled,
    mm2_syncs,
    ours_properties,
)
from mirror_lib.testing.kafka_broker import start_kafka, stop_kafka
from mirror_lib.testing.kafka_io import Record, commit_group, consume_all, create_topic
from mirror_lib.testing.mm2 import Mm2Process, start_mm2
from tests.helpers import waiting
from tests.helpers.mirror_cli import run_mirror
from tests.helpers.mm2_java import Mm2Java
from tests.helpers.mm2_models import OffsetSyncStore
from tests.integration.conftest import metrics_events, write_properties

pytestmark = pytest.mark.real_kafka

LOAD_TOPIC = "load"
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("mm2-interop")


@pytest.fixture(scope="module")
def kafka(work: Path) -> Iterator[dict[str, str]]:
    """Clusters A and B: alias -> bootstrap."""
    brokers = start_kafka(("A", "B"), work / "kafka")
    try:
        yield {b.alias: b.bootstrap_servers for b in brokers}
    finally:
        stop_kafka(brokers)


@pytest.fixture(scope="module")
def java(work: Path) -> Mm2Java:
    return Mm2Java(work / "java")


@pytest.fixture(scope="module")
def env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO)}


# --- the data: one topic, groups at random positions -------------------------------------------


@pytest.fixture(scope="module")
def mm2(kafka: dict[str, str], work: Path) -> Iterator[Mm2Process]:
    """Real MM2 replicating A->B; ``orders`` and ``load`` exist before it starts (MM2 looks for
    new topics only every refresh.topics.interval.seconds, 600 s)."""
    create_topic(kafka["A"], TOPIC, PARTITIONS)
    create_topic(kafka["A"], LOAD_TOPIC, 2)
    started = time.monotonic()
    props = mm2_properties(kafka["A"], kafka["B"], LOAD_TOPIC, "mm2-launcher-probe")
    process = start_mm2(props, work / "mm2")
    process.start_seconds = time.monotonic() - started  # type: ignore[attr-defined]
    try:
        yield process
    finally:
        process.stop()


@pytest.fixture(scope="module")
def dataset(kafka: dict[str, str], mm2: Mm2Process) -> DataSet:
    """``orders`` produced while MM2 runs, then every group committed at random positions."""
    return make_dataset(kafka["A"])


@pytest.fixture(scope="module")
def ours(kafka: dict[str, str], dataset: DataSet, work: Path, env: dict[str, str]) -> Path:
    """`mirror run --once` of C->D over the data set; returns its properties file."""
    folder = work / "ours"
    folder.mkdir()
    path = write_properties(
        folder / "mm2.properties", ours_properties(kafka["A"], kafka["B"], str(folder / "state"))
    )
    done = run_mirror(path, env, "--once", timeout_s=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return path


# --- helpers -------------------------------------------------------------------------------------


def wait_until(
    check: Callable[[], Any], timeout_s: float, what: str, detail: Callable[[], str] | None = None
) -> Any:
    """:func:`tests.helpers.waiting.wait_for`, looking every 0.5 s (each look reads a topic)."""
    return waiting.wait_for(check, timeout_s, what, poll_s=0.5, detail=detail)


def expected_translation(dataset: DataSet, remote: list[Record]) -> dict[tuple[int, int], int]:
    """Exact answer per (partition, upstream offset): the downstream offset of the first record
    at or after it, matched by value (unique); the remote end when there is none."""
    where = {r.value: r.offset for r in remote}
    out: dict[tuple[int, int], int] = {}
    for p in range(PARTITIONS):
        rows = dataset.partition(p)
        end = max((r.offset for r in remote if r.partition == p), default=-1) + 1
        for offsets in dataset.committed.values():
            c = offsets[p]
            nxt = next((r for r in rows if r.offset >= c), None)
            out[(p, c)] = where[nxt.value] if nxt is not None else end
    return out


def decode_all(bootstrap: str, topic: str, kind: type) -> list[dict[str, Any]]:
    """Our own decoding of every record of ``topic``, in the fields Mm2Decode prints."""
    out = []
    for r in consume_all(bootstrap, topic):
        d = kind.decode(r.key, r.value)
        if kind is OffsetSync:
            row = {"topic": d.topic, "partition": d.partition, "upstream": d.upstream_offset,
                   "downstream": d.downstream_offset}  # fmt: skip
        elif kind is Checkpoint:
            row = {"group": d.group, "topic": d.topic, "partition": d.partition,
                   "upstream": d.upstream_offset, "downstream": d.downstream_offset,
                   "metadata": d.metadata}  # fmt: skip
        else:
            row = {"source": d.source_cluster_alias, "target": d.target_cluster_alias,
                   "timestamp": d.timestamp_ms}  # fmt: skip
        out.append({"offset": r.offset, **row})
    return out


# --- 1. the launcher -----------------------------------------------------------------------------


def test_launcher_runs_real_mm2_until_it_replicates(kafka: dict[str, str], mm2: Mm2Process):
    assert mm2.is_running()
    assert mm2.log_count("Kafka MirrorMaker started") == 1
    assert mm2.log_count("Starting task MirrorSourceConnector-0") >= 1
    # a second probe goes through the running MM2 as well
    assert mm2.wait_replicating("A->B", timeout_s=60) < 60
    # and we take the very same mm2.properties (Connect's worker settings are named, not refused)
    config = parse_config(mm2.properties)
    assert [f.name for f in config.enabled_flows()] == ["A->B"]
    print(f"MM2 started and replicated its probe in {mm2.start_seconds:.1f}s")  # type: ignore[attr-defined]


# --- 2. we write, MM2 reads ----------------------------------------------------------------------


def test_mm2_reads_what_we_write(kafka: dict[str, str], java: Mm2Java, dataset: DataSet, ours):
    remote = consume_all(kafka["B"], f"C.{TOPIC}")
    exact = expected_translation(dataset, remote)
    want = {
        g: {(f"C.{TOPIC}", p): exact[(p, c)] for p, c in offsets.items()}
        for g, offsets in dataset.committed.items()
    }
    # RemoteClusterUtils.translateOffsets over our checkpoints: our exact translations
    assert java.translate(kafka["B"], "C", GROUPS) == want
    assert client(kafka["B"]).consumer_offsets_all_groups("C", groups=GROUPS) == want
    # MM2's deserializers parse every record of our internal topics, as we do
    for topic, kind, cls in (
        ("mm2-offset-syncs.C.internal", "offset-sync", OffsetSync),
        ("C.checkpoints.internal", "checkpoint", Checkpoint),
        ("heartbeats", "heartbeat", Heartbeat),
    ):
        read = java.decode(kafka["B"], topic, kind)
        assert read["failed"] == [], f"{topic}: MM2 cannot parse {read['failed'][:3]}"
        assert read["records"] > 0, topic
        # heartbeats go on being written: compare what both have read
        assert read["decoded"] == decode_all(kafka["B"], topic, cls)[: read["records"]], topic


# --- 3. MM2 writes, we read ----------------------------------------------------------------------


def conservative(kafka: dict[str, str], dataset: DataSet) -> dict[tuple[str, int, int], int]:
    """MM2's rule as our model has it (tests/helpers/mm2_models.py), over MM2's own syncs:
    ``{(topic, partition, upstream): downstream}`` for every group's committed offset."""
    store = OffsetSyncStore(initialization_must_read_to_end=False)
    store.start()
    for s in mm2_syncs(kafka["A"]):
        store.handle_sync(s["partition"], s["upstream"], s["downstream"])
    return {
        (TOPIC, p, c): store.translate_downstream(p, c)
        for offsets in dataset.committed.values()
        for p, c in offsets.items()
    }


def tables_checkpoints(root: Path) -> dict[str, dict[tuple[str, int], int]]:
    """The latest checkpoint per group and partition in the ``checkpoints`` Delta table."""
    from deltalake import DeltaTable

    rows = DeltaTable(str(root / "tables" / "checkpoints")).to_pyarrow_table().to_pylist()
    out: dict[str, dict[tuple[str, int], int]] = {}
    for row in sorted(rows, key=lambda r: r["kafka_offset"]):
        if row["source"] == "A" and row["group_id"] in GROUPS:
            out.setdefault(row["group_id"], {})[(row["topic"], row["partition"])] = row[
                "downstream_offset"
            ]
    return out


def view_rows(spark: Any, sql: str) -> dict[str, dict[tuple[str, int], int]]:
    out: dict[str, dict[tuple[str, int], int]] = {}
    for row in spark.sql(sql).collect():
        if row["group_id"] in GROUPS:
            out.setdefault(row["group_id"], {})[(row["topic"], row["partition"])] = row["o"]
    return out


def test_we_read_what_mm2_writes(
    kafka: dict[str, str],
    java: Mm2Java,
    dataset: DataSet,
    mm2: Mm2Process,
    spark: Any,
    work: Path,
    env: dict[str, str],
):
    wait_until(lambda: mm2_settled(kafka["A"], dataset), 180, "MM2's syncs of the last records")
    # MM2's conservative rule, ours (the model the unit tests hold our syncs to) and MM2's own
    # OffsetSyncStore, over the syncs MM2 wrote: the same answer for every group's offset
    rule = conservative(kafka, dataset)
    assert java.replay(kafka["A"], "mm2-offset-syncs.B.internal", sorted(rule)) == rule
    # MM2's checkpoints, as MM2's client reads them: settled (the same twice running), at or
    # above that rule (a checkpoint never goes back, and earlier stores held finer syncs) and
    # never past the exact answer
    answers: list[dict[str, dict[tuple[str, int], int]]] = [{}]

    def settled() -> bool:
        now = java.translate(kafka["B"], "A", GROUPS)
        done = sum(len(v) for v in now.values()) == len(GROUPS) * PARTITIONS
        same, answers[0] = now == answers[0], now
        return done and same

    wait_until(
        settled, 90, "MM2's checkpoints of every group to settle", detail=lambda: str(answers[0])
    )
    want = answers[0]
    exact = expected_translation(dataset, consume_all(kafka["B"], f"A.{TOPIC}"))
    for g, offsets in dataset.committed.items():
        for p, c in offsets.items():
            assert rule[(TOPIC, p, c)] <= want[g][(f"A.{TOPIC}", p)] <= exact[(p, c)], (g, p, c)
    # MirrorClient, per group and in one scan
    mm2_client = client(kafka["B"])
    assert {g: mm2_client.translate_offsets("A", g) for g in GROUPS} == want
    assert mm2_client.consumer_offsets_all_groups("A", groups=GROUPS) == want
    # `mirror translate` on MM2's own mm2.properties (run where MM2 left no state: a new dir)
    folder = work / "read-mm2"
    folder.mkdir()
    props = {**mm2.properties, "mirror.state.dir": str(folder / "state")}
    config = parse_config(props)
    assert {
        g: {(r.topic, r.partition): r.offset for r in translate_group(config, g, "A", "B")}
        for g in GROUPS
    } == want
    path = write_properties(folder / "mm2.properties", props)
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", "translate", str(path), "--group", GROUPS[1],
         "--source", "A", "--target", "B", "--json"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert {(r["topic"], r["partition"]): r["offset"] for r in json.loads(done.stdout)} == want[
        GROUPS[1]
    ]
    # the Delta tables materialized from MM2's topics, and the SQL views over them
    from mirror_lib.spark.views import create_views
    from mirror_lib.tables.catch_up import materialize_once

    assert materialize_once(config, "B") > 0
    assert materialize_once(config, "A") > 0  # MM2's offset syncs live on A
    assert tables_checkpoints(folder / "state") == want
    create_views(spark, config, prefix="mm2_")
    latest = "SELECT group_id, topic, partition, downstream_offset AS o FROM mm2_latest_checkpoints"
    assert view_rows(spark, latest + " WHERE source = 'A'") == want
    translation = "SELECT group_id, topic, partition, offset AS o FROM mm2_offset_translation"
    assert view_rows(spark, translation + " WHERE source = 'A'") == want


# --- 5. failover accuracy, measured -------------------------------------------------------------


def test_failover_accuracy_mm2_and_ours(
    kafka: dict[str, str], dataset: DataSet, mm2: Mm2Process, ours: Path, work: Path,
    record_property: Callable[[str, object], None],
):  # fmt: skip
    wait_until(lambda: mm2_settled(kafka["A"], dataset), 180, "MM2's syncs of the last records")
    figures = failover_figures(kafka["B"], dataset)
    (work / "failover-accuracy.json").write_text(json.dumps(figures, indent=2))
    record_property("failover_accuracy", json.dumps(figures))
    print(f"failover of {len(GROUPS)} groups x {PARTITIONS} partitions: {figures}")
    assert figures["ours"] == {"reread": 0, "skipped": 0, "untranslated": 0,
                               "partitions": len(GROUPS) * PARTITIONS}  # fmt: skip
    assert figures["mm2"]["partitions"] == len(GROUPS) * PARTITIONS


# --- 4. taking over from a running MM2 ----------------------------------------------------------


class Load:
    """A steady producer on ``load`` (both partitions, ~200 records/s) in a thread; values
    ``load-<n>`` are unique, so every record can be found on B."""

    def __init__(self, bootstrap: str, first: int = 0) -> None:
        import threading

        self.producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
        self.first, self.sent = first, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for _ in range(10):
                n = self.first + self.sent
                self.producer.produce(LOAD_TOPIC, value=f"load-{n}".encode(),
                                      key=str(n % 7).encode(), partition=n % 2)  # fmt: skip
                self.sent += 1
            self.producer.poll(0)
            time.sleep(0.05)

    def __enter__(self) -> Load:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(30) == 0


def remote_count(bootstrap: str, topic: str) -> int:
    try:
        return len(consume_all(bootstrap, topic))
    except Exception:  # not there yet
        return 0


def commit_load(bootstrap: str, group: str, offsets: dict[int, int]) -> None:
    commit_group(bootstrap, group, [TopicPartition(LOAD_TOPIC, p, o) for p, o in offsets.items()])


def group_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], 10)
        return {tp.partition: tp.offset for tp in tps}
    finally:
        consumer.close()


def test_taking_over_from_a_running_mm2(
    kafka: dict[str, str], mm2: Mm2Process, java: Mm2Java, work: Path, env: dict[str, str]
):
    a, b, remote = kafka["A"], kafka["B"], f"A.{LOAD_TOPIC}"
    with Load(a) as load:
        wait_until(lambda: remote_count(b, remote) >= 600, 120, "MM2 to copy 600 load records")
        # a group behind, in what MM2 copies: MM2 checkpoints it
        commit_load(a, "grp-behind", {0: 100, 1: 150})
        wait_until(
            lambda: len(java.translate(b, "A", ["grp-behind"])["grp-behind"]) == 2,
            60,
            "MM2's checkpoint of grp-behind",
        )
        behind = java.translate(b, "A", ["grp-behind"])["grp-behind"]
        mm2.kill()  # under load, as a crash or `kill -9` stops it: its last offsets uncommitted
        stopped_at = load.sent
        wait_until(lambda: load.sent >= stopped_at + 200, 30, "the load to go on without MM2")
    assert mm2.log_path.exists() and mm2.log_count("Kafka MirrorMaker started") == 1
    source = consume_all(a, LOAD_TOPIC)
    ends = {p: max(r.offset for r in source if r.partition == p) + 1 for p in (0, 1)}
    commit_load(a, "grp-ahead", ends)  # a group at the end: past where MM2 stopped
    # `mirror run` on MM2's own mm2.properties, in a folder of its own (its state goes to the
    # default ./mirror-state there)
    folder = work / "takeover"
    folder.mkdir()
    path = write_properties(folder / "mm2.properties", mm2.properties)
    done = run_mirror(path, env, "--once", timeout_s=300, cwd=folder)
    assert done.returncode == 0, done.stderr[-3000:]
    # every record of A is on B once, in its order: MM2's copy, then ours
    copied = consume_all(b, remote)
    for p in (0, 1):
        want = [r.value for r in source if r.partition == p]
        got = [r.value for r in copied if r.partition == p]
        missing = set(want) - set(got)
        duplicates = len(got) - len(set(got))
        print(f"take-over {LOAD_TOPIC}[{p}]: {len(want)} records, {len(missing)} missing, "
              f"{duplicates} duplicates")  # fmt: skip
        assert not missing, f"{LOAD_TOPIC}[{p}]: {len(missing)} records missing on B"
        assert duplicates == 0, f"{LOAD_TOPIC}[{p}]: {duplicates} records copied twice"
        assert got == want
    # the boundary came from MM2's state: its last copied record, matched upstream
    takeovers = [e for e in metrics_events(b) if e.get("type") == "takeover"]
    load_takeovers = [e for e in takeovers if e["topic"] == LOAD_TOPIC]
    assert {e["partition"] for e in load_takeovers} == {0, 1}
    assert all(e["mm2_last_upstream"] is not None for e in load_takeovers), load_takeovers
    print("take-over boundaries:", [(e["partition"], e["mm2_committed"],
                                     e["mm2_last_upstream"]) for e in load_takeovers])  # fmt: skip
    # checkpoints carry on: MM2's stands for the group behind, ours is exact for the group
    # ahead, and both read through MM2's own client
    exact = {r.value: r.offset for r in copied}
    after = java.translate(b, "A", ["grp-behind", "grp-ahead"])
    assert after["grp-behind"] == behind
    ends_on_b = {p: max(r.offset for r in copied if r.partition == p) + 1 for p in (0, 1)}
    assert after["grp-ahead"] == {(remote, p): ends_on_b[p] for p in (0, 1)}
    # group offsets on B carry on too (sync.group.offsets.enabled): no jump for consumers on B
    assert group_offsets(b, "grp-ahead", remote, 2) == ends_on_b
    assert exact  # (values are unique: the positions above are the records themselves)
    # `mirror verify` proves the copy from MM2's last record on
    verified = subprocess_json(
        env, folder, "verify", str(path), "--flow", "A->B", "--topics", LOAD_TOPIC, "--json"
    )
    assert verified["ok"] and verified["complete"], verified
    for part in verified["partitions"]:
        boundary = next(e for e in load_takeovers if e["partition"] == part["partition"])
        assert part["upstream_from"] == boundary["mm2_last_upstream"], part


def subprocess_json(env: dict[str, str], cwd: Path, *args: str) -> Any:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "mirror_lib.app.cli", *args],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return json.loads(done.stdout)


# --- 6. handing back to MM2 ----------------------------------------------------------------------


def test_handing_back_to_mm2(
    kafka: dict[str, str], mm2: Mm2Process, work: Path, env: dict[str, str]
):
    """After the take-over: `mirror hand-back --apply` writes MM2's positions where our ledger
    stands, and a new MM2 on the same properties continues there, copying nothing twice."""
    a, b, remote = kafka["A"], kafka["B"], f"A.{LOAD_TOPIC}"
    folder = work / "takeover"  # where the take-over's `mirror run` kept its state
    assert not mm2.is_running()
    offsets_before = {r.key: r.partition for r in consume_all(b, "mm2-offsets.A.internal")}
    rows = subprocess_json(env, folder, "hand-back", "mm2.properties", "--flow", "A->B", "--apply",
                           "--json")  # fmt: skip
    source = consume_all(a, LOAD_TOPIC)
    ends = {p: max(r.offset for r in source if r.partition == p) + 1 for p in (0, 1)}
    load_rows = {r["partition"]: r for r in rows if r["topic"] == LOAD_TOPIC}
    assert {p: r["next_offset"] for p, r in load_rows.items()} == ends
    assert {p: r["mm2_after"] for p, r in load_rows.items()} == {p: e - 1 for p, e in ends.items()}
    # MM2's own keys, on the partitions MM2's producer chose for them
    written = consume_all(b, "mm2-offsets.A.internal")
    for r in written:
        if r.key in offsets_before:
            assert r.partition == offsets_before[r.key], r.key
    with Load(a, first=100_000) as load:
        wait_until(lambda: load.sent >= 300, 30, "300 more records")
    back = start_mm2(mm2.properties, work / "mm2-back")
    try:
        source = consume_all(a, LOAD_TOPIC)
        wait_until(lambda: remote_count(b, remote) >= len(source), 120, "MM2 to copy the rest")
        copied = consume_all(b, remote)
        for p in (0, 1):
            want = [r.value for r in source if r.partition == p]
            got = [r.value for r in copied if r.partition == p]
            assert got == want, f"{LOAD_TOPIC}[{p}]: {len(got) - len(set(got))} duplicates"
    finally:
        back.stop()
