"""Java ``.properties`` parsing, secret references and redaction.

MM2 reads ``mm2.properties`` with ``java.util.Properties``; we accept the same syntax (``=``, ``:``
or whitespace separators, ``#``/``!`` comments, backslash line continuations and escapes).
Secret values may be references (``${env:NAME}``, ``${secret:scope/key}``, ``${file:path:key}``,
and MM2's declared config providers) that stay unresolved until a Kafka client is built, and every
printed form is redacted. In flow (connector) settings, which hold no secrets, references are
resolved when the file is parsed (:func:`resolve_setting`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from mirror_lib.errors import ConfigError

REDACTED = "<redacted>"

_SENSITIVE = re.compile(
    r"(password|secret|sasl\.jaas\.config|token|credential|ssl\.key\.pem|"
    r"ssl\.keystore\.key|ssl\.key$|private)",
    re.IGNORECASE,
)
_REFERENCE = re.compile(r"\$\{(?P<kind>[A-Za-z0-9_.\-]+):(?P<body>[^}]*)\}")

SecretLookup = Callable[[str, str], str]
"""Resolves ``(scope, key)`` of a ``${secret:scope/key}`` reference (e.g. Databricks secrets)."""


def _unescape(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch != "\\" or i + 1 >= len(text):
            out.append(ch)
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
            out.append(chr(int(text[i + 2 : i + 6], 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(nxt, nxt))
        i += 2
    return "".join(out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    lines: list[tuple[int, str]] = []
    pending: str | None = None
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
            start = number
            pending = ""
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending += line[:-1]
            continue
        lines.append((start, pending + line))
        pending = None
    if pending:
        lines.append((start, pending))
    return lines


def parse_properties(text: str, repeated: list[str] | None = None) -> dict[str, str]:
    """Parse Java properties text into an ordered dict; a later duplicate key wins (as in Java),
    and ``repeated`` gets one warning per key set more than once (lines, never values)."""
    result: dict[str, str] = {}
    lines: dict[str, list[int]] = {}
    for number, line in _logical_lines(text):
        i = 0
        while i < len(line):
            ch = line[i]
            if ch == "\\":
                i += 2
                continue
            if ch in "=: \t\f":
                break
            i += 1
        key = line[:i]
        rest = line[i:].lstrip(" \t\f")
        if rest[:1] in ("=", ":") and (i >= len(line) or line[i] in " \t\f=:"):
            rest = rest[1:].lstrip(" \t\f")
        result[_unescape(key)] = _unescape(rest)
        lines.setdefault(_unescape(key), []).append(number)
    if repeated is not None:
        repeated.extend(
            f"{key} is set {len(at)} times (lines {', '.join(map(str, at))}): the last one is "
            "used, as Java does"
            for key, at in lines.items()
            if len(at) > 1
        )
    return result


def _escape(text: str, is_key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch in "\\\t\n\r\f":
            out.append({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "\f": "\\f"}[ch])
        elif ch in "\v\x1c\x1d\x1e\x85\u2028\u2029":  # line breaks to str.splitlines
            out.append(f"\\u{ord(ch):04x}")
        elif ch == " " and (is_key or i == 0):
            out.append("\\ ")
        elif is_key and ch in "=:#!":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def format_properties(props: Mapping[str, str], header: str = "") -> str:
    """Java properties text that :func:`parse_properties` reads back unchanged (secrets too)."""
    lines = [f"# {line}" for line in header.splitlines()]
    lines += [f"{_escape(k, True)} = {_escape(v, False)}" for k, v in props.items()]
    return "\n".join(lines) + "\n"


def read_properties_file(
    path: str | os.PathLike[str], repeated: list[str] | None = None
) -> dict[str, str]:
    """Read a properties file; a missing file is a :class:`ConfigError`; ``repeated`` as in
    :func:`parse_properties`.

    Text is UTF-8 (a leading byte-order mark is dropped); a file that is not valid UTF-8 is read
    as ISO-8859-1, the encoding Java's ``Properties.load`` (so MM2) uses, so it never fails.
    """
    p = Path(path)
    if not p.is_file():
        raise ConfigError("CONFIG", str(path), "a readable mm2.properties file")
    data = p.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, repeated)


def is_sensitive(key: str) -> bool:
    """True for keys whose values are secrets (passwords, JAAS configs, tokens, private keys)."""
    return bool(_SENSITIVE.search(key))


def has_reference(value: str) -> bool:
    """True when the value holds a ``${kind:...}`` reference that is resolved late."""
    return bool(_REFERENCE.search(value))


@dataclass(frozen=True)
class ConfigProvider:
    """A config provider as MM2 declares it (``config.providers.<name>.class``), or a built-in.

    ``kind`` is ``file`` (``${name:/path:key}``, a key of a properties file), ``dir``
    (``${name:/dir:file}``, a file's content), ``env`` (``${name:VAR}``) or ``secret``
    (``${name:scope/key}`` through a lookup function, e.g. Databricks secrets).
    """

    name: str
    kind: str
    allowed_paths: tuple[str, ...] = ()
    allowlist: str = ""


BUILTIN_PROVIDERS: dict[str, ConfigProvider] = {
    "env": ConfigProvider("env", "env"),
    "secret": ConfigProvider("secret", "secret"),
    "file": ConfigProvider("file", "file"),
}
_FORMS = {
    "env": "${%s:NAME}",
    "secret": "${%s:scope/key}",
    "file": "${%s:/path/file.properties:key}",
    "dir": "${%s:/path/dir:file}",
}
#: MM2's provider classes (``org.apache.kafka.common.config.provider.<class>``) -> kind.
PROVIDER_CLASSES = {
    "FileConfigProvider": "file",
    "DirectoryConfigProvider": "dir",
    "EnvVarConfigProvider": "env",
}


def parse_providers(props: Mapping[str, str]) -> dict[str, ConfigProvider]:
    """Built-in providers plus those declared with ``config.providers`` (MM2's syntax)."""
    providers = dict(BUILTIN_PROVIDERS)
    for name in [n.strip() for n in props.get("config.providers", "").split(",") if n.strip()]:
        key = f"config.providers.{name}.class"
        raw = props.get(key, "").strip()
        kind = PROVIDER_CLASSES.get(raw.rsplit(".", 1)[-1])
        if kind is None:
            raise ConfigError(
                key,
                raw or None,
                "org.apache.kafka.common.config.provider.FileConfigProvider, "
                "DirectoryConfigProvider or EnvVarConfigProvider (other providers cannot run "
                "without a JVM: use ${env:NAME} or ${secret:scope/key} instead)",
            )
        param = f"config.providers.{name}.param."
        allowed = props.get(param + "allowed.paths", "")
        providers[name] = ConfigProvider(
            name,
            kind,
            tuple(p.strip() for p in allowed.split(",") if p.strip()),
            props.get(param + "allowlist.pattern", "").strip(),
        )
    return providers


def _valid_forms(providers: Mapping[str, ConfigProvider]) -> str:
    return ", ".join(_FORMS[p.kind] % name for name, p in providers.items())


def check_references(
    key: str, value: str, providers: Mapping[str, ConfigProvider] | None = None
) -> None:
    """Reject references to undeclared providers or of the wrong form before anything starts."""
    providers = BUILTIN_PROVIDERS if providers is None else providers
    for match in _REFERENCE.finditer(value):
        provider = providers.get(match["kind"])
        body = match["body"]
        if provider is not None and (
            (provider.kind == "env" and body and ":" not in body)
            or (provider.kind == "secret" and re.fullmatch(r"[^/]+/.+", body))
            or (provider.kind in ("file", "dir") and re.fullmatch(r".+:[^:]+", body))
        ):
            continue
        raise ConfigError(
            key,
            REDACTED if is_sensitive(key) else value,
            "references of the form " + _valid_forms(providers),
        )


def redact_value(key: str, value: str) -> str:
    """The printable form of one setting: secrets hidden, references shown unresolved."""
    return REDACTED if is_sensitive(key) else value


def redact(props: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``props`` safe to print or log."""
    return {k: redact_value(k, v) for k, v in props.items()}


def _check_allowed(key: str, ref: str, path: str, provider: ConfigProvider) -> None:
    if not provider.allowed_paths:
        return
    real = Path(path).resolve()
    if not any(real.is_relative_to(Path(a).resolve()) for a in provider.allowed_paths):
        raise ConfigError(
            key,
            ref,
            f"a path under config.providers.{provider.name}.param.allowed.paths "
            f"({', '.join(provider.allowed_paths)})",
        )


def resolve_references(
    key: str,
    value: str,
    secret_lookup: SecretLookup | None = None,
    providers: Mapping[str, ConfigProvider] | None = None,
) -> str:
    """Replace every reference in ``value`` by its secret; called only when clients are built."""
    providers = BUILTIN_PROVIDERS if providers is None else providers

    def resolve(match: re.Match[str]) -> str:
        provider, body = providers.get(match["kind"]), match["body"]
        if provider is None:
            raise ConfigError(key, match[0], "references of the form " + _valid_forms(providers))
        if provider.kind == "env":
            if body not in os.environ:
                raise ConfigError(key, match[0], f"environment variable {body} to be set")
            if provider.allowlist and not re.fullmatch(provider.allowlist, body):
                raise ConfigError(
                    key,
                    match[0],
                    f"a variable matching config.providers.{provider.name}.param.allowlist.pattern",
                )
            return os.environ[body]
        if provider.kind == "secret":
            scope, _, name = body.partition("/")
            if secret_lookup is None:
                raise ConfigError(
                    key, match[0], "a secret lookup (pass secret_lookup, e.g. Databricks secrets)"
                )
            return secret_lookup(scope, name)
        path, _, name = body.rpartition(":")
        _check_allowed(key, match[0], path, provider)
        if provider.kind == "dir":
            file = Path(path) / name
            if not file.is_file():
                raise ConfigError(key, match[0], f"a readable file {name} in directory {path}")
            return file.read_text(encoding="utf-8")
        props = read_properties_file(path)
        if name not in props:
            raise ConfigError(key, match[0], f"key {name} in {path}")
        return props[name]

    return _REFERENCE.sub(resolve, value)


def resolve_setting(
    key: str, value: str, providers: Mapping[str, ConfigProvider] | None = None
) -> str:
    """``value`` of a flow (connector) setting with its references resolved, when parsing.

    MM2 resolves config providers in every setting; ``${secret:...}`` needs a lookup that only
    exists when clients are built, so it is refused here.
    """
    providers = BUILTIN_PROVIDERS if providers is None else providers
    check_references(key, value, providers)
    for match in _REFERENCE.finditer(value):
        if providers[match["kind"]].kind == "secret":
            raise ConfigError(
                key,
                value,
                "a value without " + _FORMS["secret"] % match["kind"] + ": secret references "
                "are resolved only in client settings (<alias>.*, <source>-><target>.consumer.* "
                "and the like); write the value, or use ${env:NAME} or a file provider",
            )
    return resolve_references(key, value, None, providers)
