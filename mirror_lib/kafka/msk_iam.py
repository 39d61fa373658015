"""The OAUTHBEARER token callback for Amazon MSK IAM (see :mod:`mirror_lib.config.msk_iam`).

AWS's own signer (``aws-msk-iam-sasl-signer-python``, extra ``aws``) signs the token with
botocore's credential chain: environment, profile, web identity, container or instance role,
as the Java ``aws-msk-iam-auth`` library does. librdkafka asks again before a token expires.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from mirror_lib.errors import ConfigError

_INSTALL = "pip install 'mirror_lib[aws]' (aws-msk-iam-sasl-signer-python)"


@dataclass(frozen=True)
class MskIamToken:
    """confluent-kafka's ``oauth_cb``: a signed MSK IAM token and its expiry (epoch seconds)."""

    region: str
    where: str  # the key that asked for MSK IAM, for errors
    profile: str | None = None
    role_arn: str | None = None
    session: str | None = None

    def __call__(self, _oauthbearer_config: str | None = None) -> tuple[str, float]:
        from aws_msk_iam_sasl_signer import MSKAuthTokenProvider as signer  # lazy: extra "aws"

        if self.role_arn:
            args = (self.session,) if self.session else ()
            token, expiry_ms = signer.generate_auth_token_from_role_arn(
                self.region, self.role_arn, *args
            )
        elif self.profile:
            token, expiry_ms = signer.generate_auth_token_from_profile(self.region, self.profile)
        else:
            token, expiry_ms = signer.generate_auth_token(self.region)
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
        except Exception as exc:  # botocore's credential and STS errors have no common base
            source = (
                f"role {self.role_arn}" if self.role_arn
                else f"profile {self.profile}" if self.profile
                else "botocore's default credential chain"
            )  # fmt: skip
            raise ConfigError(
                self.where,
                "AWS_MSK_IAM",
                f"AWS credentials from {source} to sign an MSK IAM token for {self.region}: "
                f"{type(exc).__name__}: {exc}",
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
    return MskIamToken(region, where, **spec)
