"""Amazon MSK IAM authentication as MM2 users write it for Java's ``aws-msk-iam-auth``.

librdkafka has no ``AWS_MSK_IAM`` mechanism, but MSK takes the same SigV4-signed IAM token over
``OAUTHBEARER`` from non-Java clients. Both Java forms become ``sasl.mechanism = OAUTHBEARER``
plus the marker :data:`MSK_IAM`, which :func:`mirror_lib.kafka.clients.client_config` replaces
by a token callback (``aws-msk-iam-sasl-signer-python``):

- ``sasl.mechanism = AWS_MSK_IAM`` with ``software.amazon.msk.auth.iam.IAMLoginModule``;
- ``sasl.mechanism = OAUTHBEARER`` with ``OAuthBearerLoginModule`` and the
  ``software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler`` login callback.

The token is signed for the cluster's region, which the Java library reads from the broker
names (``b-1.<cluster>.<id>.c2.kafka.<region>.amazonaws.com``). Every credential option of the
Java library's JAAS line is taken (profile, role and its STS settings, retries, debug); a value
that cannot work is refused here, naming the option.
"""

from __future__ import annotations

import json
import re
from typing import Any

from mirror_lib.config.jaas import JaasEntry, name_leftovers, parse_jaas
from mirror_lib.config.properties import has_reference
from mirror_lib.errors import ConfigError

#: Marker in translated settings; never reaches librdkafka.
MSK_IAM = "mirror.msk.iam"
_PACKAGE = "software.amazon.msk.auth.iam."
_LOGIN_MODULE = _PACKAGE + "IAMLoginModule"
_OAUTH_HANDLER = _PACKAGE + "IAMOAuthBearerLoginCallbackHandler"
_CLIENT_HANDLERS = (_PACKAGE + "IAMClientCallbackHandler", _OAUTH_HANDLER)
#: JAAS option of aws-msk-iam-auth -> the credential provider's field (kafka/aws_login.py).
_OPTIONS = {
    "awsProfileName": "profile",
    "awsRoleArn": "role_arn",
    "awsRoleSessionName": "session",
    "awsRoleExternalId": "external_id",
    "awsRoleAccessKeyId": "role_key_id",
    "awsRoleSecretAccessKey": "role_secret",
    "awsRoleSessionToken": "role_token",
    "awsStsRegion": "sts_region",
    "awsMaxRetries": "max_retries",
    "awsMaxBackOffTimeMs": "max_backoff_ms",
    "awsDebugCreds": "debug_creds",
}
_ROLE_ONLY = (
    "awsRoleSessionName",
    "awsRoleExternalId",
    "awsRoleAccessKeyId",
    "awsRoleSessionToken",
)
_COUNTS = ("awsMaxRetries", "awsMaxBackOffTimeMs")
_WHY_IGNORED = "aws-msk-iam-auth has no such option"
_REGION = re.compile(r"^[a-z]{2}(?:-[a-z]+)+-\d+$")


def region_of(bootstrap: str) -> str | None:
    """The AWS region named in MSK broker addresses, e.g. ``us-east-1``; None when none does."""
    for server in bootstrap.split(","):
        host = server.strip().rsplit(":", 1)[0].lower()
        labels = host.split(".")
        if "amazonaws" not in labels:
            continue
        found = [label for label in labels if _REGION.match(label)]
        if found:
            return found[-1]
    return None


