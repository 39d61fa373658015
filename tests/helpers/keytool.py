"""Java key stores made by the JDK's own keytool (the JVM that Spark runs on), so that the tests
read what Java writes, not what our reader expects."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
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


#: Copies every entry of a key store into a PKCS12 store whose password (and whose keys'
#: passwords) are empty, then opens it again: keytool refuses passwords under 6 characters, but
#: Java itself writes such stores (Stackable's operators hand them to Kafka clients).
_EMPTY_PASSWORD_STORE = """
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.security.KeyStore;
import java.util.Collections;

public class EmptyPasswordStore {
    public static void main(String[] args) throws Exception {
        char[] password = args[1].toCharArray();
        char[] empty = new char[0];
        KeyStore source = KeyStore.getInstance(args[3]);
        try (FileInputStream in = new FileInputStream(args[0])) { source.load(in, password); }
        KeyStore store = KeyStore.getInstance("PKCS12");
        store.load(null, null);
        for (String alias : Collections.list(source.aliases())) {
            if (source.isKeyEntry(alias)) {
                store.setKeyEntry(alias, source.getKey(alias, password), empty,
                                  source.getCertificateChain(alias));
            } else {
                store.setCertificateEntry(alias, source.getCertificate(alias));
            }
        }
        try (FileOutputStream out = new FileOutputStream(args[2])) { store.store(out, empty); }
        KeyStore back = KeyStore.getInstance("PKCS12");
        try (FileInputStream in = new FileInputStream(args[2])) { back.load(in, empty); }
    }
}
"""


def empty_password_pkcs12(source: Path, password: str, path: Path, kind: str = "PKCS12") -> Path:
    """A PKCS12 store at ``path`` with the entries of the ``kind`` store ``source``, written by
    Java with an empty store and key password (and opened by Java again with it)."""
    java = str(Path(keytool_binary()).resolve().parent / "java")
    with tempfile.TemporaryDirectory() as folder:
        program = Path(folder) / "EmptyPasswordStore.java"
        program.write_text(_EMPTY_PASSWORD_STORE)
        done = subprocess.run(
            [java, str(program), str(source), password, str(path), kind],
            capture_output=True,
            text=True,
            timeout=120,
        )
    if done.returncode:
        raise RuntimeError(f"writing {path} with Java failed: {done.stdout}{done.stderr}")
    return path
