"""AWS credentials for MSK IAM, chosen the way Java's ``aws-msk-iam-auth`` chooses them.

Its JAAS options name the sources, tried in this order until one gives credentials: the profile
(``awsProfileName``), the role (``awsRoleArn``, assumed through STS with ``awsRoleSessionName``,
``awsRoleExternalId``, the base keys ``awsRoleAccessKeyId`` / ``awsRoleSecretAccessKey`` /
``awsRoleSessionToken``, at the endpoint of ``awsStsRegion``, else the global one), then botocore's
default chain. A failed round is tried again ``awsMaxRetries`` times (3) with full-jitter
back-off from 0.5 s up to ``awsMaxBackOffTimeMs`` (5000). ``awsDebugCreds=true`` logs whose
credentials they are.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any

_log = logging.getLogger(__name__)
#: Java's role session name when ``awsRoleSessionName`` is not given.
DEFAULT_SESSION = "aws-msk-iam-auth"
#: Assumed-role credentials are used until this close to their expiry.
_RENEW_BEFORE_S = 300.0
_BASE_DELAY_S = 0.5


class NoCredentials(Exception):
    """No source gave credentials; the message names each source tried and why it failed."""


@dataclass(frozen=True)
class AwsLogin:
    """The credential options of one MSK IAM login (all optional, as in Java)."""

    profile: str | None = None
    role_arn: str | None = None
    session: str = DEFAULT_SESSION
    external_id: str | None = None
    role_key_id: str | None = None
    role_secret: str | None = field(default=None, repr=False)
    role_token: str | None = field(default=None, repr=False)
    sts_region: str = "aws-global"
    max_retries: int = 3
    max_backoff_ms: int = 5000
    debug_creds: bool = False

    @classmethod
    def from_options(cls, options: dict[str, str]) -> AwsLogin:
        """From the marker's option fields (strings, as the JAAS line has them)."""
        typed: dict[str, Any] = {k: v.strip() for k, v in options.items()}
        for name in ("max_retries", "max_backoff_ms"):
            if name in typed:
                typed[name] = int(typed[name])
        if "debug_creds" in typed:
            typed["debug_creds"] = typed["debug_creds"].lower() == "true"
        return cls(**typed)

    def describe(self) -> str:
        """The sources in the order they are tried, for errors."""
        sources = [f"profile {self.profile}"] if self.profile else []
        sources += [f"role {self.role_arn}"] if self.role_arn else []
        return ", then ".join([*sources, "botocore's default credential chain"])

    def credentials(self) -> Any:
        """botocore ``Credentials`` from the first source that gives them, with Java's retries."""
        for attempt in range(self.max_retries + 1):
            try:
                found = self._first_source()
                break
            except NoCredentials:
                if attempt == self.max_retries:
                    raise
                cap = min(self.max_backoff_ms / 1000, _BASE_DELAY_S * 2**attempt)
                time.sleep(random.uniform(0, cap))
        if self.debug_creds:
            self._log_identity(found)
        return found

    def sts_client(self) -> Any:
        """The STS client that assumes the role: regional endpoint for ``awsStsRegion``."""
        if self.role_key_id:
            return _sts(self.sts_region, self.role_key_id, self.role_secret, self.role_token)
        return _sts(self.sts_region)

    def _first_source(self) -> Any:
        import botocore.session
        from botocore.exceptions import BotoCoreError, ClientError

        failed = []
        if self.profile:
            try:
                found = botocore.session.Session(profile=self.profile).get_credentials()
                if found is not None:
                    return found.get_frozen_credentials()
                failed.append(f"profile {self.profile}: no credentials in it")
            except BotoCoreError as exc:
                failed.append(f"profile {self.profile}: {type(exc).__name__}: {exc}")
        if self.role_arn:
            try:
                return _ROLES.credentials(self)
            except (BotoCoreError, ClientError) as exc:
                failed.append(f"role {self.role_arn}: {type(exc).__name__}: {exc}")
        try:
            found = botocore.session.Session().get_credentials()
        except BotoCoreError as exc:
            found = None
            failed.append(f"botocore's default credential chain: {type(exc).__name__}: {exc}")
        else:
            if found is None:
                failed.append("botocore's default credential chain: no credentials found")
        if found is None:
            raise NoCredentials("; ".join(failed))
        if failed:
            _log.warning("MSK IAM uses botocore's default credential chain: %s", "; ".join(failed))
        return found.get_frozen_credentials()

    def _assume(self) -> tuple[Any, float]:
        from botocore.credentials import ReadOnlyCredentials

        extra = {"ExternalId": self.external_id} if self.external_id else {}
        answer = self.sts_client().assume_role(
            RoleArn=self.role_arn, RoleSessionName=self.session, **extra
        )["Credentials"]
        keys = ReadOnlyCredentials(
            answer["AccessKeyId"], answer["SecretAccessKey"], answer["SessionToken"]
        )
        return keys, answer["Expiration"].timestamp()

    def _log_identity(self, keys: Any) -> None:
        try:
            who = _sts(
                self.sts_region, keys.access_key, keys.secret_key, keys.token
            ).get_caller_identity()
            _log.info(
                "MSK IAM credentials are those of %s (account %s)", who["Arn"], who["Account"]
            )
        except Exception as exc:  # the identity is only logged; the login goes on (as in Java)
            _log.warning("MSK IAM awsDebugCreds: could not ask STS whose credentials: %s", exc)


def _sts(region: str, *keys: str | None) -> Any:
    """An STS client for ``region`` (``aws-global``: the global endpoint), signing with ``keys``
    (access key id, secret, session token) or with botocore's default chain."""
    import botocore.session  # lazy: extra "aws"

    names = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
    return botocore.session.Session().create_client(
        "sts", region_name=region, **dict(zip(names, keys, strict=False))
    )


class _AssumedRoles:
    """Assumed-role credentials per login, kept until shortly before they expire (as Java's
    StsAssumeRoleCredentialsProvider does): every client of a slice asks for a token, and an STS
    call each time would add its round trip to each client's start."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[AwsLogin, tuple[Any, float]] = {}

    def credentials(self, login: AwsLogin) -> Any:
        with self._lock:
            held = self._held.get(login)
            if held is not None and held[1] - _RENEW_BEFORE_S > time.time():
                return held[0]
        keys, expires = login._assume()
        with self._lock:
            self._held[login] = (keys, expires)
        return keys


_ROLES = _AssumedRoles()
