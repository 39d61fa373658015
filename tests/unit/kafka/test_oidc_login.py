"""OIDC logins as Java writes them reach a real identity provider's token endpoint through real
librdkafka clients: the JAAS form (KIP-768) and Kafka 4.1's properties form (KIP-1139), with the
client credentials or the jwt-bearer grant. The endpoint is local (tests/helpers/fake_idp.py);
librdkafka asks it for a token when the client is made, before any broker is reached."""

from __future__ import annotations

import base64
import json

import pytest
from confluent_kafka import Producer
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.client_check import check_client_builds
from mirror_lib.kafka.clients import client_config
from tests.helpers.fake_idp import FakeIdp, TokenRequest, b64url_json, fake_idp

PACKAGE = "org.apache.kafka.common.security.oauthbearer."
LOGIN = f"{PACKAGE}OAuthBearerLoginModule required"


def oauth_config(**settings: str):
    """Flow A->B whose cluster B logs in with OAUTHBEARER and these ``B.*`` settings."""
    return parse_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "127.0.0.1:9",
            "B.bootstrap.servers": "127.0.0.1:9",
            "B.sasl.mechanism": "OAUTHBEARER",
            **{f"B.{key.replace('_', '.')}": value for key, value in settings.items()},
            "A->B.enabled": "true",
        }
    )


def token_request(idp: FakeIdp, **settings: str) -> TokenRequest:
    """Make a real producer of cluster B with these ``B.*`` settings; the request it sent."""
    config = oauth_config(
        security_protocol="SASL_PLAINTEXT",
        sasl_login_callback_handler_class=f"{PACKAGE}OAuthBearerLoginCallbackHandler",
        sasl_oauthbearer_token_endpoint_url=idp.url,
        **settings,
    )
    producer = Producer({**client_config(config.cluster("B"), "producer"), "logger": _Quiet()})
    return idp.first(poll=producer.poll)


class _Quiet:
    def log(self, *_args: object, **_kwargs: object) -> None:
        pass


def test_the_jaas_client_credentials_log_in():
    with fake_idp() as idp:
        sent = token_request(
            idp, sasl_jaas_config=f'{LOGIN} clientId="mm2" clientSecret="s3" scope="kafka";'
        )
    assert sent.basic == ("mm2", "s3")
    assert sent.form == {"grant_type": "client_credentials", "scope": "kafka"}


def test_kafka_4_1_client_credential_properties_log_in_without_jaas_options():
    with fake_idp() as idp:
        sent = token_request(
            idp,
            sasl_jaas_config=f"{LOGIN};",
            sasl_oauthbearer_jwt_retriever_class=f"{PACKAGE}ClientCredentialsJwtRetriever",
            **{
                "sasl.oauthbearer.client.credentials.client.id": "mm2",
                "sasl.oauthbearer.client.credentials.client.secret": "s3",
                "sasl.oauthbearer.scope": "kafka",
            },
        )
    assert sent.basic == ("mm2", "s3")
    assert sent.form == {"grant_type": "client_credentials", "scope": "kafka"}


def test_the_properties_win_over_the_jaas_options_as_in_java():
    with fake_idp() as idp:
        sent = token_request(
            idp,
            sasl_jaas_config=f'{LOGIN} clientId="old" clientSecret="old-s" scope="old";',
            **{
                "sasl.oauthbearer.client.credentials.client.id": "new",
                "sasl.oauthbearer.scope": "kafka",
            },
        )
    assert sent.basic == ("new", "old-s")
    assert sent.form["scope"] == "kafka"


