"""What a configuration would do, as data and as text: flows, topic naming, internal topics.

Used by ``mirror validate`` and the configure notebook; needs no broker.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from typing import Any

from mirror_lib.config.fanout import group_name, read_groups
from mirror_lib.config.java_clients import IGNORED, RENAMED, left_out
from mirror_lib.config.librdkafka_conf import PROPERTIES
from mirror_lib.config.model import COPY_KEYS, CopyWarning, FlowConfig, MirrorConfig
from mirror_lib.config.properties import redact_value
from mirror_lib.config.settings import BY_KEY


def internal_topics(flow: FlowConfig) -> dict[str, dict[str, str]]:
    """Name and cluster of each internal topic of ``flow``
    (docs/mm2-reference.md#internal-topics)."""
    policy = flow.policy()
    s = flow.settings
    on_source = s.offset_syncs_location == "source"
    syncs_cluster = flow.source if on_source else flow.target
    other = flow.mm2_target if on_source else flow.mm2_source  # named as MM2 names them
    return {
        "offset_syncs": {"topic": policy.offset_syncs_topic(other), "cluster": syncs_cluster},
        "checkpoints": {"topic": policy.checkpoints_topic(flow.mm2_source), "cluster": flow.target},
        "heartbeats": {"topic": policy.heartbeats_topic(), "cluster": flow.target},
        "metrics": {"topic": metrics_topic(flow), "cluster": flow.target},
    }


def metrics_topic(flow: FlowConfig) -> str:
    """Our metrics topic on the target; the ``mm2``/``.internal`` form keeps it unreplicated."""
    return f"mm2-metrics.{flow.source}.internal"


def literal_topics(flow: FlowConfig) -> list[str]:
    """Include patterns that are plain topic names (no regex syntax)."""
    return [p for p in flow.settings.topics if re.escape(p) == p]


def describe_flow(flow: FlowConfig) -> dict[str, Any]:
    """A printable summary of one flow."""
    policy = flow.policy()
    s = flow.settings
    return {
        "flow": flow.name,
        "enabled": flow.enabled,
        "topics": list(s.topics),
        "topics.exclude": list(s.topics_exclude),
        "groups": list(s.groups),
        "groups.exclude": list(s.groups_exclude),
        "policy": f"{s.policy_class.rsplit('.', 1)[-1]} (separator {s.separator!r})",
        "remote_topic_pattern": policy.format_remote_topic(flow.mm2_source, "<topic>"),
        "examples": {
            t: policy.format_remote_topic(flow.mm2_source, t) for t in literal_topics(flow)
        },
        "internal_topics": internal_topics(flow),
        "delivery": s.delivery,
        "heartbeats": s.emit_heartbeats,
        "checkpoints": s.emit_checkpoints,
        "sync_group_offsets": s.sync_group_offsets,
        "settings": {k: v for k, v in s.describe().items() if k in s.explicit},
        "clients": {
            section.replace(".", " "): {
                name: {"value": redact_value(name, value), "from": where}
                for name, (value, where) in sorted(settings.items())
                if not left_out(name, section.rsplit(".", 1)[-1])  # a warning says so
            }
            for section, settings in sorted(flow.client_overrides.items())
        },
    }


def describe_config(config: MirrorConfig, client_warnings: Sequence[str] = ()) -> dict[str, Any]:
    """Clusters (redacted), enabled flows, heartbeat-only flows and warnings.

    ``client_warnings`` are those of :func:`mirror_lib.kafka.clients.check_clients` (settings
    ignored).
    """
    warnings = list(config.warnings)
    warnings.extend(_unknown_key_warning(config, key) for key in config.unknown_keys)
    warnings.extend(client_warnings)
    if not config.enabled_flows():
        warnings.append(CopyWarning("no flow is enabled: set e.g. A->B.enabled = true"))
    groups = read_groups(config.enabled_flows())
    for group in groups:
        if len(group) == 1 and group[0].settings.fanout:
            warnings.append(
                f"{group[0].name}: mirror.fanout.enabled has no effect, no other enabled flow "
                f"from {group[0].source} sets it"
            )
    return {
        "config": config.origin,
        "state_dir": config.state_dir,
        "clusters": {a: c.describe() for a, c in config.clusters.items()},
        "flows": [describe_flow(f) for f in config.enabled_flows()],
        "heartbeat_only_flows": [f.name for f in config.heartbeat_flows() if not f.enabled],
        "fanout_groups": [group_name(g) for g in groups if len(g) > 1],
        "warnings": copy_first(warnings),
        "copy_warnings": [w for w in warnings if isinstance(w, CopyWarning)],
    }


def copy_first(warnings: Sequence[str]) -> list[str]:
    """``warnings`` once each, those that change what is copied (:class:`CopyWarning`) first."""
    unique = list(dict.fromkeys(warnings))
    return sorted(unique, key=lambda w: not isinstance(w, CopyWarning))


def _unknown_key_warning(config: MirrorConfig, key: str) -> str:
    """The warning of an unknown key, with the known key it is closest to; a
    :class:`CopyWarning` saying what stays in force when that key decides what is copied."""
    head, _, rest = key.partition(".")
    flow_name = head if "->" in head else None
    name = rest if flow_name else key
    known = [*BY_KEY, "enabled"] if flow_name else list(BY_KEY)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    if not close and (name in PROPERTIES or name in RENAMED or name in IGNORED):
        hint = f" (a client setting: set it per cluster, e.g. <alias>.{name})"
    said = f"unknown key {key!r} is ignored{hint}"
    if not close or close[0] not in COPY_KEYS:
        return said
    flows = [config.flow(flow_name)] if flow_name else list(config.enabled_flows())
    if close[0] == "enabled":
        kept = [f"flow {f.name} stays {'enabled' if f.enabled else 'disabled'}" for f in flows]
    else:
        kept = [f"flow {f.name} keeps {_in_force(f, close[0])}" for f in flows]
    return CopyWarning(f"{said}, so {'; '.join(kept)}" if kept else said)


def _in_force(flow: FlowConfig, key: str) -> str:
    """``key = value`` as ``flow`` has it, saying so when it takes every topic or group."""
    value = flow.settings.describe()[key]
    every = {"topics": " (every topic)", "groups": " (every group)"}
    return f"{key} = {value}" + (every.get(key, "") if value == ".*" else "")


def format_description(d: dict[str, Any]) -> str:
    """Human-readable text of :func:`describe_config`."""
    copying = set(d.get("copy_warnings", ()))
    lines = [f"warning, changes what is copied: {w}" for w in d["warnings"] if w in copying]
    lines += [f"config: {d['config']}", f"state dir: {d['state_dir']}", "clusters:"]
    for alias, props in d["clusters"].items():
        lines.append(f"  {alias}: " + ", ".join(f"{k}={v}" for k, v in props.items()))
    for f in d["flows"]:
        lines.append(f"flow {f['flow']}:")
        lines.append(f"  topics: {', '.join(f['topics'])}")
        lines.append(f"  topics.exclude: {', '.join(f['topics.exclude'])}")
        lines.append(
            f"  groups: {', '.join(f['groups'])}  exclude: {', '.join(f['groups.exclude'])}"
        )
        lines.append(f"  policy: {f['policy']}; remote topics: {f['remote_topic_pattern']}")
        for topic, remote in f["examples"].items():
            lines.append(f"    would replicate {topic} -> {remote}")
        for kind, where in f["internal_topics"].items():
            lines.append(f"  {kind}: {where['topic']} on {where['cluster']}")
        lines.append(
            f"  delivery: {f['delivery']}; checkpoints: {f['checkpoints']}; "
            f"heartbeats: {f['heartbeats']}; sync group offsets: {f['sync_group_offsets']}"
        )
        for key, value in f["settings"].items():
            lines.append(f"  {key} = {value}")
        for client, settings in f["clients"].items():
            for name, v in settings.items():
                lines.append(f"  {client}: {name} = {v['value']} (from {v['from']})")
    for group in d.get("fanout_groups", []):
        lines.append(f"fan-out {group}: one read of {group.split('->')[0]}, a producer per target")
    if d["heartbeat_only_flows"]:
        lines.append("heartbeats only: " + ", ".join(d["heartbeat_only_flows"]))
    lines.extend(f"warning: {w}" for w in d["warnings"] if w not in copying)
    return "\n".join(lines)
