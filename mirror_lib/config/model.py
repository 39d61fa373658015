"""The typed configuration: clusters, ordered flows ``A->B`` with their resolved
:class:`FlowSettings`, and the state folder - frozen, as
:func:`mirror_lib.config.parse.parse_config` builds it from ``mm2.properties``. Secret
references stay unresolved here (see :mod:`mirror_lib.config.properties`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from mirror_lib.config.properties import BUILTIN_PROVIDERS, ConfigProvider, redact
from mirror_lib.config.settings import FlowSettings
from mirror_lib.errors import ConfigError
from mirror_lib.mm2.policy import ReplicationPolicy, make_policy

ROLES = ("consumer", "producer", "admin")
#: The keys that decide what a flow copies (which flows, topics and groups, and the remote names):
#: an ignored line meant for one of them changes what is copied.
COPY_KEYS = frozenset(
    {
        "enabled",
        "topics",
        "topics.exclude",
        "topics.blacklist",
        "groups",
        "groups.exclude",
        "groups.blacklist",
        "replication.policy.class",
        "replication.policy.separator",
    }
)


class CopyWarning(str):
    """A warning about a line that changes what is copied (a flow whose cluster is not in
    ``clusters``, a typo in a key of :data:`COPY_KEYS`): ``mirror validate`` and ``mirror run``
    show these first. A plain ``str`` everywhere else."""

    __slots__ = ()


@dataclass(frozen=True)
class ClusterConfig:
    """One cluster alias: bootstrap servers and Kafka client properties (passed through as given).

    ``client`` applies to every client; ``consumer``/``producer``/``admin`` override per role.
    Values may be unresolved secret references; ``repr`` never shows secrets.
    """

    alias: str
    bootstrap_servers: str
    client: Mapping[str, str] = field(default_factory=dict)
    consumer: Mapping[str, str] = field(default_factory=dict)
    producer: Mapping[str, str] = field(default_factory=dict)
    admin: Mapping[str, str] = field(default_factory=dict)
    origins: Mapping[str, str] = field(default_factory=dict, repr=False)
    providers: Mapping[str, ConfigProvider] = field(
        default_factory=lambda: dict(BUILTIN_PROVIDERS), repr=False
    )

    def origin(self, section: str, key: str) -> str:
        """The key as the user wrote it for ``key`` of ``section`` (client or a role)."""
        default = f"{self.alias}.{key}" if section == "client" else f"{self.alias}.{section}.{key}"
        return self.origins.get(f"{section}.{key}", default)

    def role_properties(self, role: str) -> dict[str, str]:
        """Raw (unresolved) client properties for ``role``: cluster-level, then role overrides."""
        if role not in ROLES:
            raise ConfigError("role", role, "one of " + ", ".join(ROLES))
        props = {"bootstrap.servers": self.bootstrap_servers, **self.client}
        props.update(getattr(self, role))
        return props

    def describe(self) -> dict[str, Any]:
        """A printable, redacted view."""
        out: dict[str, Any] = {"bootstrap.servers": self.bootstrap_servers}
        out.update(redact(self.client))
        for role in ROLES:
            out.update({f"{role}.{k}": v for k, v in redact(getattr(self, role)).items()})
        return out

    def __repr__(self) -> str:
        return f"ClusterConfig(alias={self.alias!r}, {self.describe()!r})"


def idempotence_off(
    cluster: ClusterConfig, overrides: Mapping[str, tuple[str, str]] | None = None
) -> str | None:
    """The key (as written) that turns idempotence off for ``cluster``'s producers, e.g.
    ``B.producer.enable.idempotence = false`` for a service without idempotent producers (OCI
    Streaming); None when they are idempotent, as by default. ``overrides``: a flow's own
    producer settings (``A->B.producer.*``), which win over the cluster's."""
    key = "enable.idempotence"
    found = None
    for section in ("client", "producer"):
        if key in getattr(cluster, section):
            found = (getattr(cluster, section)[key], cluster.origin(section, key))
    found = (overrides or {}).get(key, found)
    return found[1] if found and found[0].strip().lower() == "false" else None


