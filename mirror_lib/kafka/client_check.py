"""Build every Kafka client a run builds, offline, so that librdkafka's own refusals come first.

A config dict can be right key by key and still be refused by librdkafka when a client is made
from it: a PEM it cannot parse, a keystore or key its password does not open, a SASL mechanism
this build lacks (the pip wheels have no GSSAPI). :func:`check_client_builds` constructs each
confluent-kafka client the enabled flows use, with its full configuration but no
``bootstrap.servers`` (nothing connects), and closes it; a refusal becomes a
:class:`ConfigError` naming the cluster, the role, the setting and librdkafka's message.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from mirror_lib.config.java_clients import java_names
from mirror_lib.config.librdkafka_conf import PROPERTIES
from mirror_lib.config.model import FlowConfig, MirrorConfig
from mirror_lib.config.properties import has_reference, redact_value
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.clients import client_config, producer_defaults, raw_settings

#: Settings loaded together: when one still holds a reference (validate), all are left out.
_TOGETHER = (
    ("ssl.ca.location", "ssl.ca.pem"),
    (
        "ssl.certificate.location",
        "ssl.certificate.pem",
        "ssl.key.location",
        "ssl.key.pem",
        "ssl.key.password",
        "ssl.keystore.location",
        "ssl.keystore.password",
    ),
)
#: Free-text credentials librdkafka requires once SASL is on: a reference gets a stand-in.
_FREE_TEXT = frozenset(
    {
        "sasl.username",
        "sasl.password",
        "sasl.oauthbearer.client.id",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "sasl.oauthbearer.token.endpoint.url",
    }
)
#: librdkafka setting -> the setting whose value opens it (wrong password: "mac verify failure").
_PASSWORDS = {
    "ssl.keystore.location": "ssl.keystore.password",
    "ssl.key.location": "ssl.key.password",
    "ssl.key.pem": "ssl.key.password",
    "ssl.certificate.location": "ssl.key.password",
}
#: Files librdkafka opens when a client is made (ssl.ca.location may be a folder, or "probe").
_FILES = (
    "ssl.ca.location",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.keystore.location",
    "ssl.crl.location",
    "https.ca.location",
)
_GSSAPI = (
    "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER: this confluent-kafka's librdkafka was "
    "built without Kerberos (the pip wheels never have GSSAPI). For GSSAPI install a librdkafka "
    "built with libsasl2 (e.g. librdkafka-dev from Confluent's apt/yum repositories) and build "
    "the client against it: pip install --no-binary confluent-kafka confluent-kafka"
)


@dataclass(frozen=True)
class ClientSpec:
    """One client a flow uses: where, which role, and the configuration it gets."""

    flow: str
    side: str
    alias: str
    role: str
    conf: dict[str, Any]

    def describe(self) -> str:
        return f"the {self.role} of cluster {self.alias} ({self.side} of {self.flow})"


@dataclass(frozen=True)
class BuildReport:
    """What :func:`check_client_builds` did: clients built, time taken, settings not loaded."""

    built: int
    elapsed_ms: float
    unresolved: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()  # files not on this machine: loaded where the run builds them
    notes: tuple[str, ...] = ()  # what the clients' configurations warn about

    def summary(self) -> str:
        line = (
            f"clients: {self.built} built offline in {self.elapsed_ms:.0f} ms (nothing "
            "connected; librdkafka loaded their settings, certificates and keys)"
        )
        if self.unresolved:
            line += f"; not loaded, still ${{...}} references: {', '.join(self.unresolved)}"
        if self.absent:
            line += (
                f"; not loaded, files not on this machine (a run here would fail on them): "
                f"{', '.join(self.absent)}"
            )
        return line


_Client = tuple[str, str, dict[str, Any]]
"""(side, role, the settings the run adds)."""


def _flow_clients(flow: FlowConfig, replicates: bool) -> list[_Client]:
    """(side, role, extra) of each client a flow's run builds, with the settings that run adds
    (source_reader, ledger, writer, heartbeats); heartbeat-only flows use the target only."""
    s = flow.settings
    producer: dict[str, Any] = {}  # producer_defaults: idempotent unless the user says not
    if not replicates:
        return [("target", "producer", producer), ("target", "admin", {})]
    if s.exactly_once:
        producer = {"enable.idempotence": True, "transactional.id": f"mirror-{flow.name}-0"}
    clients: list[_Client] = [
        (
            "source",
            "consumer",
            {
                "group.id": f"__mirror_reader.{flow.name}",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
                "auto.offset.reset": "error",
            },
        ),
        ("source", "admin", {}),
        ("target", "producer", producer),
        (
            "target",
            "consumer",
            {
                "group.id": f"__mirror_ledger.{flow.name}.0",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
            },
        ),
        ("target", "admin", {}),
    ]
    if s.emit_offset_syncs and s.offset_syncs_location != "target":
        clients.append(("source", "producer", {}))
    return clients


def client_specs(
    config: MirrorConfig,
    flow_names: Sequence[str] | None = None,
    *,
    resolve: bool = False,
    notes: list[str] | None = None,
) -> list[ClientSpec]:
    """Every client of the given (default: enabled) flows and of the heartbeat flows, each
    configuration once. ``resolve=False`` leaves secret references as they are (validate)."""
    names = list(flow_names or [f.name for f in config.enabled_flows()])
    flows = [(config.flow(n), True) for n in names]
    flows += [(f, False) for f in config.heartbeat_flows() if f.name not in names]
    specs: dict[str, ClientSpec] = {}
    for flow, replicates in flows:
        for side, role, extra in _flow_clients(flow, replicates):
            cluster = config.cluster(flow.source if side == "source" else flow.target)
            overrides = flow.overrides(side, role)
            ours = producer_defaults(cluster, overrides) if role == "producer" else None
            conf = client_config(
                cluster,
                role,
                client_id=f"mirror|{flow.name}|{side}={cluster.alias}|{role}|check",
                defaults=ours,
                extra=extra,
                overrides=overrides,
                resolve=resolve,
                notes=notes if notes is not None else [],
            )
            same = {k: v for k, v in conf.items() if k != "client.id"}
            key = f"{cluster.alias}|{role}|" + json.dumps(same, sort_keys=True, default=str)
            specs.setdefault(key, ClientSpec(flow.name, side, cluster.alias, role, conf))
    return list(specs.values())


def _offline(conf: dict[str, Any]) -> tuple[dict[str, Any], set[str]]:
    """``conf`` without bootstrap.servers; settings still holding a reference are left out (with
    those loaded together) or, for credentials librdkafka requires and reads as any text, given
    a stand-in."""
    out = {k: v for k, v in conf.items() if k != "bootstrap.servers"}
    left: set[str] = set()
    shown: set[str] = set()  # given a neutral stand-in, not checked
    for key, value in conf.items():
        if key not in out or not (isinstance(value, str) and has_reference(value)):
            continue
        group = next((g for g in _TOGETHER if key in g), None)
        if group is not None:
            left.update(k for k in group if k in out)
        elif key in _FREE_TEXT:  # librdkafka wants them set, and takes any text
            out[key] = "unresolved-reference"
        elif key in ("sasl.mechanism", "sasl.mechanisms"):  # unset would mean GSSAPI
            out[key] = "PLAIN"
            shown.add(key)
        else:  # e.g. a cipher list: a stand-in would be refused
            left.add(key)
    for key in left:
        out.pop(key, None)
    return out, left | shown


class _Quiet:
    """A logger for librdkafka that drops its lines (no broker, so CONFWARNs only)."""

    def log(self, *args: Any, **kwargs: Any) -> None:
        pass


def _missing_files(conf: dict[str, Any]) -> dict[str, str]:
    """Refusals, worded like librdkafka's, for the files that cannot be read here (OpenSSL
    itself only says "BIO lib"), by setting."""
    out = {}
    for name in _FILES:
        path = conf.get(name)
        if isinstance(path, str) and path != "probe" and not os.access(path, os.R_OK):
            why = "no such file or folder" if not os.path.exists(path) else "not readable"
            out[name] = f"{name} failed: {why}: {path}"
    return out


def _without(conf: dict[str, Any], names: set[str]) -> dict[str, Any]:
    """``conf`` without ``names`` and the settings loaded together with them."""
    drop = set(names)
    for name in names:
        drop.update(next((g for g in _TOGETHER if name in g), ()))
    return {k: v for k, v in conf.items() if k not in drop}


def _construct(role: str, conf: dict[str, Any]) -> None:
    """Make and close one client; raises what confluent-kafka raises."""
    from confluent_kafka import Consumer, Producer  # lazy: optional extra "kafka"
    from confluent_kafka.admin import AdminClient

    conf = {**conf, "logger": _Quiet()}
    if role == "consumer":
        Consumer(conf).close()
    elif role == "producer":
        Producer(conf).close()
    else:
        AdminClient(conf)


def _named_setting(message: str) -> str | None:
    """The librdkafka setting a refusal names, e.g. ``ssl.ca.pem`` in "failed to read ...
    from ssl.ca.pem"."""
    if "SASL mechanism" in message:
        return "sasl.mechanism"
    for match in re.finditer(r"[a-z][a-z0-9_]*(?:\.[a-z0-9_]+)+", message):
        if match[0] in PROPERTIES:
            return match[0]
    return None


