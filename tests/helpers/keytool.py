"""Java key stores made by the JDK's own keytool (the JVM that Spark runs on), so that the tests
read what Java writes, not what our reader expects."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path


def keytool_binary() -> str:
    """keytool of ``JAVA_HOME``, else the one on the PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "keytool", os.X_OK):
        return str(Path(home) / "bin" / "keytool")
    found = shutil.which("keytool")
    if found is None:
        raise RuntimeError("keytool not found: the tests need the JDK that Spark runs on")
    return found


def keytool(*args: str) -> None:
    """Run keytool; its output is shown when it fails."""
    done = subprocess.run(
        [keytool_binary(), "-noprompt", *args], capture_output=True, text=True, timeout=120
    )
    if done.returncode:
        raise RuntimeError(f"keytool {' '.join(args)} failed: {done.stdout}{done.stderr}")


def truststore(path: Path, kind: str, password: str, cas: dict[str, Path]) -> Path:
    """A ``kind`` (JKS, JCEKS, PKCS12) truststore with the PEM certificate files ``cas`` (alias ->
    file) as trusted certificate entries."""
    for alias, pem in cas.items():
        keytool("-importcert", "-storetype", kind, "-keystore", str(path), "-storepass", password,
                "-alias", alias, "-file", str(pem))  # fmt: skip
    return path


def keystore(path: Path, kind: str, p12: Path, p12_password: str, password: str,
             key_password: str) -> Path:  # fmt: skip
    """A ``kind`` (JKS, JCEKS) keystore with the key entries of the PKCS12 file ``p12``; its
    keys protected with ``key_password``, the store with ``password``."""
    keytool("-importkeystore", "-srckeystore", str(p12), "-srcstoretype", "PKCS12",
            "-srcstorepass", p12_password, "-destkeystore", str(path), "-deststoretype", kind,
            "-deststorepass", password, "-destkeypass", key_password)  # fmt: skip
    return path
