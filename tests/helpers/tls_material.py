"""Certificates, keys and key stores made at test time (no files checked in)."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import NameOID

#: The first bytes of a Java KeyStore (what keytool wrote before JDK 9).
JKS_MAGIC = b"\xfe\xed\xfe\xed"


@dataclass(frozen=True)
class Material:
    """A self-signed certificate and its key, as PEM text and as objects."""

    cert_pem: str
    key_pem: str
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey

    def p12(self, password: str, alias: str = "mirror") -> bytes:
        """A PKCS12 keystore holding the key and certificate."""
        return pkcs12.serialize_key_and_certificates(
            alias.encode(),
            self.key,
            self.cert,
            None,
            serialization.BestAvailableEncryption(password.encode()),
        )


def self_signed(name: str = "mirror-test") -> Material:
    """A fresh self-signed certificate (also usable as its own CA)."""
    return _material(name, None)


def issued(ca: Material, name: str, ip: str | None = None) -> Material:
    """A certificate for ``name`` signed by ``ca``; ``ip``: its subject alternative name (a
    broker's address, which TLS clients verify)."""
    return _material(name, ca, ip)


def _material(name: str, ca: Material | None, ip: str | None = None) -> Material:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject if ca is None else ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=ca is None, path_length=None), critical=True)
    )
    if ip is not None:
        address = x509.IPAddress(ipaddress.ip_address(ip))
        builder = builder.add_extension(x509.SubjectAlternativeName([address]), critical=False)
    cert = builder.sign(key if ca is None else ca.key, hashes.SHA256())
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return Material(
        cert.public_bytes(serialization.Encoding.PEM).decode(), key_pem.decode(), cert, key
    )


def continued(pem: str, separator: str = " ") -> str:
    """``pem`` as a .properties value written with ``\\`` line continuations reads: the lines
    joined by what preceded each backslash (a blank, or nothing)."""
    return separator.join(pem.strip().splitlines())


def properties_lines(key: str, pem: str) -> str:
    """``key = <pem>`` written over several lines with trailing `` \\`` continuations."""
    lines = pem.strip().splitlines()
    return f"{key} = " + " \\\n    ".join(lines) + "\n"


def write(path: Path, data: bytes | str) -> Path:
    """Write ``data`` to ``path`` and return the path."""
    if isinstance(data, str):
        path.write_text(data)
    else:
        path.write_bytes(data)
    return path
