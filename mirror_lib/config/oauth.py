"""OAUTHBEARER login settings that Kafka 4.1's Java client reads from properties (KIP-1139).

Since Kafka 4.1 the OIDC client credentials may be client properties instead of JAAS options:
``sasl.oauthbearer.client.credentials.client.id`` / ``.client.secret`` and
``sasl.oauthbearer.scope``, preferred over the JAAS ``clientId`` / ``clientSecret`` / ``scope``
when both are set, as Java does. ``sasl.oauthbearer.jwt.retriever.class`` chooses the grant:
client credentials, or jwt-bearer with a signed assertion (``sasl.oauthbearer.assertion.*``,
which librdkafka has under the same names). The values taken here reach
:func:`mirror_lib.config.jaas.translate_jaas`, which makes ``OAuthBearerLoginModule`` librdkafka's
OIDC login.
"""

from __future__ import annotations

from mirror_lib.errors import ConfigError

_PACKAGE = "org.apache.kafka.common.security.oauthbearer."
#: Kafka 4.1 property -> librdkafka's name for it.
OAUTH_NAMES = {
    "sasl.oauthbearer.client.credentials.client.id": "sasl.oauthbearer.client.id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl.oauthbearer.client.secret",
    "sasl.oauthbearer.scope": "sasl.oauthbearer.scope",
}
JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
_GRANTS = {
    "DefaultJwtRetriever": "client_credentials",
    "ClientCredentialsJwtRetriever": "client_credentials",
    "JwtBearerJwtRetriever": JWT_BEARER,
}
_CLIENT_VALIDATORS = ("DefaultJwtValidator", "ClientJwtValidator")


def take_oauth_properties(rest: dict[str, tuple[str, str]], notes: list[str]) -> dict[str, str]:
    """Pop the Kafka 4.1 OAUTHBEARER login properties from ``rest``: librdkafka settings for the
    OIDC login (credentials under librdkafka's names, and ``sasl.oauthbearer.grant.type``)."""
    given = {name: rest.pop(key)[0] for key, name in OAUTH_NAMES.items() if key in rest}
    url = rest.get("sasl.oauthbearer.token.endpoint.url")
    if url is not None and url[0].strip().lower().startswith("file:"):
        raise ConfigError(
            url[1],
            url[0],
            "the identity provider's https token endpoint: librdkafka asks it for the token, and "
            "cannot read a token from a file as Java's FileJwtRetriever does",
        )
    retriever = rest.pop("sasl.oauthbearer.jwt.retriever.class", None)
    if retriever is not None:
        value, where = retriever
        simple = value.strip().rsplit(".", 1)[-1]
        if simple not in _GRANTS:
            raise ConfigError(
                where,
                value,
                f"{_PACKAGE}ClientCredentialsJwtRetriever, JwtBearerJwtRetriever or "
                "DefaultJwtRetriever: librdkafka has these grants and cannot load a Java class",
            )
        given["sasl.oauthbearer.grant.type"] = _GRANTS[simple]
    validator = rest.pop("sasl.oauthbearer.jwt.validator.class", None)
    if validator is not None:
        simple = validator[0].strip().rsplit(".", 1)[-1]
        why = "" if simple in _CLIENT_VALIDATORS else f" (a Java class, {validator[0].strip()})"
        notes.append(
            f"{validator[1]} is ignored{why}: librdkafka checks the token's expiry and the broker "
            "validates the token itself"
        )
    return given
