"""Java TLS stores and inline PEM -> librdkafka's ``ssl.*`` settings.

A truststore becomes ``ssl.ca.location``/``ssl.ca.pem`` (PEM only: a JKS or PKCS12 truststore is
refused with the command that converts it); a keystore becomes a PKCS12 keystore or PEM
certificate and key. A readable binary store's content decides its type, as Java reads either
under both names; inline PEM is re-wrapped the way Kafka's PemParser reads it.
"""

from __future__ import annotations

import re
from typing import Any

from mirror_lib.config.properties import has_reference
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
        lines = [data[i : i + 64] for i in range(0, len(data), 64)]
        out.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    return "\n".join(out) + "\n"


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
    if location:
        if kind != "PEM":
            convert = (
                f"openssl pkcs12 -in {location} -nokeys -out ca.pem"
                if kind == "PKCS12"
                else f"keytool -exportcert -rfc -keystore {location} -alias <alias> -file ca.pem "
                "(once per CA alias; keytool -list shows them)"
            )
            raise ConfigError(
                where,
                location,
                f"a PEM file: librdkafka cannot read a {kind} truststore. Convert it with "
                f"`{convert}` and set ssl.ca.location = ca.pem (or ssl.truststore.type = PEM); "
                "for public CAs (cloud services) ssl.ca.location = probe uses the system's",
            )
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
            out["ssl.keystore.location"] = location
            if password:
                out["ssl.keystore.password"] = password[0]
                password = None
            key_password = props.pop("ssl.key.password", None)
            if key_password and key_password[0] != out.get("ssl.keystore.password"):
                notes.append(
                    f"{key_password[1]} is ignored: librdkafka opens a PKCS12 keystore's key with "
                    "ssl.keystore.password"
                )
        elif kind == "PEM":
            out["ssl.certificate.location"] = location
            out["ssl.key.location"] = location
        else:
            raise ConfigError(
                where,
                location,
                f"a PKCS12 or PEM keystore: librdkafka cannot read {kind}. Convert it with "
                f"`keytool -importkeystore -srckeystore {location} -destkeystore keystore.p12 "
                "-deststoretype PKCS12` and set ssl.keystore.type = PKCS12",
            )
    if password:
        why = "a PEM keystore has no store password" if location or chain else "no keystore is set"
        notes.append(f"{password[1]} is ignored: {why} (ssl.key.password opens a PEM key)")
