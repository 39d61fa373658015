"""The MSK IAM token callback: signed by AWS's signer with botocore's credential chain, offline
(SigV4 is computed locally), handed to real librdkafka clients, checked before anything starts."""

from __future__ import annotations

import time

import pytest
from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
from confluent_kafka import Producer

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.client_check import check_client_builds
from mirror_lib.kafka.clients import client_config
from mirror_lib.kafka.msk_iam import MskIamToken
from tests.helpers.aws_env import KEY_ID, offline_aws, token_url

HOST = "b-1.src.abc123.c2.kafka.us-east-1.amazonaws.com:9098"


def msk_config(bootstrap: str = HOST, jaas_options: str = ""):
    return parse_config(
        {
            "clusters": "A, B",
            "A.bootstrap.servers": bootstrap,
            "A.security.protocol": "SASL_SSL",
            "A.sasl.mechanism": "AWS_MSK_IAM",
            "A.sasl.jaas.config": "software.amazon.msk.auth.iam.IAMLoginModule required"
            f"{jaas_options};",
            "B.bootstrap.servers": "b:9092",
            "A->B.enabled": "true",
        }
    )


def test_the_callback_signs_a_token_msk_accepts_with_the_default_chain(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    conf = client_config(msk_config().cluster("A"), "consumer")
    assert conf["sasl.mechanism"] == "OAUTHBEARER"
    callback = conf["oauth_cb"]
    assert callback == MskIamToken("us-east-1", "A.sasl.mechanism")
    token, expiry = callback("")
    host, query = token_url(token)
    assert host == "kafka.us-east-1.amazonaws.com"
    assert query["Action"] == "kafka-cluster:Connect"
    assert query["X-Amz-Credential"].startswith(f"{KEY_ID}/")
    assert query["X-Amz-Credential"].endswith("/us-east-1/kafka-cluster/aws4_request")
    assert time.time() + 600 < expiry < time.time() + 1000  # seconds, as librdkafka wants


def test_a_profile_named_in_the_jaas_options_signs_with_that_profiles_keys(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    credentials = tmp_path / "credentials"
    credentials.write_text(
        "[ops]\naws_access_key_id = AKIDOPSPROFILE\naws_secret_access_key = ops/secret\n"
    )
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    config = msk_config(jaas_options=' awsProfileName="ops"')
    token, _ = client_config(config.cluster("A"), "producer")["oauth_cb"]("")
    assert token_url(token)[1]["X-Amz-Credential"].startswith("AKIDOPSPROFILE/")


def test_a_role_is_assumed_with_its_session_name(monkeypatch, tmp_path):
    """The signer assumes the role through STS (a network call): recorded here, not made."""
    seen = []

    def assume(region, role_arn, session="MSKSASLDefaultSession"):
        seen.append((region, role_arn, session))
        return "token", 1_000_000

    monkeypatch.setattr(MSKAuthTokenProvider, "generate_auth_token_from_role_arn", assume)
    arn = "arn:aws:iam::123456789012:role/mirror"
    config = msk_config(jaas_options=f' awsRoleArn="{arn}" awsRoleSessionName="mm2"')
    assert client_config(config.cluster("A"), "admin")["oauth_cb"]("") == ("token", 1000.0)
    assert seen == [("us-east-1", arn, "mm2")]


def test_a_real_librdkafka_client_asks_the_callback_for_its_token(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    asked = []
    sign = MSKAuthTokenProvider.generate_auth_token

    def recording(region, *args):
        asked.append(region)
        return sign(region, *args)

    monkeypatch.setattr(MSKAuthTokenProvider, "generate_auth_token", recording)
    conf = client_config(msk_config().cluster("A"), "producer")
    Producer({**conf, "bootstrap.servers": "127.0.0.1:9"}).flush(0)
    assert asked == ["us-east-1"]


def test_no_credentials_fail_before_anything_starts_naming_the_key(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path, keys=False)
    started = time.monotonic()
    with pytest.raises(ConfigError) as caught:
        check_client_builds(msk_config(), resolve=True)
    assert caught.value.key == "A.sasl.mechanism"
    assert "botocore's default credential chain" in caught.value.expected
    assert "us-east-1" in caught.value.expected
    assert time.monotonic() - started < 8  # not librdkafka's 10 s token timeout


def test_validate_builds_msk_clients_without_credentials(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path, keys=False)
    assert check_client_builds(msk_config()).built > 0


def test_a_private_broker_name_takes_the_region_from_aws_region(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    config = msk_config("kafka-1.internal.example.com:9098")
    with pytest.raises(ConfigError) as caught:
        client_config(config.cluster("A"), "consumer")
    assert caught.value.key == "A.bootstrap.servers"
    assert "AWS_REGION" in caught.value.expected
    monkeypatch.setenv("AWS_REGION", "ap-southeast-2")
    assert client_config(config.cluster("A"), "consumer")["oauth_cb"].region == "ap-southeast-2"
