"""Java Kafka client properties (what MM2 configs hold) -> librdkafka properties (what we run).

One table decides each Java name: **same** (librdkafka has the name: it passes, values checked
against librdkafka's own list in :mod:`mirror_lib.config.librdkafka_conf`), **renamed** (an
equivalent with another name or unit), **ignored** (no meaning for us: one warning), or
**refused** (dropping it would change security: an error naming the key and the way out). A key
no table names is ignored with one warning, as MM2's Java clients ignore it, unless
:data:`UNKNOWN_REFUSED` says that dropping it would change security or delivery. TLS
stores are translated as a group (type, location, passwords: :mod:`mirror_lib.config.tls_stores`).
Values are trimmed as Java's ConfigDef trims them. Input values may still hold unresolved
references (``mirror validate``); such values are not checked.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable, Mapping
from typing import Any

from mirror_lib.config.gcp_login import take_gcp_login
from mirror_lib.config.jaas import translate_jaas
from mirror_lib.config.librdkafka_conf import PROPERTIES
from mirror_lib.config.msk_iam import take_msk_iam
from mirror_lib.config.oauth import OAUTH_NAMES, take_oauth_properties
from mirror_lib.config.properties import has_reference, redact_value
from mirror_lib.config.settings import BY_KEY
from mirror_lib.config.tls_stores import keystore, normalize_pem, truststore
from mirror_lib.errors import ConfigError

Props = Mapping[str, tuple[str, str]]
"""key -> (value, the key as the user wrote it, e.g. ``A.producer.linger.ms``)."""

ROLE_CODES = {"consumer": "C", "producer": "P", "admin": "A"}


def _kib(value: str) -> str:
    return str(max(1, math.ceil(int(value) / 1024)))


def _os_default(value: str) -> str:
    return "0" if value.strip() == "-1" else value


#: Java name -> (librdkafka name, value conversion or None).
RENAMED: dict[str, tuple[str, Callable[[str], str] | None]] = {
    "max.request.size": ("message.max.bytes", None),
    "fetch.max.wait.ms": ("fetch.wait.max.ms", None),
    "buffer.memory": ("queue.buffering.max.kbytes", _kib),
    "send.buffer.bytes": ("socket.send.buffer.bytes", _os_default),
    "receive.buffer.bytes": ("socket.receive.buffer.bytes", _os_default),
    "compression.gzip.level": ("compression.level", None),
    "compression.lz4.level": ("compression.level", None),
    "compression.zstd.level": ("compression.level", None),
    "sasl.oauthbearer.assertion.template.file": (
        "sasl.oauthbearer.assertion.jwt.template.file",
        None,
    ),
}

_NO_MEANING = "has no meaning for mirror_lib (bytes are copied as they are)"
_JVM_ONLY = "is a JVM setting with no librdkafka equivalent"
#: Confluent's client config snippets carry these (Schema Registry and its serializers).
_SCHEMA_REGISTRY = (
    "a Schema Registry serializer setting: bytes are copied as they are, schema ids with them"
)
#: Java names ignored with one warning, and why.
IGNORED: dict[str, str] = {
    "max.poll.records": "librdkafka fetches by bytes (fetch.max.bytes, max.partition.fetch.bytes)"
    " and has it only for share consumers",
    "key.serializer": _NO_MEANING,
    "value.serializer": _NO_MEANING,
    "key.deserializer": _NO_MEANING,
    "value.deserializer": _NO_MEANING,
    "partitioner.class": "records keep their source partition",
    "partitioner.ignore.keys": "records keep their source partition",
    "partitioner.adaptive.partitioning.enable": "records keep their source partition",
    "partitioner.availability.timeout.ms": "records keep their source partition",
    "partition.assignment.strategy": "mirror_lib assigns partitions itself (no subscription)",
    "interceptor.classes": _JVM_ONLY,
    "metric.reporters": _JVM_ONLY,
    "auto.include.jmx.reporter": _JVM_ONLY,
    "security.providers": _JVM_ONLY,
    "ssl.keymanager.algorithm": _JVM_ONLY,
    "ssl.trustmanager.algorithm": _JVM_ONLY,
    "ssl.secure.random.implementation": _JVM_ONLY,
    "ssl.provider": _JVM_ONLY,
    "ssl.protocol": "librdkafka negotiates the highest TLS version both sides support",
    "ssl.enabled.protocols": "librdkafka negotiates the highest TLS version both sides support",
    "max.block.ms": "librdkafka's produce() does not block",
    "metadata.max.idle.ms": _JVM_ONLY,
    "default.api.timeout.ms": "mirror_lib sets its own call timeouts (admin.timeout.ms)",
    "exclude.internal.topics": "mirror_lib's topic filters decide",
    "socket.connection.setup.timeout.max.ms": "librdkafka has socket.connection.setup.timeout.ms",
    "sasl.kerberos.ticket.renew.window.factor": _JVM_ONLY,
    "sasl.kerberos.ticket.renew.jitter": _JVM_ONLY,
    "internal.leave.group.on.close": _JVM_ONLY,
    **dict.fromkeys(
        (
            "auto.register.schemas",
            "use.latest.version",
            "latest.compatibility.strict",
            "normalize.schemas",
            "use.schema.id",
            "key.subject.name.strategy",
            "value.subject.name.strategy",
            "specific.avro.reader",
        ),
        _SCHEMA_REGISTRY,
    ),
}
IGNORED_PREFIXES: dict[str, str] = {
    "metrics.": _JVM_ONLY,
    "key.converter": "a Connect converter: bytes are copied as they are",
    "value.converter": "a Connect converter: bytes are copied as they are",
    "header.converter": "a Connect converter: bytes are copied as they are",
    "sasl.login.": "Java login tuning; librdkafka refreshes logins itself",
    "sasl.oauthbearer.jwks.endpoint.": "a broker-side setting",
    "sasl.oauthbearer.expected.": "a broker-side setting",
    "sasl.oauthbearer.clock.skew.seconds": "a broker-side setting",
    "sasl.oauthbearer.scope.claim.name": "a broker-side setting",
    "sasl.oauthbearer.sub.claim.name": "a broker-side setting",
    "confluent.": "a Confluent JVM plugin setting",
    "schema.registry.": _SCHEMA_REGISTRY,
    "basic.auth.": _SCHEMA_REGISTRY,
    "bearer.auth.": _SCHEMA_REGISTRY,
}
#: Java names refused, with the way out.
REFUSED: dict[str, str] = {
    "sasl.client.callback.handler.class": (
        "librdkafka cannot load Java callback handlers; use sasl.jaas.config with PLAIN, SCRAM, "
        "OAUTHBEARER (OIDC) or MSK IAM, or librdkafka's sasl.* settings"
    ),
    "sasl.login.class": "librdkafka cannot load Java login classes; use sasl.jaas.config",
    "ssl.engine.factory.class": "librdkafka uses OpenSSL; use ssl.ca.location / ssl.keystore.*",
}
#: Where an unknown client key is refused instead of ignored: keys under these prefixes, and
#: these names and their near-spellings, choose how a client authenticates and encrypts or how
#: records are delivered; dropping one would quietly connect or deliver otherwise.
#: Prefix (ends with ".") or name -> what dropping it would change.
UNKNOWN_REFUSED: dict[str, str] = {
    "security.": "the connection's security",
    "ssl.": "TLS (what is trusted, which certificate is shown)",
    "sasl.": "how the client logs in",
    "security.protocol": "whether the connection is encrypted and authenticated",
    "enable.idempotence": "delivery (duplicates after a retry)",
    "acks": "delivery (records acknowledged before every replica has them)",
    "max.in.flight.requests.per.connection": "delivery (order after a retry)",
    "isolation.level": "which records are read (aborted ones)",
}
#: How close a key must be to a name of :data:`UNKNOWN_REFUSED` to count as its misspelling.
_NEAR = 0.85
_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI", "OAUTHBEARER")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: What String.trim() removes: Java's ConfigDef trims every typed client value (e.g. "changeit ").
_JAVA_WHITESPACE = "".join(chr(c) for c in range(33))
#: Empty values that mean something (empty = no hostname verification): never dropped as unused.
_MEANINGFUL_EMPTY = frozenset({"ssl.endpoint.identification.algorithm"})
_PEM_SETTINGS = frozenset({"ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem"})
#: librdkafka name -> the Java names that become it (errors of built clients name the user's key).
_SOURCES: dict[str, tuple[str, ...]] = {
    "ssl.ca.location": ("ssl.truststore.location",),
    "ssl.ca.pem": ("ssl.truststore.certificates", "ssl.truststore.location"),  # a Java store
    "ssl.certificate.location": ("ssl.keystore.location",),
    "ssl.key.location": ("ssl.keystore.location",),
    "ssl.certificate.pem": ("ssl.keystore.certificate.chain", "ssl.keystore.location"),
    "ssl.key.pem": ("ssl.keystore.key", "ssl.keystore.location"),
    "sasl.mechanisms": ("sasl.mechanism",),
    "sasl.mechanism": ("sasl.mechanisms",),
}


def java_names(name: str) -> tuple[str, ...]:
    """The client settings a user may have written for librdkafka's ``name``, most likely first."""
    found = list(_SOURCES.get(name, ()))
    found += [java for java, (target, _) in RENAMED.items() if target == name]
    if name.startswith("sasl.oauthbearer."):  # Kafka 4.1's names, then what chose the grant
        found += [java for java, target in OAUTH_NAMES.items() if target == name]
        found.append("sasl.oauthbearer.jwt.retriever.class")
    if name.startswith("sasl.") and name not in ("sasl.mechanism", "sasl.mechanisms"):
        found.append("sasl.jaas.config")
    return (name, *found)


