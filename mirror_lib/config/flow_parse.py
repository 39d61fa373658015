"""One flow's settings from the top-level and ``A->B.`` keys, as MM2 merges them: the flow level
wins, a current name beats a deprecated alias at any level, the pre-3.0 identity idiom (empty
separator and source alias) and config-provider references resolved in the values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from typing import Any

from mirror_lib.config.properties import ConfigProvider, has_reference, resolve_setting
from mirror_lib.config.setting_values import Setting
from mirror_lib.config.settings import AT_LEAST_ONCE_COMMIT_INTERVAL_MS, SETTINGS, FlowSettings
from mirror_lib.errors import ConfigError
from mirror_lib.mm2.policy import make_policy

#: Connector-level alias keys MM2 sets per flow (honoured, never passed to a client).
ALIAS_KEYS = ("source.cluster.alias", "target.cluster.alias")


def _lookup(key: str, props: Mapping[str, str], overrides: Mapping[str, str]) -> str | None:
    return overrides[key] if key in overrides else props.get(key)


def is_alias_idiom(props: Mapping[str, str], overrides: Mapping[str, str]) -> bool:
    """The pre-3.0 way to keep topic names: an empty separator and an empty source alias."""
    separator = _lookup("replication.policy.separator", props, overrides)
    return separator == "" and _lookup("source.cluster.alias", props, overrides) == ""


def _alias_idiom(
    props: Mapping[str, str], overrides: Mapping[str, str], warnings: list[str]
) -> bool:
    """True for the pre-3.0 identity idiom (empty separator and source alias), with its note."""
    if is_alias_idiom(props, overrides):
        warnings.append(
            "replication.policy.separator and source.cluster.alias are empty: the pre-3.0 way to "
            "keep topic names, read as identity naming (topics keep their names on the target). "
            "Prefer replication.policy.class = IdentityReplicationPolicy"
        )
        return True
    return False


def mm2_names(
    src: str,
    tgt: str,
    props: Mapping[str, str],
    overrides: Mapping[str, str],
    enabled: bool,
    warnings: list[str],
) -> tuple[str | None, str | None]:
    """The names MirrorMaker 2 gives this flow's source and target in its topic names and
    records, when ``source.cluster.alias`` / ``target.cluster.alias`` set another one than the
    flow's aliases (None: the alias). MM2's dedicated mode puts a top-level one into every
    flow's connectors, unless the flow sets its own (``A->B.source.cluster.alias``). An empty
    one is refused outside the pre-3.0 idiom (:func:`is_alias_idiom`)."""
    names: list[str | None] = []
    for key, alias in zip(ALIAS_KEYS, (src, tgt), strict=True):
        raw = _lookup(key, props, overrides)
        value = (raw or "").strip()
        where = f"{src}->{tgt}.{key}" if key in overrides else key
        if enabled and raw is not None and not value:
            idiom = key == "source.cluster.alias"
            raise ConfigError(
                where,
                raw,
                f"{alias!r}, another name, or unset for flow {src}->{tgt}"
                + (", or empty together with an empty replication.policy.separator (the pre-3.0 "
                   "way to keep topic names)" if idiom else ""),
            )  # fmt: skip
        if not value or value == alias:
            names.append(None)
            continue
        names.append(value)
        if enabled:
            side = key.split(".", 1)[0]
            warnings.append(
                f"{where} = {value}: as in MirrorMaker 2, flow {src}->{tgt} names its {side} "
                f"{value!r}, not {alias!r}, in the names MM2 derives from it (internal topics, "
                "remote topics and heartbeats) and in its heartbeats and offsets, so that a "
                "take-over from MM2 and MM2's own clients find them"
                + (" (a top-level one applies to every flow)" if key not in overrides else "")
            )
    return names[0], names[1]


def _empty_identity_separator(
    flow: str, props: Mapping[str, str], overrides: Mapping[str, str]
) -> str | None:
    """The key as written of an empty separator under IdentityReplicationPolicy, else None.
    MM2 runs such a file: that policy keeps topic names, and the separator only joins what it
    still names with an alias (remote heartbeats and, by default, the internal topics)."""
    key = "replication.policy.separator"
    policy = _lookup("replication.policy.class", props, overrides) or ""
    if _lookup(key, props, overrides) != "" or not policy.strip().endswith(
        "IdentityReplicationPolicy"
    ):
        return None
    return f"{flow}.{key}" if key in overrides else key


def _empty_separator_note(where: str, src: str, tgt: str, settings: FlowSettings) -> str:
    """What an empty separator names, as MM2 names it, and the names with MM2's default."""
    names = []
    for separator in ("", "."):
        policy = make_policy(
            settings.policy_class,
            separator,
            settings.internal_separator_enabled,
            separator_configured=True,
        )
        other = tgt if settings.offset_syncs_location == "source" else src
        names.append(
            f"{policy.format_remote_topic(src, policy.heartbeats_topic())}, "
            f"{policy.offset_syncs_topic(other)}, {policy.checkpoints_topic(src)}"
        )
    return (
        f"{where} is empty with IdentityReplicationPolicy: topics keep their names, and the "
        f"names that join an alias with the separator have none, as MirrorMaker 2 names them "
        f"(a take-over from it finds them): {names[0]} (with MM2's default '.': {names[1]})"
    )


