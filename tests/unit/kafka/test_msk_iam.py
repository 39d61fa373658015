"""The MSK IAM token callback: signed by AWS's signer with botocore's credential chain, offline
(SigV4 is computed locally), handed to real librdkafka clients, checked before anything starts."""

from __future__ import annotations

import logging
import time

import pytest
from aws_msk_iam_sasl_signer import MSKAuthTokenProvider
from confluent_kafka import Producer

from mirror_lib.config.parse import parse_config
from mirror_lib.errors import ConfigError
from mirror_lib.kafka.aws_login import AwsLogin
from mirror_lib.kafka.client_check import check_client_builds
from mirror_lib.kafka.clients import client_config
from mirror_lib.kafka.msk_iam import MskIamToken
from tests.helpers.aws_env import KEY_ID, offline_aws, token_url
from tests.helpers.fake_sts import ASSUMED_KEY_ID, fake_sts

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


def role(tmp_path) -> str:
    """A role of this test only: assumed credentials are kept per login for the process."""
    return f"arn:aws:iam::123456789012:role/{tmp_path.name}"


def test_a_role_is_assumed_with_the_jaas_options_and_its_keys_sign_the_token(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    options = (
        f' awsRoleArn="{role(tmp_path)}" awsRoleSessionName="mm2" awsRoleExternalId="ext-42"'
        ' awsRoleAccessKeyId="AKIDROLEBASE" awsRoleSecretAccessKey="base/secret"'
    )
    with fake_sts(monkeypatch) as sts:
        token, _ = client_config(msk_config(jaas_options=options).cluster("A"), "admin")[
            "oauth_cb"
        ]()
    [call] = sts.assumed()
    assert call["RoleArn"] == role(tmp_path)
    assert call["RoleSessionName"] == "mm2"
    assert call["ExternalId"] == "ext-42"
    assert call["signed_by"] == "AKIDROLEBASE"  # the JAAS base keys, not the environment's
    query = token_url(token)[1]
    assert query["X-Amz-Credential"].startswith(f"{ASSUMED_KEY_ID}/")
    assert query["X-Amz-Security-Token"] == "assumed-session-token"


def test_assumed_credentials_serve_every_client_until_they_near_expiry(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    config = msk_config(jaas_options=f' awsRoleArn="{role(tmp_path)}"')
    with fake_sts(monkeypatch) as sts:
        for client in ("consumer", "producer", "admin"):
            client_config(config.cluster("A"), client)["oauth_cb"]()
    [call] = sts.assumed()
    assert call["RoleSessionName"] == "aws-msk-iam-auth"  # Java's default session name
    assert call["signed_by"] == KEY_ID  # base credentials from the default chain


def test_the_sts_endpoint_is_regional_for_aws_sts_region_else_global():
    assert AwsLogin(role_arn="r").sts_client().meta.endpoint_url == "https://sts.amazonaws.com"
    regional = AwsLogin(role_arn="r", sts_region="eu-west-1").sts_client()
    assert regional.meta.endpoint_url == "https://sts.eu-west-1.amazonaws.com"
    assert regional.meta.region_name == "eu-west-1"


def test_a_profile_is_tried_before_the_role_as_in_java(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    credentials = tmp_path / "credentials"
    credentials.write_text("[ops]\naws_access_key_id = AKIDOPS\naws_secret_access_key = s\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(credentials))
    options = f' awsProfileName="ops" awsRoleArn="{role(tmp_path)}"'
    with fake_sts(monkeypatch) as sts:
        token, _ = client_config(msk_config(jaas_options=options).cluster("A"), "admin")[
            "oauth_cb"
        ]()
    assert token_url(token)[1]["X-Amz-Credential"].startswith("AKIDOPS/")
    assert sts.assumed() == []


def test_a_refused_role_falls_back_to_the_default_chain_with_a_warning(
    monkeypatch, tmp_path, caplog
):
    offline_aws(monkeypatch, tmp_path)
    config = msk_config(jaas_options=f' awsRoleArn="{role(tmp_path)}"')
    with fake_sts(monkeypatch) as sts:
        sts.refuse = True
        token, _ = client_config(config.cluster("A"), "admin")["oauth_cb"]()
    assert token_url(token)[1]["X-Amz-Credential"].startswith(f"{KEY_ID}/")
    assert f"role {role(tmp_path)}: ClientError" in caplog.text and "AccessDenied" in caplog.text


def test_no_source_gives_credentials_after_aws_max_retries_and_every_failure_is_named(
    monkeypatch, tmp_path
):
    offline_aws(monkeypatch, tmp_path, keys=False)
    options = (
        f' awsRoleArn="{role(tmp_path)}" awsRoleAccessKeyId="AKIDROLEBASE"'
        ' awsRoleSecretAccessKey="base/secret" awsMaxRetries="2" awsMaxBackOffTimeMs="10"'
    )
    with fake_sts(monkeypatch) as sts, pytest.raises(ConfigError) as caught:
        sts.refuse = True
        check_client_builds(msk_config(jaas_options=options), resolve=True)
    assert len(sts.assumed()) == 3  # the first try and two retries (checked once per cluster)
    assert caught.value.key == "A.sasl.mechanism"
    expected = caught.value.expected
    assert f"role {role(tmp_path)}, then botocore's default credential chain" in expected
    assert "AccessDenied" in expected and "no credentials found" in expected
    assert "base/secret" not in str(caught.value)


def test_aws_debug_creds_logs_whose_credentials_sign(monkeypatch, tmp_path, caplog):
    offline_aws(monkeypatch, tmp_path)
    options = f' awsRoleArn="{role(tmp_path)}" awsDebugCreds=true'
    with fake_sts(monkeypatch), caplog.at_level(logging.INFO, "mirror_lib.kafka.aws_login"):
        client_config(msk_config(jaas_options=options).cluster("A"), "admin")["oauth_cb"]()
    assert f"assumed-role/mirror/{ASSUMED_KEY_ID} (account 123456789012)" in caplog.text


def test_a_real_librdkafka_client_asks_the_callback_for_its_token(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    asked = []
    sign = MSKAuthTokenProvider.generate_auth_token_from_credentials_provider

    def recording(region, provider):
        asked.append(region)
        return sign(region, provider)

    monkeypatch.setattr(
        MSKAuthTokenProvider, "generate_auth_token_from_credentials_provider", recording
    )
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
    report = check_client_builds(msk_config())
    assert report.built > 0
    assert not [note for note in report.notes if "region" in note]


def test_validate_warns_when_no_region_is_known_for_signing(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    config = msk_config("kafka-1.internal.example.com:9098")
    [note] = [n for n in check_client_builds(config).notes if "region" in n]
    assert note.startswith("A.bootstrap.servers: ") and "AWS_REGION" in note
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    assert not [n for n in check_client_builds(config).notes if "region" in n]


def test_a_private_broker_name_takes_the_region_from_aws_region(monkeypatch, tmp_path):
    offline_aws(monkeypatch, tmp_path)
    config = msk_config("kafka-1.internal.example.com:9098")
    with pytest.raises(ConfigError) as caught:
        client_config(config.cluster("A"), "consumer")
    assert caught.value.key == "A.bootstrap.servers"
    assert "AWS_REGION" in caught.value.expected
    monkeypatch.setenv("AWS_REGION", "ap-southeast-2")
    assert client_config(config.cluster("A"), "consumer")["oauth_cb"].region == "ap-southeast-2"