def java_trim(value: str) -> str:
    """``value`` as Java's ``String.trim()`` leaves it (ConfigDef trims client values)."""
    return value.strip(_JAVA_WHITESPACE)


def _unused_empties(props: dict[str, tuple[str, str]], notes: list[str]) -> None:
    """Drop empty ``sasl.*``/``ssl.*`` values the security protocol does not use (templates
    render unused settings empty; Java never reads them), with one warning."""
    protocol, where = props.get("security.protocol", ("PLAINTEXT", ""))
    protocol = protocol.upper()
    if has_reference(protocol) or protocol not in PROTOCOLS:
        return
    unused = [
        p for p, used in (("ssl.", "SSL" in protocol), ("sasl.", "SASL" in protocol)) if not used
    ]
    empty = [
        key
        for key, (value, _) in props.items()
        if not value and key.startswith(tuple(unused)) and key not in _MEANINGFUL_EMPTY
    ]
    if empty:
        named = f"{where} = {protocol}" if where else f"security.protocol = {protocol} (default)"
        notes.append(
            f"{', '.join(props[k][1] for k in empty)}: empty and unused with {named}; "
            "treated as not set"
        )
    for key in empty:
        del props[key]


def checked_protocol(where: str, value: str, origin: str | None = None) -> str:
    """A ``security.protocol`` value in librdkafka's spelling; one that names no protocol is a
    ConfigError on ``where`` (MM2 refuses it when it reads its configuration)."""
    if value.strip().upper() not in PROTOCOLS:
        raise ConfigError(where, value, "one of " + ", ".join(PROTOCOLS), origin)
    return value.strip().upper()


