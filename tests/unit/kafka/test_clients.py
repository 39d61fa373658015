"""The principal a client config logs in as, where it can be known offline."""

from __future__ import annotations

import pytest

from mirror_lib.kafka.clients import client_principal


@pytest.mark.parametrize(
    ("conf", "principal"),
    [
        ({}, "User:ANONYMOUS"),
        ({"security.protocol": "SSL"}, "User:ANONYMOUS"),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/c.pem"}, None),
        (
            {
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "mm2",
            },
            "User:mm2",
        ),
        (
            {
                "security.protocol": "sasl_plaintext",
                "sasl.mechanisms": "PLAIN",
                "sasl.username": "mm2",
            },
            "User:mm2",
        ),
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}, None),
        ({"security.protocol": "SASL_SSL"}, None),  # GSSAPI
    ],
)
def test_the_principal_of_a_client_config(conf, principal):
    found, how = client_principal(conf)
    assert found == principal and how