def _hint(message: str, password: str | None) -> tuple[str, str]:
    """What would be valid, and a hint to add to librdkafka's message."""
    low = message.lower()
    if any(t in low for t in ("mac verify", "decrypt", "pem lib")):  # a wrong or no password
        if password:
            return f"a keystore or key that {password} opens", ""
        return "a key that needs no password", "; an encrypted key needs ssl.key.password"
    if "no such file" in low or "not readable" in low or "bio lib" in low:
        return "a file readable on this machine", ""
    if "no start line" in low or "pem format" in low or "pem routines" in low:
        return "PEM text", "; PEM is -----BEGIN ...-----, base64 lines, -----END ...-----"
    return "a value librdkafka accepts", ""


def build_error(config: MirrorConfig, spec: ClientSpec, message: str) -> ConfigError:
    """librdkafka's refusal as a ConfigError on the key the user wrote, when one can be named."""
    raw, _ = raw_settings(
        config.cluster(spec.alias),
        spec.role,
        config.flow(spec.flow).overrides(spec.side, spec.role),
    )
    name = _named_setting(message)
    found = next((raw[k] for k in java_names(name) if k in raw), None) if name else None
    if found is not None:
        value, key = found
        value = redact_value(key, value)
        value = value if len(value) <= 80 else value[:60] + "..."
    elif name is not None:
        key, value = f"{spec.alias}.{name}", redact_value(name, str(spec.conf.get(name, "")))
    else:
        key, value = f"{spec.alias}.{spec.role} client", None
    said = f"librdkafka refused {spec.describe()}, built offline without connecting: {message}"
    if name == "sasl.mechanism" and str(value).strip().upper() == "GSSAPI":
        return ConfigError(key, value, f"{_GSSAPI} ({said})")
    password = _PASSWORDS.get(name or "")
    valid, hint = _hint(message, raw[password][1] if password in raw else None)
    return ConfigError(key, value, f"{valid}: {said}{hint}")


