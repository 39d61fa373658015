"""Java TLS stores and inline PEM -> librdkafka's ``ssl.*`` settings.

A truststore becomes ``ssl.ca.location``/``ssl.ca.pem``: a JKS, JCEKS or PKCS12 truststore is read
here (:mod:`mirror_lib.config.java_stores`) into ``ssl.ca.pem``. A keystore becomes librdkafka's
PKCS12 keystore, or PEM certificate and key (a PEM file, or a JKS store or a PKCS12 store with an
empty password read here). A readable
binary store's content decides its type, as Java reads either under both names; inline PEM is
re-wrapped the way Kafka's PemParser reads it. A store that is not on this machine, or whose
password is still a ``${...}`` reference (``mirror validate``), is left to the client checks,
which list it or, when a run builds its clients, refuse the missing file.
"""

from __future__ import annotations

import re
from typing import Any

from mirror_lib.config.java_stores import (
    PasswordError,
    StoreError,
    key_and_chain,
    pem_block,
    pkcs12_key_and_chain,
    trusted_certificates,
)
from mirror_lib.config.properties import REDACTED, has_reference
from mirror_lib.errors import ConfigError

#: The first bytes of binary key stores: keytool writes PKCS12 (DER, 0x30) even to *.jks.
_STORE_MAGIC = {b"\xfe\xed\xfe\xed": "JKS", b"\xce\xce\xce\xce": "JCEKS"}


_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.DOTALL)


_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def normalize_pem(text: str) -> str:
    """PEM text librdkafka (OpenSSL) can read: each block's base64 re-wrapped at 64 characters.

    Kafka's PemParser accepts any whitespace inside a block, so a certificate written with ``\\``
    line continuations in a .properties file (lines joined, leading blanks dropped) works in Java;
    OpenSSL needs the BEGIN and END lines on lines of their own. Text that is not plain base64
    (e.g. ``Proc-Type`` headers) is left as it is for librdkafka to judge.
    """
    blocks = _PEM_BLOCK.findall(text)
    if not blocks or has_reference(text):
        return text
    out = []
    for label, body in blocks:
        data = re.sub(r"\s+", "", body)
        if not _BASE64.fullmatch(data):
            return text
        out.append(pem_block(label, data))
    return "".join(out)


def _sniffed_type(location: str) -> str | None:
    """JKS, JCEKS or PKCS12 by the file's first bytes; None when unreadable or not binary."""
    if not location or has_reference(location):
        return None
    try:
        with open(location, "rb") as file:
            head = file.read(4)
    except OSError:
        return None
    return _STORE_MAGIC.get(head) or ("PKCS12" if head[:1] == b"\x30" else None)


def _store_type(props: dict[str, tuple[str, str]], which: str, location: str) -> str:
    """PEM, PKCS12, JKS, ...: the declared type, else the file name's; a binary store's content
    decides between JKS and PKCS12, as Java (keystore.type.compat) reads either under both."""
    kind = props.pop(f"ssl.{which}.type", ("", ""))[0].strip().upper()
    if not kind:
        low = location.lower()
        if low.endswith((".pem", ".crt", ".cer")):
            kind = "PEM"
        else:  # Java's default type is JKS
            kind = "PKCS12" if low.endswith((".p12", ".pfx")) else "JKS"
    if kind in ("JKS", "PKCS12", "JCEKS"):
        return _sniffed_type(location) or kind
    return kind


def truststore(props: dict[str, tuple[str, str]], out: dict[str, Any], notes: list[str]) -> None:
    location, where = props.pop("ssl.truststore.location", ("", ""))
    inline = props.pop("ssl.truststore.certificates", ("", ""))[0]
    password = props.pop("ssl.truststore.password", None)
    kind = _store_type(props, "truststore", location)
    if inline:
        out["ssl.ca.pem"] = normalize_pem(inline)
    if location and kind != "PEM":
        out.update(_java_truststore(location, where, kind, password))
        password = None  # it opened the store
    elif location:
        out["ssl.ca.location"] = location
    if password and (location or inline):
        notes.append(f"{password[1]} is ignored: a PEM truststore has no password")
    elif password:
        notes.append(f"{password[1]} is ignored: no ssl.truststore.location is set")


def keystore(props: dict[str, tuple[str, str]], out: dict[str, Any], notes: list[str]) -> None:
    location, where = props.pop("ssl.keystore.location", ("", ""))
    password = props.pop("ssl.keystore.password", None)
    chain = props.pop("ssl.keystore.certificate.chain", None)
    key = props.pop("ssl.keystore.key", None)
    kind = _store_type(props, "keystore", location)
    if chain or key:
        if not (chain and key):
            missing = "ssl.keystore.key" if chain else "ssl.keystore.certificate.chain"
            given = (chain or key or ("", ""))[1]
            raise ConfigError(given, "<set>", f"{missing} set as well (a PEM key and its chain)")
        out["ssl.certificate.pem"], out["ssl.key.pem"] = (
            normalize_pem(chain[0]),
            normalize_pem(key[0]),
        )
    if location:
        if kind == "PKCS12":
            if password is None:  # Java refuses it too; librdkafka would, when the client is made
                raise ConfigError(
                    _sibling(where, "ssl.keystore.password"),
                    None,
                    f"the password of {location} (Java: SSL key store is specified, but key "
                    "store password is not specified); a store without one opens with an empty "
                    "ssl.keystore.password =",
                )
            if password[0]:
                out["ssl.keystore.location"] = location
                out["ssl.keystore.password"] = password[0]
            else:  # librdkafka takes an empty password as none: read here, as Java reads it
                out.update(_pkcs12_keystore(location, where, password))
            key_password = props.pop("ssl.key.password", None)
            if key_password and key_password[0] != password[0]:
                notes.append(
                    f"{key_password[1]} is ignored: a PKCS12 keystore's key is opened with "
                    "ssl.keystore.password"
                )
            password = None
        elif kind == "PEM":
            out["ssl.certificate.location"] = location
            out["ssl.key.location"] = location
        else:
            key_password = props.pop("ssl.key.password", None)
            out.update(_java_keystore(location, where, kind, password, key_password))
            password = None  # it opened the store
    if password:
        why = "a PEM keystore has no store password" if location or chain else "no keystore is set"
        notes.append(f"{password[1]} is ignored: {why} (ssl.key.password opens a PEM key)")


