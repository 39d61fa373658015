"""Java key stores read as Java reads them, turned into the PEM text librdkafka takes.

librdkafka reads PEM and PKCS12 key stores only; MM2 users' configs name JKS, JCEKS and PKCS12
truststores and JKS keystores. Here:

- JKS and JCEKS (keytool's format before JDK 9): trusted certificates and the chains of private
  key entries; the store is checked against its password when one is given, as
  ``KeyStore.load`` does (SHA-1 over the password, "Mighty Aphrodite" and the content). A JKS
  private key is recovered with its password (Sun's ``KeyProtector``: a SHA-1 key stream and a
  SHA-1 check). JCEKS keys (PBEWithMD5AndTripleDES) and secret keys are left to keytool.
- PKCS12 truststores (keytool's default since JDK 9, certificates encrypted with the store
  password), and PKCS12 keystores with an empty password (librdkafka takes an empty
  ``ssl.keystore.password`` as none), through ``cryptography``, imported only for them.

A truststore trusts what Java's trust manager trusts: every trusted certificate entry and the
first certificate of each key entry's chain. No Kafka calls; the callers read the files.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "PasswordError",
    "StoreError",
    "key_and_chain",
    "pkcs12_key_and_chain",
    "trusted_certificates",
]

_MAGIC = {0xFEEDFEED: "JKS", 0xCECECECE: "JCEKS"}
_WHITENER = b"Mighty Aphrodite"
_JKS_KEY = "1.3.6.1.4.1.42.2.17.1.1"
_KEY_ALGORITHMS = {"1.3.6.1.4.1.42.2.19.1": "PBEWithMD5AndTripleDES (JCEKS)"}


class StoreError(ValueError):
    """A store that cannot be read as needed; the message says why, for the caller's error."""


class PasswordError(StoreError):
    """The store's password (``of_key``: the private key's) does not open it."""

    def __init__(self, message: str, of_key: bool = False) -> None:
        super().__init__(message)
        self.of_key = of_key


@dataclass(frozen=True)
class Entry:
    """One entry of a JKS/JCEKS store: a trusted certificate, or a private key and its chain."""

    alias: str
    chain: tuple[bytes, ...]  # DER certificates, the entry's own first
    protected_key: bytes | None = None  # EncryptedPrivateKeyInfo (DER) of a private key entry


class _Reader:
    """Java's DataInputStream over bytes; running out is a StoreError."""

    def __init__(self, data: bytes) -> None:
        self.data, self.pos = data, 0

    def take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise StoreError("it ends early: truncated or not a key store")
        self.pos += n
        return self.data[self.pos - n : self.pos]

    def u32(self) -> int:
        return int.from_bytes(self.take(4), "big")

    def utf(self) -> str:
        (n,) = struct.unpack(">H", self.take(2))
        return self.take(n).decode("utf-8", "replace")

    def blob(self) -> bytes:
        return self.take(self.u32())


def _java_chars(password: str) -> bytes:
    """A Java char[] password as the stores hash it: two bytes per char, big-endian."""
    return password.encode("utf-16-be")


def _certificate(r: _Reader, version: int) -> bytes:
    if version == 2 and (kind := r.utf()) != "X.509":
        raise StoreError(f"it holds a {kind} certificate; only X.509 is used for TLS")
    return r.blob()


def read_jks(data: bytes, password: str | None) -> list[Entry]:
    """The entries of a JKS or JCEKS store; a ``password`` must match the store's check."""
    r = _Reader(data)
    if r.u32() not in _MAGIC:
        raise StoreError("it is not a JKS or JCEKS store")
    version = r.u32()
    if version not in (1, 2):
        raise StoreError(f"unknown JKS version {version}")
    entries = []
    for _ in range(r.u32()):
        tag, alias = r.u32(), r.utf()
        r.take(8)  # creation date
        if tag == 1:
            key = r.blob()
            chain = tuple(_certificate(r, version) for _ in range(r.u32()))
            entries.append(Entry(alias, chain, key))
        elif tag == 2:
            entries.append(Entry(alias, (_certificate(r, version),)))
        else:  # a JCEKS secret key is a serialized Java object: nothing says where it ends
            raise StoreError(f"entry {alias!r} is a secret key, which only Java reads")
    body = r.pos
    digest = r.take(20)
    if (
        password
        and hashlib.sha1(_java_chars(password) + _WHITENER + data[:body]).digest() != digest
    ):
        raise PasswordError(
            "the password does not open it (Java: Keystore was tampered with, or password was "
            "incorrect)"
        )
    return entries


def _der(data: bytes, pos: int, tag: int) -> tuple[int, int]:
    """(start, end) of the DER value with ``tag`` at ``pos``."""
    if pos + 2 > len(data) or data[pos] != tag:
        raise StoreError("its private key is not an EncryptedPrivateKeyInfo")
    length, pos = data[pos + 1], pos + 2
    if length & 0x80:
        n = length & 0x7F
        length, pos = int.from_bytes(data[pos : pos + n], "big"), pos + n
    if pos + length > len(data):
        raise StoreError("its private key ends early")
    return pos, pos + length


