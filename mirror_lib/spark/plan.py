"""What one :func:`~mirror_lib.spark.runner.run_flows` call runs, decided once: :class:`RunPlan`.

The plan reads the configuration and the call's arguments once: the flows and their contexts,
the read groups (one replication query each), the companion jobs, the clusters whose tables
are materialized and the writer that holds them, the top-level settings (outage limits, the
session a run starts itself: :class:`~mirror_lib.config.global_settings.RunSettings`), the
metrics endpoint and the mode. Every part of the run is built from it, and none reads
those settings again. :meth:`RunPlan.resolve` only decides (bad input fails there);
:meth:`RunPlan.check` then asks the world: a free metrics port, clients that build, clusters
that answer.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from mirror_lib.config.fanout import read_groups
from mirror_lib.config.global_settings import RunSettings
from mirror_lib.config.model import MirrorConfig
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.client_check import check_client_builds
from mirror_lib.kafka.reach import check_client_addresses, check_flow_clusters
from mirror_lib.replication.companions.threads import PARTS
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.read_group import ReadGroup
from mirror_lib.replication.metrics.metrics_endpoint import MetricsEndpoint, metrics_endpoint
from mirror_lib.spark.session import run_conf
from mirror_lib.tables.location import chosen_writer


@dataclass(frozen=True)
class RunPlan:
    """What one run runs, resolved before anything starts (see the module docstring)."""

    config: MirrorConfig
    contexts: tuple[FlowContext, ...]  # the flows asked for, in order
    groups: tuple[ReadGroup, ...]  # one replication query each; empty without "replication"
    companions: tuple[tuple[FlowContext, str], ...]  # (flow, "checkpoints" or "heartbeats")
    tables: dict[str, FlowContext]  # cluster -> the flow its materialization's outages name
    parts: tuple[str, ...]
    once: bool
    duration_s: float | None
    timeout_s: float | None
    settings: RunSettings  # outage limits, the tables, the session a run starts
    endpoint: MetricsEndpoint | None
    session_conf: dict[str, str]  # a session the run starts gets this conf (master, --once's)

    @classmethod
    def resolve(
        cls,
        config: MirrorConfig,
        flow_names: Collection[str] | None = None,
        *,
        parts: Collection[str] = PARTS,
        once: bool = False,
        duration_s: float | None = None,
        timeout_s: float | None = None,
        metrics_port: int | None = None,
        metrics_host: str | None = None,
    ) -> RunPlan:
        """The plan of the given (default: all enabled) flows; bad input fails here."""
        names = list(flow_names or [f.name for f in config.enabled_flows()])
        if not names:
            raise config.no_flow_enabled()  # names a line whose cluster is not in clusters
        unknown = sorted(set(parts) - set(PARTS))
        if unknown or not parts:
            raise ConfigError("parts", ",".join(unknown or parts), "any of " + ", ".join(PARTS))
        settings = RunSettings.of(config.properties, once)
        contexts = tuple(FlowContext(config, config.flow(name)) for name in names)
        by_name = {c.flow.name: c for c in contexts}
        groups: tuple[ReadGroup, ...] = ()
        if "replication" in parts:
            for ctx in contexts:
                if not ctx.flow.enabled:
                    raise ConfigError(f"{ctx.flow.name}.enabled", "false", "true to replicate it")
            flows = read_groups(c.flow for c in contexts)  # fan-out flows share one query
            groups = tuple(ReadGroup(tuple(by_name[f.name] for f in g)) for g in flows)
        companions: list[tuple[FlowContext, str]] = []
        if not once:  # --once runs one round of each at its end, for its own flows
            # as in MM2, heartbeats run for every pair with emit.heartbeats.enabled (default
            # true), so that a flow's source has a heartbeats topic to replicate
            companions += [(c, "checkpoints") for c in contexts if c.settings.emit_checkpoints]
            companions += [
                (by_name.get(f.name) or FlowContext(config, f), "heartbeats")
                for f in config.heartbeat_flows()
            ]
        tables: dict[str, FlowContext] = {}
        if "tables" in parts and settings.tables:  # the targets of the enabled flows
            for cluster in sorted({f.target for f in config.enabled_flows()}):
                flow = next((f for f in config.flows if f.target == cluster), config.flows[0])
                tables[cluster] = by_name.get(flow.name) or FlowContext(config, flow)
        return cls(
            config=config,
            contexts=contexts,
            groups=groups,
            companions=tuple((c, job) for c, job in companions if job in parts),
            tables=tables,
            parts=tuple(parts),
            once=once,
            duration_s=duration_s,
            timeout_s=timeout_s,
            settings=settings,
            # None: no endpoint
            endpoint=metrics_endpoint(config.properties, metrics_port, metrics_host),
            session_conf=run_conf(settings.spark_master, once),
        )

    def check(self) -> None:
        """What the run needs of the world, before anything starts: the metrics port is free,
        librdkafka builds every client (nothing connects), every cluster answers and accepts
        the logins, and a role's own ``bootstrap.servers`` reach the same cluster."""
        if self.endpoint is not None:
            self.endpoint.check_free()
        names = self.names
        check_client_builds(self.config, names, resolve=True)
        check_flow_clusters(self.config, names)
        check_client_addresses(self.config, names)

    @property
    def names(self) -> list[str]:
        """The flows of the run, ``A->B``, in order."""
        return [c.flow.name for c in self.contexts]

    @property
    def mode(self) -> str:
        """How the run ends, for its events: ``once``, ``continuous`` or ``for <n>s``."""
        if self.once:
            return "once"
        return "continuous" if self.duration_s is None else f"for {self.duration_s:g}s"

    def tables_writer(self, spark: Any) -> str:
        """``delta-rs`` or ``spark``: who writes the run's tables over ``spark``, the run's
        session (``delta-rs`` when the run materializes none)."""
        return chosen_writer(spark, self.settings.tables_writer) if self.tables else "delta-rs"
