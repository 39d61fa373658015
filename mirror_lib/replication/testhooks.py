"""Test-only hooks: let a test land a kill at an exact point (inert unless the env asks).

``MIRROR_TEST_HOLD_BEFORE_COMMIT=<file>``: once this process has passed
``MIRROR_TEST_HOLD_AFTER_COMMITS`` (default 0) commits, :func:`hold_before_commit` creates
``<file>`` (holding its process id, so that a test can find the process, or the executor it
runs in) and blocks until the process is killed: a transaction is then open for sure.
Python workers are not reused (mirror_lib/spark/session.py): each copy task counts its own
commits. With ``MIRROR_TEST_HOLD_TOPIC=<remote topic>`` only transactions that carry records of
that topic count (not, say, one of the heartbeats a run replicates all along).
With ``MIRROR_TEST_HOLD_SECONDS=<seconds>`` it blocks that long instead and then lets
the commit go on, once: a hold finds ``<file>`` there already and does not block again (the
task that replays the slice counts its commits anew). A hold longer than the producer's
``transaction.timeout.ms`` has the broker abort the transaction under the task.

``MIRROR_TEST_HANG_SEND_OFFSETS=<file>``: the first ``send_offsets_to_transaction`` of a
transaction that carries records of ``MIRROR_TEST_HOLD_TOPIC`` (any, unset) blocks forever
(:func:`hang_send_offsets`), as librdkafka's does when the ledger group's coordinator restarts
mid-call; ``<file>`` is created then, and a call that finds it there goes on.

``MIRROR_TEST_END_SLICES_EARLY=1``: every copy task ends its slice before it copies anything
(:func:`end_slice_early`), as a task would whose deliveries never count: ``--once`` must then
fail after its outage limit instead of planning slices forever.

``MIRROR_TEST_CLOSING_DELAY_S=<seconds>``: a copy task that reached the end of its slice waits
that long before the commit that closes it (:func:`delay_closing`), as a busy machine can: a
``--once`` run must not stop the query under it.

``MIRROR_TEST_FIRST_HEARTBEAT_DELAY_S=<seconds>``: the heartbeats job waits that long before its
first heartbeat (:func:`delay_first_heartbeat`), as a slow cluster would make it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Collection
from pathlib import Path

HOLD_ENV = "MIRROR_TEST_HOLD_BEFORE_COMMIT"
AFTER_ENV = "MIRROR_TEST_HOLD_AFTER_COMMITS"
SECONDS_ENV = "MIRROR_TEST_HOLD_SECONDS"
TOPIC_ENV = "MIRROR_TEST_HOLD_TOPIC"
HANG_ENV = "MIRROR_TEST_HANG_SEND_OFFSETS"
HEARTBEAT_DELAY_ENV = "MIRROR_TEST_FIRST_HEARTBEAT_DELAY_S"
END_EARLY_ENV = "MIRROR_TEST_END_SLICES_EARLY"
CLOSING_DELAY_ENV = "MIRROR_TEST_CLOSING_DELAY_S"
_commits = 0
_lock = threading.Lock()


def hold_before_commit(topics: Collection[str] = ()) -> None:
    """Called right before a transaction that wrote to the remote ``topics`` commits; blocks
    when the test hook is armed (forever, or ``MIRROR_TEST_HOLD_SECONDS`` once)."""
    global _commits
    path = os.environ.get(HOLD_ENV)
    only = os.environ.get(TOPIC_ENV)
    if not path or (only and only not in topics):
        return
    seconds = os.environ.get(SECONDS_ENV)
    with _lock:
        due = _commits >= int(os.environ.get(AFTER_ENV, "0") or 0)
        _commits += 1
    if not due or (seconds and Path(path).exists()):
        return
    Path(path).write_text(str(os.getpid()))
    if seconds:
        time.sleep(float(seconds))
        return
    while True:  # until the test kills the process
        time.sleep(3600)


def hang_send_offsets(topics: Collection[str] = ()) -> None:
    """Called where ``send_offsets_to_transaction`` runs for a transaction that wrote to the
    remote ``topics``; blocks forever once when the test hook is armed."""
    path = os.environ.get(HANG_ENV)
    only = os.environ.get(TOPIC_ENV)
    if not path or (only and only not in topics):
        return
    with _lock:
        if Path(path).exists():
            return
        Path(path).write_text(str(os.getpid()))
    while True:  # the writer gives this thread up and goes on with a new producer
        time.sleep(3600)


def delay_first_heartbeat() -> None:
    """Called before a heartbeats job's first heartbeat; sleeps when the test hook asks."""
    delay = float(os.environ.get(HEARTBEAT_DELAY_ENV, "0") or 0)
    if delay > 0:
        time.sleep(delay)


def delay_closing() -> None:
    """Called before a copy task's closing commit; sleeps when the test hook asks."""
    delay = float(os.environ.get(CLOSING_DELAY_ENV, "0") or 0)
    if delay > 0:
        time.sleep(delay)


def end_slice_early() -> bool:
    """Whether the test hook asks every copy task to end its slice before copying."""
    return os.environ.get(END_EARLY_ENV) == "1"