def ignored_reason(key: str) -> str | None:
    """Why the Java client setting ``key`` is ignored (one warning), or None."""
    if key in IGNORED:
        return IGNORED[key]
    if ".override." in key or key.startswith("override."):
        return (
            "a Connect client override, which mirror_lib takes, as MM2 does, only as "
            "<source>-><target>.producer.override.* (the producer of the replicated records); "
            "set the client setting itself"
        )
    return next((why for p, why in IGNORED_PREFIXES.items() if key.startswith(p)), None)


def _check_value(name: str, value: str, where: str) -> str:
    """``value`` normalized for librdkafka, or a ConfigError (secrets never shown)."""
    try:
        return _checked(name, value, where)
    except ConfigError as exc:
        raise ConfigError(exc.key, redact_value(name, value), exc.expected) from None


def _checked(name: str, value: str, where: str) -> str:
    if has_reference(value):
        return value
    if name in ("sasl.username", "sasl.password") and not value:
        raise ConfigError(where, value, "a non-empty credential (or no setting at all)")
    if name == "security.protocol":
        return checked_protocol(where, value)
    if name in ("sasl.mechanism", "sasl.mechanisms"):
        if value.strip().upper() not in _MECHANISMS:
            raise ConfigError(
                where,
                value,
                "one of " + ", ".join(_MECHANISMS) + ", or AWS_MSK_IAM with its "
                "IAMLoginModule (librdkafka has no other mechanism)",
            )
        return value.strip().upper()
    if name in _PEM_SETTINGS:
        return normalize_pem(value)
    if name == "ssl.endpoint.identification.algorithm":
        return value.strip().lower() or "none"  # Java: empty = no hostname verification
    if name == "auto.offset.reset" and value.strip().lower() == "none":
        return "error"
    if name == "ssl.cipher.suites" and re.search(r"(^|,)\s*(TLS|SSL)_\w+_WITH_", value):
        raise ConfigError(
            where,
            value,
            "OpenSSL cipher names (e.g. ECDHE-RSA-AES256-GCM-SHA384): `openssl ciphers -stdname` "
            "lists the Java (IANA) name next to each OpenSSL name",
        )
    _roles, kind, rng = PROPERTIES[name]
    text = value.strip()
    if kind in ("boolean", "enum value"):
        allowed = [v.strip() for v in rng.split(",")]
        match = [a for a in allowed if a.lower() == text.lower()]
        if not match:
            raise ConfigError(where, value, "one of " + ", ".join(allowed))
        return match[0]  # librdkafka's spelling (RS256, true)
    if kind in ("integer", "float") and " .. " in rng:
        if name in ("acks", "request.required.acks") and text.lower() == "all":
            return "all"
        try:
            number = float(text) if kind == "float" else int(text)
        except ValueError:
            raise ConfigError(where, value, f"a number in {rng}") from None
        low, high = (float(x) for x in rng.split(" .. "))
        if not low <= number <= high:
            raise ConfigError(where, value, f"a number in {rng} (librdkafka's range)")
        return text
    return value


