"""A rolling restart of a three-broker cluster during a measured load (``--brokers 3``): the
most common operation on a cluster, done broker by broker while the copy runs."""

from __future__ import annotations

import threading
import time
from typing import Any

from bench.procs import log


class Roll:
    """A rolling restart of a three-broker cluster in a thread, as an operator patching it
    does (:meth:`~mirror_lib.testing.kafka_cluster.KafkaCluster.rolling_restart`), from
    ``lead_s`` after the load starts; when each broker went down and came back in sync.

    A broker started again is a child of this process: its pid joins ``keep``, else the
    reaping of orphans at the end of the run (:func:`bench.measure.reap_all_orphans`)
    SIGKILLs the restarted brokers."""

    def __init__(self, cluster: Any, keep: set[int], lead_s: float = 10.0) -> None:
        self.cluster, self.keep, self.lead_s = cluster, keep, lead_s
        self.events: list[tuple[str, int, float]] = []  # (down|back, node, epoch ms)
        self.error: str | None = None
        self._thread = threading.Thread(target=self._run, name="roll", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join(600)

    def _note(self, what: str, node: Any) -> None:
        self.events.append((what, node.node_id, time.time() * 1000))
        if what == "back" and node.process is not None:
            self.keep.add(node.process.pid)

    def _run(self) -> None:
        time.sleep(self.lead_s)
        log(f"rolling restart of {self.cluster.alias}: each broker in turn")
        try:
            self.cluster.rolling_restart(
                on_stop=lambda n: self._note("down", n), on_start=lambda n: self._note("back", n)
            )
        except Exception as e:  # the load goes on; the run is marked failed
            self.error = f"{type(e).__name__}: {e}"
            log(f"rolling restart failed: {self.error}")

    def report(self, load_start_ms: float) -> dict[str, Any]:
        """Seconds from the load's start to each broker's stop and return, and any error."""
        return {
            "events": [(w, n, round((t - load_start_ms) / 1000, 1)) for w, n, t in self.events],
            "error": self.error,
        }