def _oid(der: bytes) -> str:
    parts, value = [der[0] // 40, der[0] % 40], 0
    for byte in der[1:]:
        value = value << 7 | byte & 0x7F
        if not byte & 0x80:
            parts.append(value)
            value = 0
    return ".".join(map(str, parts))


def recover_key(protected: bytes, password: str) -> bytes:
    """The PKCS#8 DER of a JKS private key (Sun's KeyProtector), checked against ``password``."""
    start, _end = _der(protected, 0, 0x30)
    alg_start, alg_end = _der(protected, start, 0x30)
    oid_start, oid_end = _der(protected, alg_start, 0x06)
    algorithm = _oid(protected[oid_start:oid_end])
    data_start, data_end = _der(protected, alg_end, 0x04)
    if algorithm != _JKS_KEY:
        name = _KEY_ALGORITHMS.get(algorithm, algorithm)
        raise StoreError(f"its private key is protected with {name}, which only Java reads")
    data = protected[data_start:data_end]
    if len(data) < 41:
        raise StoreError("its private key is too short")
    salt, secret, check = data[:20], data[20:-20], data[-20:]
    chars, stream, digest = _java_chars(password), bytearray(), salt
    while len(stream) < len(secret):
        digest = hashlib.sha1(chars + digest).digest()
        stream += digest
    plain = bytes(a ^ b for a, b in zip(secret, stream, strict=False))
    if hashlib.sha1(chars + plain).digest() != check:
        raise PasswordError("it does not open the private key (Java: Cannot recover key)", True)
    return plain


def pem_block(label: str, base64_text: str) -> str:
    """One PEM block, its base64 in lines of 64 characters as OpenSSL writes them."""
    lines = [base64_text[i : i + 64] for i in range(0, len(base64_text), 64)]
    return "\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]) + "\n"


def pem(label: str, der: bytes) -> str:
    """One PEM block of DER bytes."""
    return pem_block(label, base64.b64encode(der).decode())


def _load_pkcs12(data: bytes, password: str | None) -> Any:
    """The PKCS12 store as ``cryptography`` reads it (its key, certificate, other certificates)."""
    try:  # lazy: PKCS12 stores read here only (extra "kafka"; Databricks runtimes ship it)
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise StoreError("reading PKCS12 needs the package cryptography (extra kafka)") from None
    secrets: list[bytes | None] = [None]
    if password:
        secrets = [password.encode()]
    elif password == "":  # tools write an empty password either way: empty, or none at all
        secrets = [b"", None]
    for secret in secrets:
        try:
            return pkcs12.load_pkcs12(data, secret)
        except ValueError:
            continue
    if password is None:
        raise PasswordError("its certificates are encrypted")
    raise PasswordError(f"the {'' if password else 'empty '}password does not open it")


def _pkcs12_certificates(data: bytes, password: str | None) -> list[bytes]:
    from cryptography.hazmat.primitives.serialization import Encoding  # lazy: as _load_pkcs12

    store = _load_pkcs12(data, password)
    certs = ([store.cert] if store.cert is not None else []) + list(store.additional_certs)
    return [c.certificate.public_bytes(Encoding.DER) for c in certs]


def pkcs12_key_and_chain(data: bytes, password: str) -> tuple[str, str]:
    """(certificate chain PEM, PKCS#8 key PEM) of a PKCS12 keystore's private key, opened with
    ``password`` as Java opens it (an empty password too, which librdkafka cannot pass on)."""
    from cryptography.hazmat.primitives import serialization  # lazy: as _load_pkcs12

    store = _load_pkcs12(data, password)
    if store.key is None or store.cert is None:
        raise StoreError("it holds no private key with its certificate")
    chain = [store.cert, *store.additional_certs]
    der = serialization.Encoding.DER
    key = store.key.private_bytes(
        der, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return "".join(pem("CERTIFICATE", c.certificate.public_bytes(der)) for c in chain), pem(
        "PRIVATE KEY", key
    )


def trusted_certificates(data: bytes, kind: str, password: str | None) -> str:
    """The PEM certificates Java's trust manager takes from a JKS, JCEKS or PKCS12 store."""
    if kind == "PKCS12":
        certs = _pkcs12_certificates(data, password)
    else:
        certs = [e.chain[0] for e in read_jks(data, password) if e.chain]
    if not certs:
        raise StoreError("it holds no certificate")
    return "".join(pem("CERTIFICATE", der) for der in certs)


def key_and_chain(data: bytes, store_password: str | None, key_password: str) -> tuple[str, str]:
    """(certificate chain PEM, PKCS#8 key PEM) of the one private key of a JKS store."""
    keys = [(e, e.protected_key) for e in read_jks(data, store_password) if e.protected_key]
    if len(keys) != 1:
        found = ", ".join(repr(e.alias) for e, _key in keys) or "none"
        raise StoreError(f"librdkafka takes one private key, and it holds {len(keys)} ({found})")
    entry, protected = keys[0]
    if not entry.chain:
        raise StoreError(f"key entry {entry.alias!r} has no certificate")
    chain = "".join(pem("CERTIFICATE", der) for der in entry.chain)
    return chain, pem("PRIVATE KEY", recover_key(protected, key_password))