def left_out(key: str, role: str) -> bool:
    """Whether :func:`translate` leaves the setting ``key`` out of ``role``'s client: ignored
    (also as unknown), or a setting librdkafka has only for another role (``mirror validate``
    lists none of them)."""
    if ignored_reason(key) is not None:
        return True
    name = RENAMED.get(key, (key, None))[0]
    if name not in PROPERTIES:
        return unknown_refused(key) is None  # the rest are translated as groups, or refused
    return not _applies(name, role)


def _applies(name: str, role: str) -> bool:
    code = PROPERTIES[name][0]
    return code in ("*", ROLE_CODES[role])


def _closest(name: str) -> str:
    """ "; did you mean ...?" with the key closest to ``name`` that mirror_lib uses (a client
    setting, or a flow setting, which belongs at the top level or to a flow), or ""."""
    close = difflib.get_close_matches(name, [*PROPERTIES, *RENAMED, *BY_KEY], n=1)
    if not close:
        return ""
    if close[0] in BY_KEY and close[0] not in PROPERTIES:
        return (
            f"; did you mean {close[0]!r}? (a flow setting: set it at the top level or as "
            f"<source>-><target>.{close[0]})"
        )
    return f"; did you mean {close[0]!r}?"


def unknown_refused(name: str) -> str | None:
    """What dropping the unknown client key ``name`` would change, when that refuses it
    (:data:`UNKNOWN_REFUSED`); None when it is ignored with a warning."""
    for entry, why in UNKNOWN_REFUSED.items():
        if not entry.endswith(".") and difflib.SequenceMatcher(None, name, entry).ratio() >= _NEAR:
            return why
    for entry, why in UNKNOWN_REFUSED.items():
        if entry.endswith(".") and name.startswith(entry):
            return why
    return None