def check_client_builds(
    config: MirrorConfig, flow_names: Sequence[str] | None = None, *, resolve: bool = False
) -> BuildReport:
    """Construct (and close) every client of the given (default: enabled) flows, offline.

    ``resolve=True`` resolves secret references as the run does (``mirror run``), and a file
    missing here is refused; otherwise (``mirror validate``, which may run on another machine
    than the run) settings that still hold a reference or name a missing file are not loaded
    and are listed.
    """
    from confluent_kafka import KafkaException  # lazy: optional extra "kafka"

    start = time.perf_counter()
    left: set[str] = set()
    absent: set[str] = set()  # files not on this machine (validate)
    notes: list[str] = []
    specs = client_specs(config, flow_names, resolve=resolve, notes=notes)
    for token in dict.fromkeys(s.conf["oauth_cb"] for s in specs if "oauth_cb" in s.conf):
        token.check()  # MSK IAM: credentials and region sign a token before anything starts
    for spec in specs:
        conf, unresolved = _offline(spec.conf)
        left |= unresolved
        missing = _missing_files(conf)
        if missing and resolve:
            raise build_error(config, spec, next(iter(missing.values())))
        if missing:  # validate may run elsewhere than the run (a laptop, CI): noted, not refused
            absent.update(f"{k} ({conf[k]})" for k in missing)
            conf = _without(conf, set(missing))
        try:
            _construct(spec.role, conf)
        except KafkaException as exc:
            raise build_error(config, spec, exc.args[0].str()) from None
        except (ValueError, TypeError) as exc:  # a value of the wrong Python type
            raise build_error(config, spec, str(exc)) from None
    elapsed = (time.perf_counter() - start) * 1000
    return BuildReport(
        len(specs),
        elapsed,
        tuple(sorted(left)),
        tuple(sorted(absent)),
        tuple(dict.fromkeys(notes)),
    )
