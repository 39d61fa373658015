"""``bootstrap.servers`` checked offline, as Kafka's Java clients read it.

librdkafka reads a bad port without a word (``kafka:abc`` becomes ``kafka:0``, a port past 65535
wraps around) and an IPv6 address without brackets as a host on port 9092, so a typo would only
show as connection failures once a run starts. Java's clients (``ClientUtils``) refuse a server
without a port and ignore a ``SASL_SSL://``-style prefix; both are accepted here as there.
"""

from __future__ import annotations

import re

from mirror_lib.errors import ConfigError

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9_+.-]*://")
_NAME = re.compile(r"[^\s/\[\]@]+")  # a host name (an IDN too) or an IPv4 address
_BRACKETED = re.compile(r"^\[(?P<host>[0-9A-Za-z:.%_-]+)\]:(?P<port>.*)$")
VALID_FORM = (
    "host:port[,host:port...] with ports from 1 to 65535, e.g. kafka-1:9092,kafka-2:9092 "
    "(an IPv6 address in brackets: [::1]:9092; a prefix such as SASL_SSL:// is allowed)"
)


def _server_problem(server: str) -> str | None:
    """What is wrong with one entry of the list, or None."""
    rest = _SCHEME.sub("", server, count=1)
    bracketed = _BRACKETED.match(rest)
    if bracketed:
        host, port = bracketed["host"], bracketed["port"]
    elif ":" not in rest:
        return f"{server!r} has no port"
    else:
        host, port = rest.rsplit(":", 1)
        if ":" in host:
            return f"{server!r} is an IPv6 address without brackets (librdkafka reads it wrong)"
        if not _NAME.fullmatch(host):
            return f"{server!r} has no valid host name" if host else f"{server!r} has no host"
    if not port.isdigit():
        return f"{server!r} has port {port!r}, not a number (librdkafka would read it as 0)"
    if not 1 <= int(port) <= 65535:
        return f"{server!r} has port {port}, outside 1..65535"
    return None


def check_bootstrap(key: str, value: str, origin: str | None = None) -> None:
    """Refuse a ``bootstrap.servers`` value that names no valid ``host:port``: a
    :class:`ConfigError` naming ``key``, the value, the valid form and the bad entry."""
    servers = [s.strip() for s in value.split(",") if s.strip()]
    problems = [p for p in map(_server_problem, servers) if p] or (
        [] if servers else ["no server is listed"]
    )
    if problems:
        raise ConfigError(key, value, f"{VALID_FORM}: {'; '.join(problems)}", origin)
