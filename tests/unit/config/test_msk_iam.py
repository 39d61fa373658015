"""MSK IAM logins written for Java's aws-msk-iam-auth become OAUTHBEARER plus the marker that
the kafka layer turns into the token callback (tests/unit/kafka/test_msk_iam.py)."""

from __future__ import annotations

import json

import pytest

from mirror_lib.config.java_clients import translate
from mirror_lib.config.msk_iam import MSK_IAM, region_of
from mirror_lib.errors import ConfigError

HOST = "b-1.src.abc123.c2.kafka.us-east-1.amazonaws.com:9098"
MODULE = "software.amazon.msk.auth.iam.IAMLoginModule"
HANDLER = "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"
OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


def props(**settings: str) -> dict[str, tuple[str, str]]:
    settings = {"bootstrap.servers": HOST, "security.protocol": "SASL_SSL", **settings}
    return {k.replace("_", "."): (v, f"A.{k.replace('_', '.')}") for k, v in settings.items()}


def marker(conf: dict) -> dict:
    return json.loads(conf[MSK_IAM])


def test_aws_msk_iam_with_its_login_module_is_oauthbearer_signed_for_the_brokers_region():
    conf, notes = translate(
        props(
            sasl_mechanism="AWS_MSK_IAM",
            sasl_jaas_config=f"{MODULE} required;",
            sasl_client_callback_handler_class="software.amazon.msk.auth.iam.IAMClientCallbackHandler",
        ),
        "producer",
    )
    assert conf["sasl.mechanism"] == "OAUTHBEARER"
    assert conf["security.protocol"] == "SASL_SSL"
    assert marker(conf) == {"region": "us-east-1", "where": "A.sasl.mechanism"}
    assert not [k for k in conf if k.startswith("sasl.") and k != "sasl.mechanism"]
    assert notes == []


def test_the_oauthbearer_form_with_the_iam_login_handler_is_the_same_login():
    conf, _ = translate(
        props(
            sasl_mechanism="OAUTHBEARER",
            sasl_jaas_config=f"{OAUTH_MODULE} required;",
            sasl_login_callback_handler_class=HANDLER,
            sasl_client_callback_handler_class=HANDLER,
        ),
        "consumer",
    )
    assert conf["sasl.mechanism"] == "OAUTHBEARER"
    assert marker(conf)["region"] == "us-east-1"


def test_every_option_of_aws_msk_iam_auth_is_taken_and_an_unknown_one_named():
    jaas = (
        f'{MODULE} required awsRoleArn="arn:aws:iam::123456789012:role/mirror" '
        'awsRoleSessionName="mm2" awsProfileName="ops" awsRoleExternalId="ext" '
        'awsRoleAccessKeyId="AKID" awsRoleSecretAccessKey="s3cret" awsRoleSessionToken="tok" '
        'awsStsRegion="eu-west-1" awsMaxRetries="5" awsMaxBackOffTimeMs="200" awsDebugCreds=true '
        'awsRoleArnn="typo";'
    )
    conf, notes = translate(props(sasl_mechanism="AWS_MSK_IAM", sasl_jaas_config=jaas), "admin")
    assert marker(conf) == {
        "region": "us-east-1",
        "where": "A.sasl.mechanism",
        "role_arn": "arn:aws:iam::123456789012:role/mirror",
        "session": "mm2",
        "profile": "ops",
        "external_id": "ext",
        "role_key_id": "AKID",
        "role_secret": "s3cret",
        "role_token": "tok",
        "sts_region": "eu-west-1",
        "max_retries": "5",
        "max_backoff_ms": "200",
        "debug_creds": "true",
    }
    assert notes == [
        "A.sasl.jaas.config: IAMLoginModule option(s) awsRoleArnn ignored: "
        "aws-msk-iam-auth has no such option"
    ]


