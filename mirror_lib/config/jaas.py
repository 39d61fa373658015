"""``sasl.jaas.config`` read the way Kafka's Java client reads it, translated to librdkafka.

Kafka parses the value with ``java.io.StreamTokenizer`` (``JaasConfig``): one entry
``<LoginModule> <flag> key=value ... ;`` where a value is a double-quoted string, a single-quoted
string or an unquoted word, options come in any order, and ``//`` / ``/* */`` are comments.
librdkafka has no JAAS: the options become ``sasl.username``/``sasl.password`` (PLAIN, SCRAM),
``sasl.kerberos.*`` (GSSAPI) or ``sasl.oauthbearer.*`` (OAUTHBEARER). Nothing here ever shows a
value in an error: the whole setting is a secret.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mirror_lib.config.oauth import JWT_BEARER
from mirror_lib.config.properties import REDACTED
from mirror_lib.errors import ConfigError

_FLAGS = ("required", "requisite", "sufficient", "optional")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f"}
#: JAAS option of OAuthBearerLoginModule -> librdkafka's OIDC setting.
_OIDC_OPTIONS = {
    "clientId": "sasl.oauthbearer.client.id",
    "clientSecret": "sasl.oauthbearer.client.secret",
    "scope": "sasl.oauthbearer.scope",
}
_OIDC_NAMES = {_OIDC_OPTIONS["clientId"], _OIDC_OPTIONS["clientSecret"]}


@dataclass(frozen=True)
class JaasEntry:
    """One login module entry: the module's class name, its control flag and its options."""

    module: str
    flag: str
    options: dict[str, str]

    @property
    def simple_name(self) -> str:
        """The class name without its package, e.g. ``PlainLoginModule``."""
        return self.module.rsplit(".", 1)[-1]


def _is_word_char(ch: str) -> bool:
    return ch.isalnum() or ch in "._-$" or ord(ch) >= 160


def _tokens(text: str, key: str) -> list[tuple[str, str]]:
    """(kind, text) tokens: kind is ``word``, ``string`` or the punctuation character itself."""
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch.isspace():
            i += 1
        elif text.startswith("//", i):
            end = text.find("\n", i)
            i = len(text) if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise _error(key, "a '/*' comment is not closed")
            i = end + 2
        elif ch in "\"'":
            value, i = _quoted(text, i, key)
            tokens.append(("string", value))
        elif _is_word_char(ch):
            start = i
            while i < len(text) and _is_word_char(text[i]):
                i += 1
            tokens.append(("word", text[start:i]))
        else:
            tokens.append((ch, ch))
            i += 1
    return tokens


def _quoted(text: str, start: int, key: str) -> tuple[str, int]:
    quote = text[start]
    out: list[str] = []
    i = start + 1
    while i < len(text):
        ch = text[i]
        if ch == quote:
            return "".join(out), i + 1
        if ch == "\\" and i + 1 < len(text):
            nxt = text[i + 1]
            out.append(_ESCAPES.get(nxt, nxt))
            i += 2
            continue
        if ch == "\n":
            break
        out.append(ch)
        i += 1
    raise _error(key, f"a value opened with {quote} is not closed")


def _error(key: str, problem: str) -> ConfigError:
    return ConfigError(
        key,
        REDACTED,
        "'<LoginModule class> required key=\"value\" key='value' key=word ...;' "
        f"(one login module, ended by ';'): {problem}",
    )


def parse_jaas(text: str, key: str = "sasl.jaas.config") -> JaasEntry:
    """Parse one ``sasl.jaas.config`` value; a :class:`ConfigError` names ``key`` and problem."""
    tokens = _tokens(text, key)
    if len(tokens) < 2 or tokens[0][0] != "word":
        raise _error(key, "no login module class and control flag")
    module, flag = tokens[0][1], tokens[1][1]
    if tokens[1][0] != "word" or flag.lower() not in _FLAGS:
        raise _error(key, "the control flag after the login module must be " + "/".join(_FLAGS))
    options: dict[str, str] = {}
    i = 2
    while i < len(tokens) and tokens[i][0] != ";":
        name_kind, name = tokens[i]
        if name_kind not in ("word", "string"):
            raise _error(key, f"unexpected {name!r} where an option name was expected")
        if i + 2 >= len(tokens) or tokens[i + 1][0] != "=":
            raise _error(key, f"option {name!r} has no '=value'")
        value_kind, value = tokens[i + 2]
        if value_kind not in ("word", "string"):
            raise _error(
                key, f"option {name!r} has no value (quote values with special characters)"
            )
        if value_kind == "word" and value[0].isdigit():
            raise _error(key, f"the unquoted value of {name!r} starts with a digit: quote it")
        options[name] = value
        i += 3
    if i >= len(tokens):
        raise _error(key, "the entry is not ended by ';'")
    if i + 1 < len(tokens):
        raise _error(key, "more than one login module (Kafka clients take exactly one)")
    return JaasEntry(module, flag.lower(), options)


def _required(entry: JaasEntry, key: str, *names: str) -> list[str]:
    values = []
    for name in names:
        value = entry.options.get(name, "")
        if not value:
            raise _error(key, f"{entry.simple_name} needs a non-empty {name}")
        values.append(value)
    return values


#: Options librdkafka behaves like without being told, with the value it behaves like.
_SAME: dict[str, dict[str, str]] = {
    "PlainLoginModule": {},
    "ScramLoginModule": {"tokenauth": "false"},
    # librdkafka logs in with kinit and the keytab, never prompts, keeps the key for re-logins
    "Krb5LoginModule": {"storeKey": "true", "doNotPrompt": "true", "isInitiator": "true"},
    "OAuthBearerLoginModule": {},
}
_WHY_IGNORED = {
    "Krb5LoginModule": "librdkafka logs in with `kinit` and the keytab (sasl.kerberos.kinit.cmd) "
    "and re-logins by itself (sasl.kerberos.min.time.before.relogin)",
}


