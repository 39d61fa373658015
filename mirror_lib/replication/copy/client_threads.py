"""A copy task's Kafka client threads at a lower CPU priority (``mirror.client.threads.nice``).

librdkafka's idempotent producer (every producer of ours but exact mode's, transactional ones
included) busy-waits while the target holds its acknowledgements: it counts a partition's
*records* in flight against its limit of five *requests* in flight, so it may not send more,
and wakes again at once because the waiting records' ``linger.ms`` has passed. During a
broker's GC pause or a leader change each producer's network thread takes a whole core. Where
the brokers share the machine that starves their collector: under the bench's steady load a
target broker's 20 ms young collection took up to 650 ms, and every record in flight waited
(docs/how-it-works.md#client-threads). At a lower priority the spin takes only CPU nobody else
wants; the copy loop itself, and the other processes of the job, keep theirs.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

__all__ = ["CHECK_S", "ClientThreads"]

log = logging.getLogger(__name__)

CHECK_S = 1.0  # librdkafka starts a thread per broker as it learns of them: look this often
THREADS = Path("/proc/self/task")  # Linux: one entry per thread, and a thread's nice is its own
NETWORK_THREAD = "rdk:broker"  # librdkafka names each broker's thread rdk:broker<id>


class ClientThreads:
    """Lowers this process's librdkafka network threads to ``nice`` (0: leaves them alone)."""

    def __init__(self, nice: int) -> None:
        self.nice = nice
        self.lowered: set[int] = set()
        self.next_check = 0.0
        self.failed = False

    def lower(self, now: float) -> int:
        """Lower the network threads started since the last look, at most every CHECK_S
        (``now``: ``time.monotonic()``); how many were lowered. A thread already at ``nice``
        or nicer is left as it is; where threads cannot be listed (not Linux) nothing happens."""
        if not self.nice or self.failed or now < self.next_check or not THREADS.is_dir():
            return 0
        self.next_check = now + CHECK_S
        count = 0
        for entry in os.scandir(THREADS):
            tid = int(entry.name)
            if tid in self.lowered:
                continue
            try:
                if not (Path(entry.path) / "comm").read_text().startswith(NETWORK_THREAD):
                    continue  # named when it starts: looked at again next time
                if os.getpriority(os.PRIO_PROCESS, tid) < self.nice:
                    os.setpriority(os.PRIO_PROCESS, tid, self.nice)
                    count += 1
            except (ProcessLookupError, FileNotFoundError):
                continue  # it ended meanwhile (librdkafka replaces threads)
            except OSError as exc:  # not allowed here: say so once and stop trying
                log.warning("mirror.client.threads.nice = %d not applied: %s", self.nice, exc)
                self.failed = True
                return count
            self.lowered.add(tid)
        return count