def _options(entry: JaasEntry, where: str, notes: list[str]) -> dict[str, str]:
    """The credential options, checked as far as their values are known (references are not)."""
    given = {name: value for name, value in entry.options.items() if name in _OPTIONS and value}
    for name in _ROLE_ONLY:
        if name in given and "awsRoleArn" not in given:
            raise ConfigError(where, name, "awsRoleArn with it, or neither")
    key_id, secret = "awsRoleAccessKeyId", "awsRoleSecretAccessKey"
    if (key_id in given) != (secret in given):
        one, other = (key_id, secret) if key_id in given else (secret, key_id)
        raise ConfigError(where, one, f"{other} with it, or neither")
    if "awsRoleSessionToken" in given and "awsRoleAccessKeyId" not in given:
        raise ConfigError(
            where, "awsRoleSessionToken", "awsRoleAccessKeyId and awsRoleSecretAccessKey with it"
        )
    known = {n: v.strip() for n, v in given.items() if not has_reference(v)}
    sts = known.get("awsStsRegion")
    if sts is not None and sts != "aws-global" and not _REGION.match(sts):
        raise ConfigError(where, f"awsStsRegion={sts}", "an AWS region (us-east-1) or aws-global")
    for name in _COUNTS:
        if name in known and not known[name].isdigit():
            raise ConfigError(where, f"{name}={known[name]}", "a whole number >= 0")
    debug = known.get("awsDebugCreds")
    if debug is not None and debug.lower() not in ("true", "false"):
        raise ConfigError(where, f"awsDebugCreds={debug}", "true or false")
    name_leftovers(entry, where, set(_OPTIONS), notes, _WHY_IGNORED)
    return {_OPTIONS[name]: value for name, value in given.items()}


def take_msk_iam(rest: dict[str, tuple[str, str]], out: dict[str, Any], notes: list[str]) -> None:
    """Move an MSK IAM login from the Java ``rest`` to ``out``: OAUTHBEARER and the marker.

    Refuses a half-written one (the mechanism without the login module, or the reverse), naming
    the key. Leaves any other login in ``rest``."""
    mechanism = rest.get("sasl.mechanism") or rest.get("sasl.mechanisms")
    mech, mech_key = (mechanism[0].strip().upper(), mechanism[1]) if mechanism else ("", None)
    jaas = rest.get("sasl.jaas.config")
    entry = parse_jaas(*jaas) if jaas is not None and "IAMLoginModule" in jaas[0] else None
    login = rest.get("sasl.login.callback.handler.class")
    iam_login = login is not None and login[0].strip() == _OAUTH_HANDLER
    if mech != "AWS_MSK_IAM" and not iam_login and entry is None:
        return
    if mech == "AWS_MSK_IAM" and (entry is None or entry.module != _LOGIN_MODULE):
        prefix = (mech_key or "").removesuffix("sasl.mechanisms").removesuffix("sasl.mechanism")
        raise ConfigError(
            jaas[1] if jaas else f"{prefix}sasl.jaas.config",
            None if jaas is None else "(another login module)",
            f"{_LOGIN_MODULE} required; with sasl.mechanism = AWS_MSK_IAM",
        )
    if iam_login and (mech != "OAUTHBEARER" or jaas is None):
        raise ConfigError(
            mech_key or "sasl.mechanism",
            mechanism[0] if mechanism else None,
            f"OAUTHBEARER with OAuthBearerLoginModule in sasl.jaas.config for {_OAUTH_HANDLER}",
        )
    if entry is not None and mech != "AWS_MSK_IAM":
        raise ConfigError(
            mech_key or "sasl.mechanism",
            mechanism[0] if mechanism else None,
            f"AWS_MSK_IAM for {entry.module}",
        )
    assert jaas is not None
    entry = entry or parse_jaas(*jaas)
    if entry.simple_name not in ("IAMLoginModule", "OAuthBearerLoginModule"):
        raise ConfigError(jaas[1], entry.module, f"OAuthBearerLoginModule for {_OAUTH_HANDLER}")
    handler = rest.pop("sasl.client.callback.handler.class", None)
    if handler is not None and handler[0].strip() not in _CLIENT_HANDLERS:
        raise ConfigError(handler[1], handler[0], " or ".join(_CLIENT_HANDLERS) + " for MSK IAM")
    for key in (
        "sasl.mechanism",
        "sasl.mechanisms",
        "sasl.jaas.config",
        "sasl.login.callback.handler.class",
    ):
        rest.pop(key, None)
    marker = {
        "where": mech_key or jaas[1],
        "region": region_of(rest.get("bootstrap.servers", ("", ""))[0]),
        **_options(entry, jaas[1], notes),
    }
    out["sasl.mechanism"] = "OAUTHBEARER"
    out[MSK_IAM] = json.dumps(marker, sort_keys=True)