def name_leftovers(
    entry: JaasEntry, key: str, used: set[str], notes: list[str] | None, why: str | None = None
) -> None:
    """One warning naming every option that has no librdkafka equivalent (never a value)."""
    same = _SAME.get(entry.simple_name, {})
    left = [
        name
        for name, value in entry.options.items()
        if name not in used and same.get(name) != value.strip().lower()
    ]
    if left and notes is not None:
        why = why or _WHY_IGNORED.get(entry.simple_name, "librdkafka has no equivalent")
        notes.append(f"{key}: {entry.simple_name} option(s) {', '.join(left)} ignored: {why}")


def _kerberos(entry: JaasEntry, key: str) -> dict[str, str]:
    if entry.options.get("useKeyTab", "false").lower() != "true":
        raise _error(key, "Krb5LoginModule without useKeyTab=true (librdkafka needs a keytab)")
    keytab, principal = _required(entry, key, "keyTab", "principal")
    conf = {"sasl.kerberos.keytab": keytab, "sasl.kerberos.principal": principal}
    if entry.options.get("serviceName"):  # Java's JAAS serviceName (Kafka's default: none)
        conf["sasl.kerberos.service.name"] = entry.options["serviceName"]
    return conf


def _oauthbearer(
    entry: JaasEntry, key: str, given: Mapping[str, str]
) -> tuple[dict[str, str], set[str]]:
    """OIDC (``clientId``/``clientSecret``/``scope``, or Kafka 4.1's properties in ``given``,
    which win as in Java; ``extension_<name>`` -> sasl.oauthbearer.extensions) or the unsecured
    JWTs of tests (``unsecuredLogin*`` -> sasl.oauthbearer.config)."""
    opts = entry.options
    jwt_bearer = given.get("sasl.oauthbearer.grant.type") == JWT_BEARER
    if jwt_bearer or {"clientId", "clientSecret"} & set(opts) or _OIDC_NAMES & set(given):
        conf = {"sasl.oauthbearer.method": "oidc"}
        for option, name in _OIDC_OPTIONS.items():
            value = given.get(name) or opts.get(option)
            if value:
                conf[name] = value
            elif option != "scope" and not jwt_bearer:
                raise _error(
                    key,
                    f"OAuthBearerLoginModule needs {option}, or the property "
                    f"{name.replace('oauthbearer.', 'oauthbearer.client.credentials.')} (OIDC)",
                )
        used = set(_OIDC_OPTIONS)
        extensions = {k: v for k, v in opts.items() if k.startswith("extension_")}
        if extensions:  # e.g. Confluent Cloud's logicalCluster and identityPoolId
            conf["sasl.oauthbearer.extensions"] = ",".join(
                f"{k.removeprefix('extension_')}={v}" for k, v in extensions.items()
            )
            used.update(extensions)
        return conf, used
    if opts.get("unsecuredLoginStringClaim_sub"):
        parts = {"principal": opts["unsecuredLoginStringClaim_sub"]}
        used = {"unsecuredLoginStringClaim_sub"}
        for name, value in opts.items():
            if name == "unsecuredLoginLifetimeSeconds":
                parts["lifeSeconds"] = value
            elif name.startswith("unsecuredLoginExtension_"):
                parts["extension_" + name.removeprefix("unsecuredLoginExtension_")] = value
            else:
                continue
            used.add(name)
        return {
            "enable.sasl.oauthbearer.unsecure.jwt": "true",
            "sasl.oauthbearer.config": " ".join(f"{k}={v}" for k, v in parts.items()),
        }, used
    raise _error(
        key,
        "OAuthBearerLoginModule needs clientId and clientSecret (OIDC), or the properties "
        "sasl.oauthbearer.client.credentials.client.id and .client.secret",
    )


def translate_jaas(
    text: str,
    key: str = "sasl.jaas.config",
    notes: list[str] | None = None,
    oauth: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """librdkafka settings equivalent to one ``sasl.jaas.config``; never an empty credential.

    Options with a librdkafka equivalent are translated; one that would change what is
    authenticated (SCRAM ``tokenauth=true``) is refused; the others are named in one warning
    appended to ``notes``.
    """
    entry = parse_jaas(text, key)
    name = entry.simple_name
    if name in ("PlainLoginModule", "ScramLoginModule"):
        username, password = _required(entry, key, "username", "password")
        if name == "ScramLoginModule" and entry.options.get("tokenauth", "").lower() == "true":
            raise _error(
                key,
                "tokenauth=true (a delegation token): librdkafka cannot authenticate with "
                "delegation tokens; use a SCRAM user's username and password, or OAUTHBEARER",
            )
        conf, used = (
            {"sasl.username": username, "sasl.password": password},
            {"username", "password"},
        )
    elif name == "Krb5LoginModule":
        conf = _kerberos(entry, key)
        used = {"useKeyTab", "keyTab", "principal", "serviceName"}
    elif name == "OAuthBearerLoginModule":
        conf, used = _oauthbearer(entry, key, oauth or {})
    else:
        raise ConfigError(
            key,
            entry.module,
            "PlainLoginModule, ScramLoginModule, OAuthBearerLoginModule (OIDC client credentials) "
            "or Krb5LoginModule with a keytab: librdkafka has no other login modules",
        )
    name_leftovers(entry, key, used, notes)
    return conf
