"""The OAUTHBEARER token callback for Amazon MSK IAM (see :mod:`mirror_lib.config.msk_iam`).

AWS's own signer (``aws-msk-iam-sasl-signer-python``, extra ``aws``) signs the token with the
credentials :class:`~mirror_lib.kafka.aws_login.AwsLogin` finds, as Java's ``aws-msk-iam-auth``
finds them. librdkafka asks again before a token expires.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from mirror_lib.errors import ConfigError
from mirror_lib.kafka.aws_login import AwsLogin, NoCredentials

_INSTALL = "pip install 'mirror_lib[aws]' (aws-msk-iam-sasl-signer-python)"


@dataclass(frozen=True)
class MskIamToken:
    """confluent-kafka's ``oauth_cb``: a signed MSK IAM token and its expiry (epoch seconds)."""

    region: str
    where: str  # the key that asked for MSK IAM, for errors
    login: AwsLogin = field(default_factory=AwsLogin)

    def __call__(self, _oauthbearer_config: str | None = None) -> tuple[str, float]:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider as signer  # lazy: extra "aws"
        from botocore.credentials import CredentialProvider

        class Found(CredentialProvider):  # the signer takes credentials only from a provider
            def load(self) -> Any:
                return keys

        keys = self.login.credentials()
        token, expiry_ms = signer.generate_auth_token_from_credentials_provider(
            self.region, Found()
        )
        return token, expiry_ms / 1000

    def check(self) -> None:
        """Sign one token now, so missing credentials or the missing signer fail before
        anything starts (a failing callback only shows as librdkafka's 10 s token timeout)."""
        try:
            self()
        except ImportError as exc:
            raise ConfigError(
                self.where, "AWS_MSK_IAM", f"the AWS signer installed: {_INSTALL}"
            ) from exc
        except Exception as exc:  # botocore's and the signer's errors have no common base
            why = str(exc) if isinstance(exc, NoCredentials) else f"{type(exc).__name__}: {exc}"
            raise ConfigError(
                self.where,
                "AWS_MSK_IAM",
                f"AWS credentials from {self.login.describe()} to sign an MSK IAM token for "
                f"{self.region}: {why}",
            ) from exc


def token_callback(marker: str, alias: str, bootstrap: str) -> MskIamToken:
    """The callback for one client from the :data:`~mirror_lib.config.msk_iam.MSK_IAM` marker;
    the region comes from the broker names, else ``AWS_REGION`` / ``AWS_DEFAULT_REGION``."""
    spec = json.loads(marker)
    where = spec.pop("where")
    region = (
        spec.pop("region") or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    )
    if not region:
        raise ConfigError(
            f"{alias}.bootstrap.servers",
            bootstrap,
            f"MSK broker names (...kafka.<region>.amazonaws.com) or the AWS_REGION environment "
            f"variable: {where} signs its token for the cluster's region",
        )
    return MskIamToken(region, where, AwsLogin.from_options(spec))


def region_note(marker: str, alias: str, bootstrap: str) -> list[str]:
    """For validate, which signs nothing: a warning when no region is known here for signing."""
    try:
        token_callback(marker, alias, bootstrap)
    except ConfigError as exc:
        return [
            f"{exc.key}: the region MSK IAM signs for is not in these broker names, and neither "
            "AWS_REGION nor AWS_DEFAULT_REGION is set here: set one where mirror run runs"
        ]
    return []
