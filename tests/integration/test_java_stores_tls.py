"""Java key stores over real TLS: `mirror run --once` reaches its source through mutual TLS with
the JKS truststore and keystore of a classic Java setup, and its target through a PKCS12
truststore, with the mm2.properties MM2 would take (mirror_lib.config.java_stores).

The brokers are tansu behind TLS-ending proxies that demand what a TLS listener demands: a
certificate chain the client's truststore verifies for 127.0.0.1, and on the source a client
certificate signed by the CA."""

from __future__ import annotations

import functools
import os
import ssl
from pathlib import Path
from typing import Any

import pytest

from mirror_lib.testing.kafka_io import consume_all, produce_exact
from tests.helpers import keytool
from tests.helpers.mirror_cli import run_mirror
from tests.helpers.proxy import TlsProxy, bootstrap, proxied_broker
from tests.helpers.tls_material import issued, self_signed, write
from tests.integration.conftest import flow_properties, write_properties

N = 30


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A CA; the brokers' certificate for 127.0.0.1 and a client certificate it signed; the
    client's stores as keytool writes them."""
    d = tmp_path_factory.mktemp("pki")
    ca = self_signed("mirror-test-ca")
    broker, client = issued(ca, "broker", ip="127.0.0.1"), issued(ca, "mirror-client")
    files = {
        "ca": write(d / "ca.pem", ca.cert_pem),
        "broker": write(d / "broker.pem", broker.cert_pem + broker.key_pem),
        "client": write(d / "client.pem", client.cert_pem + client.key_pem),
        "client.p12": write(d / "client.p12", client.p12("p12pass")),
    }
    keytool.truststore(d / "truststore.jks", "JKS", "changeit", {"ca": files["ca"]})
    keytool.truststore(d / "truststore.p12", "PKCS12", "changeit", {"ca": files["ca"]})
    keytool.keystore(d / "keystore.jks", "JKS", files["client.p12"], "p12pass", "storepass",
                     "keypass1")  # fmt: skip
    return {**files, "dir": d}


def _listener(pki: dict[str, Any], mutual: bool) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki["broker"])
    if mutual:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki["ca"])
    return context


def _pem_client(pki: dict[str, Any]) -> dict[str, str]:
    """What a librdkafka test client needs to reach either proxy (not the code under test)."""
    client = str(pki["client"])
    return {"security.protocol": "SSL", "ssl.ca.location": str(pki["ca"]),
            "ssl.certificate.location": client, "ssl.key.location": client}  # fmt: skip


def test_mirror_run_over_tls_with_jks_and_pkcs12_stores(pki, tmp_path, unique_name, subprocess_env):
    if os.environ.get("MIRROR_TEST_EXTERNAL_CLUSTERS"):
        pytest.skip(
            "TLS proxies run in front of brokers this run starts (not MIRROR_TEST_*_BOOTSTRAP)"
        )
    d: Path = pki["dir"]
    mutual = functools.partial(TlsProxy, context=_listener(pki, mutual=True))
    server_only = functools.partial(TlsProxy, context=_listener(pki, mutual=False))
    with (
        proxied_broker("A", tmp_path / "a", mutual) as (_a, proxy_a),
        proxied_broker("B", tmp_path / "b", server_only) as (_b, proxy_b),
    ):
        source, target = bootstrap(proxy_a), bootstrap(proxy_b)
        sent = produce_exact(
            source,
            unique_name,
            [{"key": f"k{i}", "value": f"v{i}", "partition": 0} for i in range(N)],
            config=_pem_client(pki),
        )
        proxy_a.peers.clear()
        props = flow_properties(source, target, tmp_path / "state", **{
            "A->B.topics": unique_name,
            "A.security.protocol": "SSL",
            "A.ssl.truststore.location": str(d / "truststore.jks"),
            "A.ssl.truststore.password": "changeit",
            "A.ssl.keystore.location": str(d / "keystore.jks"),
            "A.ssl.keystore.password": "storepass",
            "A.ssl.key.password": "keypass1",
            "B.security.protocol": "SSL",
            "B.ssl.truststore.location": str(d / "truststore.p12"),
            "B.ssl.truststore.type": "PKCS12",
            "B.ssl.truststore.password": "changeit",
        })  # fmt: skip
        out = run_mirror(
            write_properties(tmp_path / "mm2.properties", props),
            subprocess_env,
            "--once",
            timeout_s=240,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        got = consume_all(target, f"A.{unique_name}", config=_pem_client(pki))
        assert [(r.key, r.value) for r in got] == [(r.key, r.value) for r in sent]
        subjects = {dict(x[0] for x in peer["subject"])["commonName"] for peer in proxy_a.peers}
        assert subjects == {"mirror-client"}  # the key from the JKS keystore, on every connection
