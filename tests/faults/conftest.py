"""The fault matrix runs `mirror run` as the integration tests do: their fixtures, shared."""

from tests.integration.conftest import subprocess_env

__all__ = ["subprocess_env"]
