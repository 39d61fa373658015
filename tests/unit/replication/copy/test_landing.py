"""When a commit's missing acknowledgements are taken as held on a lost connection
(``hung_error``, the rule behind
:meth:`~mirror_lib.replication.copy.landing.Lander.acknowledge` renewing the producer)."""

from __future__ import annotations

import time

from mirror_lib.replication.copy.landing import MOVED_GRACE_S, hung_error
from mirror_lib.replication.copy.target_producer import Trouble

WHERE = "target cluster B (b:1)"


def test_nothing_is_hung_before_its_time():
    now = time.monotonic()
    assert hung_error(WHERE, 10, None, now - 1, None, None) is None
    assert hung_error(WHERE, 10, None, now - 1, 5.0, None) is None
    moved = Trouble((), lost=(2,))
    assert hung_error(WHERE, 10, moved, now - 1, None, now) is None


def test_a_broker_that_left_holds_what_it_did_not_acknowledge_after_a_grace():
    now = time.monotonic()
    moved = Trouble((), lost=(2,))
    error = hung_error(WHERE, 10, moved, now - 3, None, now - MOVED_GRACE_S - 0.1)
    assert error is not None
    assert str(error).startswith(f"{WHERE} acknowledged none of 10 records for 3s; ")
    assert "held on a connection to the broker that left" in str(error)


def test_acknowledgements_stuck_while_every_partition_is_in_sync_name_the_silent_address():
    now = time.monotonic()
    silent = Trouble((), silent=("127.0.0.1:9093",))
    error = hung_error(WHERE, 4, silent, now - 6, 5.0, None)
    assert error is not None
    assert "none of 4 records for 5s although its metadata shows every partition" in str(error)
    assert "(127.0.0.1:9093 did not answer)" in str(error)