def test_the_jwt_bearer_grant_sends_an_assertion_signed_with_the_configured_key(tmp_path):
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = tmp_path / "assertion-key.pem"
    pem.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    template = tmp_path / "template.json"
    template.write_text(json.dumps({"header": {"kid": "k-1"}, "payload": {"tenant": "t-7"}}))
    with fake_idp() as idp:
        sent = token_request(
            idp,
            sasl_jaas_config=f"{LOGIN};",
            sasl_oauthbearer_jwt_retriever_class=f"{PACKAGE}JwtBearerJwtRetriever",
            **{
                "sasl.oauthbearer.assertion.algorithm": "rs256",
                "sasl.oauthbearer.assertion.private.key.file": str(pem),
                "sasl.oauthbearer.assertion.claim.iss": "mm2-issuer",
                "sasl.oauthbearer.assertion.claim.sub": "mm2",
                "sasl.oauthbearer.assertion.claim.aud": "https://idp.example.com",
                "sasl.oauthbearer.assertion.template.file": str(template),
            },
        )
    assert sent.form["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    header, payload, signature = sent.form["assertion"].split(".")
    key.public_key().verify(
        base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)),
        f"{header}.{payload}".encode(),
        padding.PKCS1v15(),
        hashes.SHA256(),
    )
    assert b64url_json(header)["alg"] == "RS256" and b64url_json(header)["kid"] == "k-1"
    claims = b64url_json(payload)
    assert (claims["iss"], claims["sub"], claims["aud"]) == (
        "mm2-issuer",
        "mm2",
        "https://idp.example.com",
    )
    assert claims["tenant"] == "t-7"


@pytest.mark.parametrize(
    ("retriever", "url", "key"),
    [
        (
            f"{PACKAGE}FileJwtRetriever",
            "https://idp/token",
            "B.sasl.oauthbearer.jwt.retriever.class",
        ),
        ("com.example.MyRetriever", "https://idp/token", "B.sasl.oauthbearer.jwt.retriever.class"),
        (
            f"{PACKAGE}DefaultJwtRetriever",
            "file:///run/token.jwt",
            "B.sasl.oauthbearer.token.endpoint.url",
        ),
        (None, "FILE:///run/token.jwt", "B.sasl.oauthbearer.token.endpoint.url"),
    ],
)
def test_a_login_librdkafka_cannot_make_is_refused_naming_the_key(retriever, url, key):
    settings = {"sasl.oauthbearer.jwt.retriever.class": retriever} if retriever else {}
    config = oauth_config(
        sasl_jaas_config=f"{LOGIN};", sasl_oauthbearer_token_endpoint_url=url, **settings
    )
    with pytest.raises(ConfigError) as caught:
        client_config(config.cluster("B"), "consumer")
    assert caught.value.key == key
    assert caught.value.value == (url if key.endswith("url") else retriever)
    assert ("https token endpoint" if key.endswith("url") else "JwtBearerJwtRetriever") in (
        caught.value.expected
    )


def test_a_client_validator_is_named_in_a_warning():
    config = oauth_config(
        sasl_jaas_config=f'{LOGIN} clientId="mm2" clientSecret="s3";',
        sasl_oauthbearer_token_endpoint_url="https://idp.example.com/token",
        sasl_oauthbearer_jwt_validator_class=f"{PACKAGE}ClientJwtValidator",
    )
    notes: list[str] = []
    client_config(config.cluster("B"), "consumer", notes=notes)
    assert [n for n in notes if "validator" in n] == [
        "B.sasl.oauthbearer.jwt.validator.class is ignored: librdkafka checks the token's expiry "
        "and the broker validates the token itself"
    ]


def test_a_missing_assertion_key_is_blamed_on_the_retriever_that_needs_it():
    config = oauth_config(
        security_protocol="SASL_SSL",
        sasl_jaas_config=f"{LOGIN};",
        sasl_oauthbearer_token_endpoint_url="https://idp.example.com/token",
        sasl_oauthbearer_jwt_retriever_class=f"{PACKAGE}JwtBearerJwtRetriever",
    )
    with pytest.raises(ConfigError) as caught:
        check_client_builds(config)
    assert caught.value.key == "B.sasl.oauthbearer.jwt.retriever.class"
    assert "sasl.oauthbearer.assertion.private.key.file" in caught.value.expected
