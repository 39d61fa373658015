"""Build, check and save a one-flow configuration: what the "configure flows" notebook calls.

A data engineer fills in clusters, filters and policy; :func:`configure_flow` validates them into
a :class:`MirrorConfig`, checks both clusters answer, previews the topics and consumer groups the
flow would pick up (with their names on the target) and saves an ``mm2.properties`` file that
``mirror run`` and the jobs read.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mirror_lib.config.model import MirrorConfig
from mirror_lib.config.parse import parse_config
from mirror_lib.config.properties import format_properties
from mirror_lib.errors import ConfigError
from mirror_lib.replication.context import FlowContext

POLICIES = {
    "default": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
    "identity": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
}


def flow_properties(
    *,
    source_alias: str,
    source_bootstrap: str,
    target_alias: str,
    target_bootstrap: str,
    topics: str = ".*",
    topics_exclude: str = "",
    groups: str = ".*",
    groups_exclude: str = "",
    policy: str = "default",
    separator: str = ".",
    sync_group_offsets: bool = True,
    state_dir: str = "./mirror-state",
    replication_factor: int = -1,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """mm2.properties of one flow source->target from notebook-sized inputs."""
    if policy not in POLICIES:
        raise ConfigError("policy", policy, "one of " + ", ".join(POLICIES))
    flow = f"{source_alias}->{target_alias}"
    props = {
        "clusters": f"{source_alias}, {target_alias}",
        f"{source_alias}.bootstrap.servers": source_bootstrap,
        f"{target_alias}.bootstrap.servers": target_bootstrap,
        f"{flow}.enabled": "true",
        f"{flow}.topics": topics,
        f"{flow}.groups": groups,
        "replication.policy.class": POLICIES[policy],
        "replication.policy.separator": separator,
        "sync.group.offsets.enabled": str(sync_group_offsets).lower(),
        "mirror.state.dir": state_dir,
    }
    if topics_exclude.strip():
        props[f"{flow}.topics.exclude"] = topics_exclude
    if groups_exclude.strip():
        props[f"{flow}.groups.exclude"] = groups_exclude
    for key in (
        "replication.factor",
        "offset-syncs.topic.replication.factor",
        "checkpoints.topic.replication.factor",
        "heartbeats.topic.replication.factor",
    ):
        props[key] = str(replication_factor)
    props.update(extra or {})
    return props


@dataclass(frozen=True)
class FlowPreview:
    """What a configured flow would replicate, and where the config was saved."""

    config: MirrorConfig
    flow: str
    topics: list[dict[str, Any]]
    groups: list[dict[str, Any]]
    saved_to: Path | None

    def summary(self) -> str:
        """One line per fact a person checks before starting the flow."""
        lines = [
            f"flow {self.flow}: {len(self.topics)} topics, {len(self.groups)} consumer groups",
            *(f"  topic {t['topic']} -> {t['remote_topic']}" for t in self.topics),
            *(f"  group {g['group']}" for g in self.groups),
        ]
        if self.saved_to is not None:
            lines.append(f"saved {self.saved_to}")
        return "\n".join(lines)


def preview_flow(config: MirrorConfig, flow_name: str, timeout_s: float = 10) -> FlowPreview:
    """Check both clusters answer; list the topics and groups ``flow_name`` would pick up."""

    from mirror_lib.kafka.admin import admin_client, future_result  # lazy: confluent-kafka
    from mirror_lib.kafka.lookups import list_topic_partitions  # lazy: confluent-kafka
    from mirror_lib.kafka.reach import check_flow_clusters  # lazy: confluent-kafka

    check_flow_clusters(config, [flow_name], timeout_s=timeout_s, kept="nothing was listed")
    ctx = FlowContext.create(config, flow_name)
    source_admin = admin_client(ctx.client("source", "admin"))
    on_source = list_topic_partitions(source_admin)
    on_target = list_topic_partitions(admin_client(ctx.client("target", "admin")))
    topics = []
    for topic in sorted(on_source):
        if not ctx.should_replicate(topic):
            continue
        remote = ctx.remote_topic(topic)
        topics.append(
            {
                "topic": topic,
                "partitions": on_source[topic],
                "remote_topic": remote,
                "exists_on_target": remote in on_target,
            }
        )
    listing = source_admin.list_consumer_groups(request_timeout=timeout_s)
    listed = future_result(listing, f"listing consumer groups on {ctx.source}", timeout_s + 5)
    ids = sorted(g.group_id for g in listed.valid)
    groups = [{"group": g} for g in ids if ctx.should_checkpoint_group(g)]
    return FlowPreview(config, flow_name, topics, groups, None)


def configure_flow(
    properties: dict[str, str], save_to: str | Path | None = None, *, check: bool = True
) -> FlowPreview:
    """Validate ``properties``, preview the (first enabled) flow, then save the file.

    Nothing is saved when validation or the cluster check fails. ``check=False`` skips the
    clusters (no preview) for configs written ahead of the clusters.
    """
    config = parse_config(properties, origin="configure_flow")
    enabled = config.enabled_flows()
    if not enabled:
        raise ConfigError("A->B.enabled", None, "one enabled flow")
    name = enabled[0].name
    preview = preview_flow(config, name) if check else FlowPreview(config, name, [], [], None)
    if save_to is None:
        return preview
    path = Path(save_to)
    path.parent.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    path.write_text(format_properties(properties, header=f"written by configure_flow at {stamp}"))
    return FlowPreview(config, name, preview.topics, preview.groups, path.resolve())