def _store_bytes(location: str) -> bytes | None:
    """A store's bytes; None for a reference or a file not on this machine (the client checks
    list it for validate and refuse it for a run, as any missing file)."""
    if has_reference(location):
        return None
    try:
        with open(location, "rb") as file:
            return file.read()
    except OSError:
        return None


def _java_truststore(
    location: str, where: str, kind: str, password: tuple[str, str] | None
) -> dict[str, str]:
    """``ssl.ca.pem``: the certificates Java would trust from a JKS, JCEKS or PKCS12 store."""
    data = _store_bytes(location)
    if data is None:
        return {"ssl.ca.location": location}
    secret = password[0] if password else None
    if secret is not None and has_reference(secret):  # validate: resolved only for a run
        if kind == "PKCS12":  # its certificates are encrypted: left out, listed as a reference
            return {"ssl.ca.pem": secret}
        secret = None  # a JKS password only checks the store
    try:
        return {"ssl.ca.pem": trusted_certificates(data, kind, secret)}
    except PasswordError as exc:
        missing = _sibling(where, "ssl.truststore.password")
        raise _password_error(exc, location, password, missing) from None
    except StoreError as exc:
        convert = (
            f"openssl pkcs12 -in {location} -nokeys -out ca.pem"
            if kind == "PKCS12"
            else f"keytool -exportcert -rfc -keystore {location} -alias <alias> -file ca.pem"
        )
        raise _format_error(exc, data, location, where, "truststore", convert) from None


def _java_keystore(
    location: str,
    where: str,
    kind: str,
    password: tuple[str, str] | None,
    key_password: tuple[str, str] | None,
) -> dict[str, str]:
    """``ssl.certificate.pem`` + ``ssl.key.pem``: the one private key of a JKS store and its
    chain, opened as Kafka opens it (``ssl.key.password``, else the store's password)."""
    data = _store_bytes(location)
    if data is None:
        return {"ssl.keystore.location": location}
    opener = key_password or password
    if opener is None:
        raise ConfigError(
            _sibling(where, "ssl.key.password"),
            None,
            f"the password of the private key in {location}: a {kind} key always has one "
            "(ssl.keystore.password is used when the two are the same)",
        )
    if has_reference(opener[0]):  # validate: opened only where the reference resolves
        return {"ssl.key.pem": opener[0]}
    store = password[0] if password and not has_reference(password[0]) else None
    try:
        chain, key = key_and_chain(data, store, opener[0])
    except PasswordError as exc:
        given = opener if exc.of_key else password
        missing = _sibling(where, "ssl.keystore.password")
        raise _password_error(exc, location, given, missing) from None
    except StoreError as exc:
        convert = (
            f"keytool -importkeystore -srckeystore {location} -srcstoretype {kind} "
            "-destkeystore keystore.p12 -deststoretype PKCS12 [-srcalias <one key's alias>]"
        )
        raise _format_error(exc, data, location, where, "keystore", convert) from None
    return {"ssl.certificate.pem": chain, "ssl.key.pem": key}


def _pkcs12_keystore(location: str, where: str, password: tuple[str, str]) -> dict[str, str]:
    """``ssl.certificate.pem`` + ``ssl.key.pem`` from a PKCS12 keystore whose password is empty,
    which Java opens and librdkafka cannot be given (Stackable's stores have one)."""
    data = _store_bytes(location)
    if data is None:  # not on this machine: listed by validate, refused by a run
        return {"ssl.keystore.location": location, "ssl.keystore.password": password[0]}
    try:
        chain, key = pkcs12_key_and_chain(data, password[0])
    except PasswordError as exc:
        raise _password_error(exc, location, password, password[1]) from None
    except StoreError as exc:
        convert = f"openssl pkcs12 -in {location} -nodes -out keystore.pem"
        raise _format_error(exc, data, location, where, "keystore", convert) from None
    return {"ssl.certificate.pem": chain, "ssl.key.pem": key}


def _sibling(where: str, name: str) -> str:
    """``B.ssl.key.password`` for ``where`` = ``B.ssl.keystore.location``."""
    return where[: where.rfind("ssl.")] + name


def _password_error(
    exc: PasswordError, location: str, given: tuple[str, str] | None, missing: str
) -> ConfigError:
    """On the password that does not open ``location``, or on the ``missing`` one it needs."""
    if given is not None:
        return ConfigError(given[1], REDACTED, f"the password that opens {location}: {exc}")
    return ConfigError(missing, None, f"the password of {location}: {exc}")


def _format_error(
    exc: StoreError, data: bytes, location: str, where: str, which: str, convert: str
) -> ConfigError:
    """On a store that cannot be read, with the command that converts it."""
    if data.lstrip().startswith(b"-----BEGIN"):
        return ConfigError(
            where, location, f"a key store ({exc}): it is PEM text, so set ssl.{which}.type = PEM"
        )
    return ConfigError(
        where,
        location,
        f"a {which} Java and mirror_lib can read: {exc}. Or convert it with `{convert}`",
    )
