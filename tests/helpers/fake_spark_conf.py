"""A stand-in for ``spark.conf``: set values, or Databricks serverless' refusal of unset ones."""

from __future__ import annotations

from typing import Any


class ConfigNotAvailable(Exception):
    """What serverless' ``spark.conf.get`` raises: AnalysisException [CONFIG_NOT_AVAILABLE]."""


class FakeConf:
    """``get(key, default)``; with ``serverless=True`` a key not in ``values`` raises even with a
    default, as Spark Connect on serverless does for configs outside its allowlist."""

    def __init__(self, values: dict[str, str], serverless: bool = False) -> None:
        self.values = values
        self.serverless = serverless

    def get(self, key: str, default: Any = None) -> Any:
        if self.serverless and key not in self.values:
            raise ConfigNotAvailable(f"[CONFIG_NOT_AVAILABLE] Configuration {key} is not available")
        return self.values.get(key, default)


class FakeSpark:
    """A session with only ``conf``."""

    def __init__(self, serverless: bool = False, **conf: str) -> None:
        self.conf = FakeConf(conf, serverless)
