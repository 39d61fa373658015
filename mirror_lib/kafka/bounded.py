"""librdkafka's transactional calls, with a deadline they keep even when librdkafka does not.

Seen on Apache Kafka 4.3.1 with librdkafka 2.16 (``tests/integration/test_broker_crash.py``):
when the broker of the transaction coordinator is killed and restarted while a transaction is
open, ``send_offsets_to_transaction`` retries its AddOffsetsToTxn, gets the answer, and then
never sends the TxnOffsetCommit nor returns, whatever timeout it was given. A copy task blocked
there copies nothing more and reports nothing: the run stalls in silence. So each such call runs
on a helper thread and is waited for at most its own timeout plus :data:`GRACE_S`; past that a
transient :class:`~mirror_lib.errors.BrokerError` ends the slice, and the producer is never used
again (the call's thread is left behind, blocked, as a daemon). The next slice's
``init_transactions`` on the same ``transactional.id`` fences it and aborts its transaction, and
the ledger replays exactly what was not committed.

A caller that can replace the producer at once (a copy task's writer, exactly once:
:meth:`~mirror_lib.replication.copy.commit_strategies.ExactlyOnce.renew`) gives a short
``hang_s`` instead: in a rolling restart of the target that call hung until the slice ended, 75 s,
each time the ledger group's coordinator was the broker being restarted (librdkafka issues 5456
and 5511).

The deadline counts from the call's start, not from the end of what the caller waits for
meanwhile (the target's acknowledgements): in a rolling restart of three brokers the wait for
acknowledgements took about 5 s while a leader moved, the call hung from its start, and it got
3.8 s more before it counted as hung. Once ``meanwhile`` returns, a call past its deadline still
gets :data:`AFTER_MEANWHILE_S`: a broker answers one connection's requests in order, so the call
may have waited behind the very requests ``meanwhile`` waited for.

A short ``hang_s`` is still a guess that a busy machine may outlast, so callers lengthen it with
how slow such calls were lately. A caller that can see why a call cannot return gives a
:class:`HangCause`: asked once the call has run its ``after_s``, a reason it names makes the
call hung then, whatever ``hang_s`` says. In a rolling restart a call that hung while the
ledger group's coordinator had left the cluster was given 14.1 s, five times a slow call before
it, and the copy stood 23.4 s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from mirror_lib.errors import HungCallError

T = TypeVar("T")

#: Seconds a call may run past the timeout it was given before it counts as hung.
GRACE_S = 15.0
#: Seconds a call still gets once ``meanwhile`` returned, though its deadline has passed.
AFTER_MEANWHILE_S = 1.0


@dataclass(frozen=True)
class HangCause:
    """What a caller sees of why a call cannot return: ``look``, asked once the call has run
    ``after_s``, names the reason, or None."""

    after_s: float
    look: Callable[[], str | None]


def bounded(
    call: Callable[[], T],
    timeout_s: float,
    what: str,
    meanwhile: Callable[[], object] | None = None,
    hang_s: float | None = None,
    cause: HangCause | None = None,
) -> T:
    """Run ``call`` (a transactional producer call given ``timeout_s`` itself) and return its
    result or raise its error; raise :class:`~mirror_lib.errors.HungCallError` naming ``what``
    if it has not returned within ``hang_s`` (default ``timeout_s + GRACE_S``) of its start, nor
    :data:`AFTER_MEANWHILE_S` after ``meanwhile``, run on the caller's thread while ``call``
    runs (its error is raised as it is); or sooner, when ``cause`` names a reason it cannot
    return."""
    outcome: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc
        finally:
            done.set()

    started = time.monotonic()
    threading.Thread(target=run, name=f"bounded {what}", daemon=True).start()
    limit = timeout_s + GRACE_S if hang_s is None else hang_s
    not_before = started  # and once meanwhile returned, AFTER_MEANWHILE_S after that
    if meanwhile is not None:
        meanwhile()
        not_before = time.monotonic() + min(limit, AFTER_MEANWHILE_S)

    def returned_by(deadline: float) -> bool:
        return done.wait(max(max(deadline, not_before) - time.monotonic(), 0.0))

    reason = None
    if cause is not None and cause.after_s < limit and not returned_by(started + cause.after_s):
        reason = cause.look()
    if (reason is not None and not done.is_set()) or not returned_by(started + limit):
        waited = time.monotonic() - started
        if reason is None:
            why = "(librdkafka can hang there when a coordinator's broker restarts mid-call)"
        else:
            why = f"while {reason} (librdkafka can wait there for a coordinator that left)"
        raise HungCallError(
            f"{what} did not return within {waited:.1f}s {why}; this producer is abandoned, "
            "and a new one fences it and replays what was not committed",
            cause_named=reason is not None,
        )
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
