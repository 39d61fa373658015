"""Stand-ins for a Spark session: its ``spark.conf`` (set values, or Databricks serverless' refusal
of unset ones), and one that records the Delta tables it is asked to write."""

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


class _Writer:
    """``df.write.format(f).mode(m)`` that records where ``save``/``saveAsTable`` wrote."""

    def __init__(self, saved: list[tuple[str, str, str, int]], rows: int) -> None:
        self.saved, self.rows, self.how = saved, rows, ("", "")

    def format(self, name: str) -> _Writer:
        self.how = (name, self.how[1])
        return self

    def mode(self, name: str) -> _Writer:
        self.how = (self.how[0], name)
        return self

    def save(self, path: str) -> None:
        self.saved.append((*self.how, path, self.rows))

    def saveAsTable(self, name: str) -> None:
        self.saved.append((*self.how, name, self.rows))


class _Frame:
    def __init__(self, saved: list[tuple[str, str, str, int]], rows: int) -> None:
        self.write = _Writer(saved, rows)


class SavingSpark(FakeSpark):
    """A session with ``conf`` and ``createDataFrame`` of Arrow tables, whose writes are
    recorded in ``saved`` as (format, mode, folder or table, rows)."""

    def __init__(self, **conf: str) -> None:
        super().__init__(**conf)
        self.saved: list[tuple[str, str, str, int]] = []

    def createDataFrame(self, table: Any) -> _Frame:
        return _Frame(self.saved, table.num_rows)