@pytest.mark.parametrize(
    ("options", "value", "expected"),
    [
        ('awsRoleSessionName="mm2"', "awsRoleSessionName", "awsRoleArn with it"),
        ('awsRoleExternalId="x"', "awsRoleExternalId", "awsRoleArn with it"),
        ('awsRoleAccessKeyId="AKID"', "awsRoleAccessKeyId", "awsRoleArn with it"),
        (
            f'{"awsRoleArn=r"} awsRoleAccessKeyId="AKID"',
            "awsRoleAccessKeyId",
            "awsRoleSecretAccessKey with it",
        ),
        (
            'awsRoleArn=r awsRoleSecretAccessKey="s3cret"',
            "awsRoleSecretAccessKey",
            "awsRoleAccessKeyId with it",
        ),
        ('awsRoleArn=r awsRoleSessionToken="tok"', "awsRoleSessionToken", "awsRoleAccessKeyId and"),
        (
            'awsStsRegion="Ireland"',
            "awsStsRegion=Ireland",
            "an AWS region (us-east-1) or aws-global",
        ),
        ('awsMaxRetries="three"', "awsMaxRetries=three", "a whole number >= 0"),
        ('awsMaxBackOffTimeMs="-1"', "awsMaxBackOffTimeMs=-1", "a whole number >= 0"),
        ('awsDebugCreds="yes"', "awsDebugCreds=yes", "true or false"),
    ],
)
def test_a_credential_option_that_cannot_work_is_refused_naming_it(options, value, expected):
    jaas = f"{MODULE} required {options};"
    with pytest.raises(ConfigError) as caught:
        translate(props(sasl_mechanism="AWS_MSK_IAM", sasl_jaas_config=jaas), "admin")
    assert (caught.value.key, caught.value.value) == ("A.sasl.jaas.config", value)
    assert expected in caught.value.expected
    assert "s3cret" not in str(caught.value) and "tok" not in str(caught.value)


def test_options_given_as_references_are_checked_only_when_resolved():
    jaas = f'{MODULE} required awsMaxRetries="${{env:RETRIES}}" awsStsRegion="${{env:STS}}";'
    conf, _ = translate(props(sasl_mechanism="AWS_MSK_IAM", sasl_jaas_config=jaas), "admin")
    assert marker(conf)["max_retries"] == "${env:RETRIES}"


@pytest.mark.parametrize(
    ("settings", "key", "expected"),
    [
        ({"sasl_mechanism": "AWS_MSK_IAM"}, "A.sasl.jaas.config", "IAMLoginModule required;"),
        (
            {
                "sasl_mechanism": "AWS_MSK_IAM",
                "sasl_jaas_config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                'required username="u" password="p";',
            },
            "A.sasl.jaas.config",
            "IAMLoginModule required;",
        ),
        (
            {"sasl_mechanism": "SCRAM-SHA-512", "sasl_jaas_config": f"{MODULE} required;"},
            "A.sasl.mechanism",
            "AWS_MSK_IAM for software.amazon.msk.auth.iam.IAMLoginModule",
        ),
        (
            {
                "sasl_mechanism": "PLAIN",
                "sasl_jaas_config": f"{OAUTH_MODULE} required;",
                "sasl_login_callback_handler_class": HANDLER,
            },
            "A.sasl.mechanism",
            "OAUTHBEARER with OAuthBearerLoginModule",
        ),
        (
            {
                "sasl_mechanism": "AWS_MSK_IAM",
                "sasl_jaas_config": f"{MODULE} required;",
                "sasl_client_callback_handler_class": "com.example.MyHandler",
            },
            "A.sasl.client.callback.handler.class",
            "IAMClientCallbackHandler",
        ),
    ],
)
def test_a_half_written_msk_iam_login_is_refused_naming_the_key(settings, key, expected):
    with pytest.raises(ConfigError) as caught:
        translate(props(**settings), "producer")
    assert caught.value.key == key
    assert expected in caught.value.expected


@pytest.mark.parametrize(
    ("bootstrap", "region"),
    [
        (HOST, "us-east-1"),
        ("boot-abc.c1.kafka-serverless.eu-central-1.amazonaws.com:9098", "eu-central-1"),
        ("b-1.x.y.c1.kafka.cn-north-1.amazonaws.com.cn:9098", "cn-north-1"),
        ("b-1.x.y.c4.kafka.us-gov-west-1.amazonaws.com:9098", "us-gov-west-1"),
        ("kafka.internal.example.com:9098", None),  # a private DNS name: AWS_REGION at run time
        ("us-east-1.example.com:9098", None),
    ],
)
def test_the_region_is_read_from_msk_broker_names(bootstrap, region):
    assert region_of(f"{bootstrap},{bootstrap}") == region
