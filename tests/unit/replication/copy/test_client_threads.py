"""A copy task's librdkafka network threads run at ``mirror.client.threads.nice``: their
busy-wait while the target holds acknowledgements must not starve a broker on the same cores."""

from __future__ import annotations

import multiprocessing
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka as ck
import pytest

from mirror_lib.config.setting_values import int_between
from mirror_lib.errors import ConfigError
from mirror_lib.replication.copy import client_threads
from mirror_lib.replication.copy.client_threads import CHECK_S, ClientThreads

pytestmark = pytest.mark.skipif(not client_threads.THREADS.is_dir(), reason="Linux only")


def _threads() -> dict[int, tuple[str, int]]:
    """This process's threads: tid -> (name, nice)."""
    out = {}
    for entry in os.scandir(client_threads.THREADS):
        tid = int(entry.name)
        try:
            name = (Path(entry.path) / "comm").read_text().strip()
            out[tid] = (name, os.getpriority(os.PRIO_PROCESS, tid))
        except (ProcessLookupError, FileNotFoundError):
            continue
    return out


def _network() -> dict[int, int]:
    """This process's librdkafka network threads: tid -> nice."""
    return {t: nice for t, (name, nice) in _threads().items() if name.startswith("rdk:broker")}


def _looks(threads: ClientThreads, nice: int, start: float = 0.0) -> int:
    """Three looks, one CHECK_S of the loop's clock apart from ``start`` (after any look the
    test made itself), each checking that every network thread that existed (and was named)
    before it is at ``nice`` after it: librdkafka starts and replaces them in the background.
    Returns how many it lowered."""
    lowered, clock, seen = 0, start, 0
    deadline = time.monotonic() + 10
    while seen < 3 and time.monotonic() < deadline:
        existed = _network()
        lowered += threads.lower(clock)
        clock += CHECK_S
        now = _network()
        still = {t: now[t] for t in existed if t in now}
        assert still == dict.fromkeys(still, nice), (still, threads.lowered)
        seen += bool(still)
    assert seen == 3, ("no librdkafka network threads appeared", _threads())
    return lowered


def _isolated(check: Callable[[], None]) -> None:
    """Run ``check`` in a fresh process with one producer of its own: a client another test
    left alive could start a thread that inherits its creator's nice."""
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        pool.apply(check)


_SILENT: list[socket.socket] = []


def _producer() -> ck.Producer:
    """A producer whose threads stay: its broker accepts the connection and never answers. With
    a port that refuses, librdkafka replaces its bootstrap thread twice a second."""
    silent = socket.create_server(("127.0.0.1", 0))
    _SILENT.append(silent)  # open until the process ends
    port = silent.getsockname()[1]
    return ck.Producer({"bootstrap.servers": f"127.0.0.1:{port}", "enable.idempotence": True})


def _lowered_and_nothing_else() -> None:
    own, producer = os.getpriority(os.PRIO_PROCESS, 0), _producer()
    assert _looks(ClientThreads(10), 10) > 0
    others = {t: nice for t, (name, nice) in _threads().items() if not name.startswith("rdk:b")}
    assert threading.get_native_id() in others and set(others.values()) == {own}
    producer.flush(0)


def _once_per_check_interval() -> None:
    producer, threads = _producer(), ClientThreads(10)
    _looks(threads, 10)
    threads.next_check = 5.0
    assert threads.lower(4.9) == 0 and threads.next_check == 5.0
    producer.flush(0)


def _zero_leaves_them_alone() -> None:
    producer = _producer()
    _looks(ClientThreads(0), os.getpriority(os.PRIO_PROCESS, 0))
    producer.flush(0)


def _nicer_is_not_raised() -> None:
    producer = _producer()
    _looks(ClientThreads(12), 12)
    at_12 = [t for t, nice in _network().items() if nice == 12]
    ClientThreads(5).lower(0.0)
    now = _network()
    assert at_12 and all(now[t] == 12 for t in at_12 if t in now), (at_12, now, _threads())
    producer.flush(0)


def test_the_network_threads_are_lowered_and_nothing_else() -> None:
    _isolated(_lowered_and_nothing_else)


def test_a_look_comes_once_per_check_interval() -> None:
    _isolated(_once_per_check_interval)


def test_nice_zero_leaves_the_threads_alone() -> None:
    _isolated(_zero_leaves_them_alone)


def test_a_thread_already_nicer_is_not_raised() -> None:
    _isolated(_nicer_is_not_raised)


def _a_thread_that_ends_mid_look_is_skipped() -> None:
    producer, threads = _producer(), ClientThreads(10)
    real, calls = Path.read_text, []

    def ended_once(path: Path, *args: object, **kwargs: object) -> str:
        calls.append(path)
        if len(calls) == 1:
            raise FileNotFoundError(path)  # the thread ended between the listing and the read
        return real(path, *args, **kwargs)  # type: ignore[arg-type]

    deadline = time.monotonic() + 10
    while not _network() and time.monotonic() < deadline:
        time.sleep(0.01)
    Path.read_text = ended_once  # type: ignore[method-assign]
    try:
        threads.lower(0.0)
    finally:
        Path.read_text = real  # type: ignore[method-assign]
    assert calls and not threads.failed, (calls, threads.failed)
    # the thread skipped is lowered at the next look, one CHECK_S after the first
    _looks(threads, 10, start=CHECK_S)
    producer.flush(0)


def test_a_thread_that_ends_during_a_look_does_not_stop_the_lowering() -> None:
    _isolated(_a_thread_that_ends_mid_look_is_skipped)


@pytest.mark.parametrize("raw", ["20", "-1", "ten", ""])
def test_a_nice_out_of_range_names_the_setting(raw: str) -> None:
    with pytest.raises(ConfigError) as err:
        int_between(0, 19)("mirror.client.threads.nice", raw)
    assert "mirror.client.threads.nice" in str(err.value)
    assert "from 0 to 19" in str(err.value)
