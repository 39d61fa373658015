"""Google Managed Kafka logins written for Google's Java GcpLoginCallbackHandler: the token is
made as that handler makes it, from Application Default Credentials (google-auth), whose token
endpoint here is local (tests/helpers/fake_idp.py); real librdkafka clients ask for it."""

from __future__ import annotations

import time
from base64 import b64decode

import pytest
from confluent_kafka import Producer

from mirror_lib.config.gcp_login import GCP_HANDLER
from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.client_check import check_client_builds
from mirror_lib.kafka.clients import client_config
from mirror_lib.kafka.gcp_login import GcpToken
from tests.helpers.fake_idp import b64url_json, fake_idp
from tests.helpers.gcp_env import EMAIL, offline_gcp, service_account_key

GMK = "bootstrap.mirror.europe-west1.managedkafka.mirror-test.cloud.goog:9092"
LOGIN = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"


def gmk_config(**settings: str):
    """Cluster B as Google's documentation writes a Java client of Managed Kafka."""
    given = {
        "sasl.mechanism": "OAUTHBEARER",
        "sasl.jaas.config": LOGIN,
        "sasl.login.callback.handler.class": GCP_HANDLER,
        **{k.replace("_", "."): v for k, v in settings.items()},
    }
    return parse_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": "a:9092",
            "B.bootstrap.servers": GMK,
            "B.security.protocol": "SASL_SSL",
            **{f"B.{k}": v for k, v in given.items() if v},
            "A->B.enabled": "true",
        }
    )


def test_the_token_is_the_java_handlers_wrapping_of_the_access_token(monkeypatch, tmp_path):
    offline_gcp(monkeypatch, tmp_path)
    with fake_idp() as idp:
        service_account_key(monkeypatch, tmp_path, idp.url)
        callback = client_config(gmk_config().cluster("B"), "consumer")["oauth_cb"]
        assert callback == GcpToken("B.sasl.login.callback.handler.class")
        token, expiry = callback("")
    header, payload, access = token.split(".")
    assert b64url_json(header) == {"typ": "JWT", "alg": "GOOG_OAUTH2_TOKEN"}
    claims = b64url_json(payload)
    assert (claims["sub"], claims["scope"]) == (EMAIL, "kafka")
    assert abs(claims["exp"] - expiry) < 1 and time.time() + 3000 < expiry < time.time() + 3700
    assert abs(claims["iat"] - time.time()) < 60
    [asked] = idp.requests
    assert b64decode(access + "=" * (-len(access) % 4), altchars=b"-_").decode() == (
        asked.access_token
    )
    asked = asked.form
    assert asked["grant_type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    grant = b64url_json(asked["assertion"].split(".")[1])
    assert (
        grant["iss"] == EMAIL and grant["scope"] == "https://www.googleapis.com/auth/cloud-platform"
    )


def test_a_real_librdkafka_client_asks_for_the_token_and_one_credential_serves_all(
    monkeypatch, tmp_path
):
    offline_gcp(monkeypatch, tmp_path)
    with fake_idp() as idp:
        service_account_key(monkeypatch, tmp_path, idp.url)
        config = gmk_config()
        for role in ("producer", "consumer", "admin"):
            conf = client_config(config.cluster("B"), role)
            Producer({**conf, "bootstrap.servers": "127.0.0.1:9", "logger": _Quiet()}).flush(0)
        called = conf["oauth_cb"]()  # the clients asked already: the access token is held
    assert len(idp.requests) == 1
    assert b64url_json(called[0].split(".")[1])["sub"] == EMAIL


class _Quiet:
    def log(self, *_args: object, **_kwargs: object) -> None:
        pass


def test_no_credentials_fail_before_anything_starts_naming_the_key(monkeypatch, tmp_path):
    offline_gcp(monkeypatch, tmp_path)
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        check_client_builds(gmk_config(), resolve=True)
    assert caught.value.key == "B.sasl.login.callback.handler.class"
    assert "DefaultCredentialsError" in caught.value.expected
    assert time.monotonic() - started < 8  # not librdkafka's 10 s token timeout


def test_user_credentials_are_refused_for_naming_no_service_account(monkeypatch, tmp_path):
    offline_gcp(monkeypatch, tmp_path)
    with fake_idp() as idp:
        user = tmp_path / "user.json"
        user.write_text(
            '{"type": "authorized_user", "client_id": "c", "client_secret": "s", '
            f'"refresh_token": "r", "token_uri": "{idp.url}"}}'
        )
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(user))
        with pytest.raises(ConfigError) as caught:
            check_client_builds(gmk_config(), resolve=True)
    assert "service account" in caught.value.expected
    assert "--impersonate-service-account" in caught.value.expected


def test_validate_builds_the_clients_without_credentials(monkeypatch, tmp_path):
    offline_gcp(monkeypatch, tmp_path)
    assert check_client_builds(gmk_config()).built > 0


@pytest.mark.parametrize(
    ("settings", "key", "expected"),
    [
        ({"sasl_mechanism": "PLAIN"}, "B.sasl.mechanism", "OAUTHBEARER for"),
        ({"sasl_mechanism": ""}, "B.sasl.mechanism", "OAUTHBEARER for"),
        ({"sasl_jaas_config": ""}, "B.sasl.jaas.config", "OAuthBearerLoginModule required;"),
        (
            {
                "sasl_jaas_config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                'required username="u" password="p";'
            },
            "B.sasl.jaas.config",
            "OAuthBearerLoginModule required;",
        ),
    ],
)
def test_a_half_written_google_login_is_refused_naming_the_key(settings, key, expected):
    with pytest.raises(ConfigError) as caught:
        client_config(gmk_config(**settings).cluster("B"), "consumer", resolve=False)
    assert caught.value.key == key
    assert expected in caught.value.expected