def _raw_setting(
    setting: Setting,
    flow: str,
    props: Mapping[str, str],
    overrides: Mapping[str, str],
    warnings: list[str],
) -> tuple[str, str]:
    """(raw value, key as written; "" for the default) of ``setting`` for ``flow``.

    MM2 merges the flow's keys over the top-level ones, then translates deprecated names: the
    current name at any level beats an old alias at any level; for one name the flow level wins.
    """
    found = [
        (level[name], prefix + name, name == setting.key)
        for name in (setting.key, *setting.aliases)
        for level, prefix in ((overrides, f"{flow}."), (props, ""))
        if name in level
    ]
    if not found:
        return setting.default, ""
    raw, where, current = found[0]
    for _value, ignored, is_current in found[1:]:
        # an alias that the flow-over-top-level rule alone would have picked
        if current and not is_current and (ignored.startswith(f"{flow}.") or where == setting.key):
            warnings.append(
                f"{ignored} is ignored: {where} is set, and the current name wins over the "
                "deprecated one (as in MM2)"
            )
    return raw, where


def _parse_value(
    parse: Callable[[str, str], Any],
    key: str,
    raw: str,
    providers: Mapping[str, ConfigProvider],
    origin: str,
) -> Any:
    """``parse(key, raw)`` after resolving config-provider references; an error names the value
    as written, with its references."""
    if not has_reference(raw):
        return parse(key, raw)
    resolved = resolve_setting(key, raw, providers)
    try:
        return parse(key, resolved)
    except ConfigError as exc:
        expected = f"{exc.expected} (as the value that {raw} resolves to)"
        raise ConfigError(key, raw, expected, origin) from None


def flow_settings(
    src: str,
    tgt: str,
    props: Mapping[str, str],
    overrides: Mapping[str, str],
    context: tuple[str, Mapping[str, ConfigProvider]],
    warnings: list[str],
) -> tuple[bool, FlowSettings]:
    origin, providers = context
    flow = f"{src}->{tgt}"
    raw_enabled = overrides.get("enabled", "false")
    parse_enabled = partial(_flow_enabled, origin=origin)
    enabled = _parse_value(parse_enabled, f"{flow}.enabled", raw_enabled, providers, origin)
    idiom = _alias_idiom(props, overrides, warnings)
    empty_separator = None if idiom else _empty_identity_separator(flow, props, overrides)
    values: dict[str, Any] = {}
    explicit: set[str] = set()
    for setting in SETTINGS:
        raw, where = _raw_setting(setting, flow, props, overrides, warnings)
        if idiom and setting.key == "replication.policy.separator":
            raw, where = setting.default, ""
        if idiom and setting.key == "replication.policy.class":
            raw, where = "IdentityReplicationPolicy", setting.key
        if where:
            explicit.add(setting.key)
        if empty_separator and setting.key == "replication.policy.separator":
            values[setting.attr] = ""  # what the identity policy allows (nonempty would refuse)
            continue
        values[setting.attr] = _parse_value(
            setting.parse, where or setting.key, raw, providers, origin
        )
    values["separator_configured"] = not idiom and (
        "replication.policy.separator" in props or "replication.policy.separator" in overrides
    )
    values["explicit"] = frozenset(explicit)
    if values["delivery"] == "at_least_once" and "mirror.commit.interval.ms" not in explicit:
        values["commit_interval_ms"] = AT_LEAST_ONCE_COMMIT_INTERVAL_MS
    settings = FlowSettings(**values)
    if empty_separator and enabled:
        warnings.append(_empty_separator_note(empty_separator, src, tgt, settings))
    needs_syncs = settings.emit_checkpoints or settings.sync_group_offsets
    if needs_syncs and not settings.emit_offset_syncs and enabled:
        raise ConfigError(
            f"{src}->{tgt}.emit.offset-syncs.enabled",
            "false",
            "true while emit.checkpoints.enabled or sync.group.offsets.enabled is true",
            origin,
        )
    if enabled and settings.sync_group_offsets and not settings.emit_checkpoints:
        warnings.append(
            f"{flow}: sync.group.offsets.enabled = true does nothing while "
            "emit.checkpoints.enabled = false: group offsets are synced from the checkpoints the "
            "flow writes (as in MM2); set emit.checkpoints.enabled = true to sync them"
        )
    if enabled:
        from mirror_lib.config.stale import check_settings

        check_settings(f"{src}->{tgt}", settings, origin)
    return enabled, settings


def _flow_enabled(key: str, raw: str, origin: str) -> bool:
    if raw.strip().lower() not in ("true", "false"):
        raise ConfigError(key, raw, "true or false", origin)
    return raw.strip().lower() == "true"