def _unknown(name: str, value: str, where: str) -> str:
    """The warning for a client key neither librdkafka nor mirror_lib knows, which is dropped
    as MM2's Java clients drop it; a ConfigError when dropping it would change security or
    delivery (:func:`unknown_refused`)."""
    hint = _closest(name)
    why = unknown_refused(name)
    if why is not None:
        raise ConfigError(
            where,
            redact_value(name, value),
            "a librdkafka property or a Java client property mirror_lib translates (see "
            f"docs/mirrormaker2.md): an unknown key here is refused, not ignored, since "
            f"dropping it would change {why}{hint}",
        )
    return (
        f"{where} is ignored: not a client setting librdkafka or mirror_lib knows (MM2's Java "
        f'clients ignore it too, logging "supplied but isn\'t a known config"){hint}'
    )


def translate(
    props: Props, role: str, role_keys: frozenset[str] = frozenset()
) -> tuple[dict[str, Any], list[str]]:
    """librdkafka settings for ``role`` from Java-style ``props``, and the warnings to show once.

    ``role_keys`` are the keys set for this role specifically (``<alias>.<role>.<key>``): a
    setting librdkafka only knows for another role is dropped silently when it came from the
    cluster level (it is meant for the other clients) and with a warning when it was set here.
    """
    rest = {key: (java_trim(value), where) for key, (value, where) in props.items()}
    out: dict[str, Any] = {}
    notes: list[str] = []
    _unused_empties(rest, notes)
    truststore(rest, out, notes)
    keystore(rest, out, notes)
    take_msk_iam(rest, out, notes)
    take_gcp_login(rest, out, notes)
    oauth = take_oauth_properties(rest, notes)
    handler = rest.pop("sasl.login.callback.handler.class", None)
    if handler and not handler[0].strip().endswith("OAuthBearerLoginCallbackHandler"):
        raise ConfigError(handler[1], handler[0], REFUSED["sasl.client.callback.handler.class"])
    jaas: dict[str, str] = {}
    for key, (value, where) in rest.items():
        if key == "sasl.jaas.config":
            try:
                jaas = translate_jaas(value, where, notes, oauth)
                out.update(jaas)
            except ConfigError:
                if not has_reference(value):
                    raise
                # validate, unresolved: the whole JAAS text comes from a secret; parsed at run
                out.update({"sasl.username": value, "sasl.password": value})
            continue
        if key in REFUSED:
            raise ConfigError(where, value, REFUSED[key])
        reason = ignored_reason(key)
        if reason is not None:
            notes.append(f"{where} is ignored: {reason}")
            continue
        name, convert = RENAMED.get(key, (key, None))
        if name not in PROPERTIES:
            notes.append(_unknown(key, value, where))
            continue
        if not _applies(name, role):
            if key in role_keys:
                notes.append(f"{where} is ignored: librdkafka's {role} has no {name}")
            continue
        if convert is not None and not has_reference(value):
            try:
                value = convert(value)
            except ValueError:
                raise ConfigError(where, value, "a whole number") from None
        out[name] = _check_value(name, value, where)
    for name, value in oauth.items():  # no OAuthBearerLoginModule took them: as they are
        out.setdefault(name, value)
    _service_name(jaas, rest)
    return out, notes


def _service_name(jaas: dict[str, str], rest: dict[str, tuple[str, str]]) -> None:
    """Kafka refuses a JAAS ``serviceName`` that differs from ``sasl.kerberos.service.name``
    ("Conflicting serviceName values"); either one alone is used."""
    name, setting = "sasl.kerberos.service.name", rest.get("sasl.kerberos.service.name")
    if name in jaas and setting is not None and jaas[name] != setting[0]:
        raise ConfigError(
            setting[1],
            setting[0],
            f"the serviceName of {rest['sasl.jaas.config'][1]} or no setting: Kafka refuses "
            "conflicting serviceName values in sasl.jaas.config and sasl.kerberos.service.name",
        )