@dataclass(frozen=True)
class FlowConfig:
    """An ordered pair ``source->target``; ``enabled`` is MM2's ``A->B.enabled`` (default false)."""

    source: str
    target: str
    enabled: bool
    settings: FlowSettings
    #: ``source.consumer`` etc. -> key -> (value, key as written), from ``A->B.consumer.*`` etc.
    client_overrides: Mapping[str, Mapping[str, tuple[str, str]]] = field(
        default_factory=dict, repr=False
    )
    #: the name MirrorMaker 2 gives the source / target in its topic names, heartbeats and
    #: offsets, when ``source.cluster.alias`` / ``target.cluster.alias`` set another than the
    #: alias (None: the alias); see :attr:`mm2_source`
    source_name: str | None = None
    target_name: str | None = None

    @property
    def mm2_source(self) -> str:
        """The source's name in MM2's names: remote topics (``<it>.orders``), the checkpoints
        topic, heartbeats, Connect offsets. The alias, unless ``source.cluster.alias`` says."""
        return self.source if self.source_name is None else self.source_name

    @property
    def mm2_target(self) -> str:
        """The target's name in MM2's names (the offset-syncs topic at the source, heartbeats)."""
        return self.target if self.target_name is None else self.target_name

    def overrides(self, side: str, role: str) -> dict[str, tuple[str, str]]:
        """Per-flow client settings for ``role`` on ``side`` (source or target)."""
        return dict(self.client_overrides.get(f"{side}.{role}", {}))

    @property
    def name(self) -> str:
        """The flow's name as MM2 writes it, e.g. ``A->B``."""
        return f"{self.source}->{self.target}"

    def policy(self) -> ReplicationPolicy:
        """The flow's replication policy (:mod:`mirror_lib.mm2.policy`)."""
        s = self.settings
        return make_policy(
            s.policy_class,
            separator=s.separator,
            internal_separator_enabled=s.internal_separator_enabled,
            separator_configured=s.separator_configured,
            source_cluster_alias=self.mm2_source,
        )


@dataclass(frozen=True)
class MirrorConfig:
    """The whole configuration: clusters, all ordered flows, the state folder and unknown keys."""

    clusters: Mapping[str, ClusterConfig]
    flows: tuple[FlowConfig, ...]
    state_dir: str
    origin: str = "<dict>"
    unknown_keys: tuple[str, ...] = ()
    properties: Mapping[str, str] = field(default_factory=dict, repr=False)
    warnings: tuple[str, ...] = ()
    #: (key, value) of each flow line whose source or target is not in ``clusters`` (ignored)
    stray_flow_keys: tuple[tuple[str, str], ...] = ()

    def enabled_flows(self) -> tuple[FlowConfig, ...]:
        """Flows that replicate data (``A->B.enabled=true``)."""
        return tuple(f for f in self.flows if f.enabled)

    def heartbeat_flows(self) -> tuple[FlowConfig, ...]:
        """Flows that emit heartbeats: MM2 runs a heartbeat connector for every pair by default."""
        return tuple(f for f in self.flows if f.settings.emit_heartbeats)

    def flow(self, name: str) -> FlowConfig:
        """The flow ``A->B``; a :class:`ConfigError` lists the enabled flows when it is unknown."""
        for f in self.flows:
            if f.name == name.replace(" ", ""):
                return f
        raise ConfigError(
            "--flow", name, "one of " + ", ".join(f.name for f in self.enabled_flows()), self.origin
        )

    def no_flow_enabled(self) -> ConfigError:
        """The error of a run with no enabled flow: it names the line that enables one between
        clusters that ``clusters`` does not list, when there is such a line."""
        listed = ", ".join(self.clusters)
        for key, value in self.stray_flow_keys:
            if key.endswith(".enabled") and value.strip().lower() == "true":
                pair = key.removesuffix(".enabled").split("->", 1)
                missing = ", ".join(a.strip() for a in pair if a.strip() not in self.clusters)
                return ConfigError(
                    key,
                    value,
                    f"a flow between clusters that clusters lists ({listed}): {missing} is not "
                    f"listed there, so this line is ignored and no flow is enabled; add "
                    f"{missing} to clusters (with its bootstrap.servers) or use a listed alias",
                    self.origin,
                )
        return ConfigError(
            "A->B.enabled", None, "at least one enabled flow (A->B.enabled = true)", self.origin
        )

    def cluster(self, alias: str) -> ClusterConfig:
        """The cluster ``alias``; unknown aliases are a :class:`ConfigError`."""
        if alias not in self.clusters:
            raise ConfigError("cluster", alias, "one of " + ", ".join(self.clusters), self.origin)
        return self.clusters[alias]

    def __repr__(self) -> str:
        return (
            f"MirrorConfig(clusters={list(self.clusters.values())!r}, "
            f"flows={[f.name for f in self.enabled_flows()]!r}, state_dir={self.state_dir!r})"
        )


def with_settings(flow: FlowConfig, **changes: Any) -> FlowConfig:
    """A copy of ``flow`` with some settings replaced (tests, notebooks)."""
    return dataclasses.replace(flow, settings=dataclasses.replace(flow.settings, **changes))
