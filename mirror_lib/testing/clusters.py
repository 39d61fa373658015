"""Test clusters on either broker: Apache Kafka (the default) or the embedded tansu.

Tests, the bench and the demo ask for clusters by alias here and get bootstrap strings back, so
each of them runs on either broker (``--broker kafka|tansu``, or ``MIRROR_TEST_BROKER`` in tests).
``MIRROR_TEST_KAFKA_VERSION`` picks the Apache Kafka release (default: the pinned 4.3.1; the
Kafka 4.4 tier, ``make test-kafka44``, sets ``4.4``).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mirror_lib.errors import ConfigError

BROKER_ENV = "MIRROR_TEST_BROKER"
VERSION_ENV = "MIRROR_TEST_KAFKA_VERSION"
BROKER_KINDS = ("kafka", "tansu")
#: what a flow over each kind needs: tansu's fetch costs more the longer its partition, so a copy
#: task at its head fetches a partition again only 50 ms after its last records
#: (docs/how-it-works.md#fetches-at-the-head)
FLOW_SETTINGS: dict[str, dict[str, str]] = {"kafka": {}, "tansu": {"mirror.fetch.pace.ms": "50"}}


def broker_kind(value: str | None = None) -> str:
    """``value``, else ``$MIRROR_TEST_BROKER``, else ``kafka``; checked against the kinds."""
    kind = (value if value is not None else os.environ.get(BROKER_ENV, "")).strip().lower()
    kind = kind or "kafka"
    if kind not in BROKER_KINDS:
        where = "argument" if value is not None else "environment"
        raise ConfigError(BROKER_ENV, kind, f"one of {', '.join(BROKER_KINDS)}", where=where)
    return kind


def kafka_version(value: str | None = None) -> str:
    """The Apache Kafka release of test clusters: ``value``, else ``$MIRROR_TEST_KAFKA_VERSION``,
    else the pinned default; checked against the releases the tests can fetch."""
    from mirror_lib.testing import kafka_jars

    chosen = (value if value is not None else os.environ.get(VERSION_ENV, "")).strip()
    if not chosen:
        return kafka_jars.KAFKA_VERSION
    try:
        return kafka_jars.release(chosen).version
    except ConfigError as e:
        where = "argument" if value is not None else "environment"
        raise ConfigError(VERSION_ENV, chosen, e.expected, where=where) from None


@dataclasses.dataclass
class Started:
    """Clusters started here: their bootstraps by alias, and how to stop them."""

    kind: str
    bootstraps: dict[str, str]
    handles: list[object]
    _stop: Callable[[], None] = dataclasses.field(repr=False)
    #: alias -> its :class:`~mirror_lib.testing.kafka_cluster.KafkaCluster` (``brokers > 1``)
    clusters: dict[str, Any] = dataclasses.field(default_factory=dict)
    #: what every topic of these clusters gets, for the flow's and MM2's topics too
    replication_factor: int = 1

    def stop(self) -> None:
        self._stop()


def start_clusters(
    aliases: Sequence[str], workdir: Path, kind: str | None = None, brokers: int = 1
) -> Started:
    """Start one cluster per alias on ``kind`` (see :func:`broker_kind`): a single node, or
    with ``brokers = 3`` three combined KRaft nodes with replication factor 3 and
    ``min.insync.replicas = 2`` (:mod:`mirror_lib.testing.kafka_cluster`; Apache Kafka only).

    Single-node Apache Kafka clusters run an authorizer that allows what no ACL names
    (:data:`~mirror_lib.testing.kafka_broker.OPEN_ACLS`), so ACL sync runs as on a secured
    cluster and a test can deny one operation on its own topic; their release is
    :func:`kafka_version`'s."""
    kind = broker_kind(kind)
    if brokers not in (1, 3):
        raise ConfigError("brokers", brokers, "1 (a single node) or 3 (three combined nodes)")
    if brokers > 1 and kind != "kafka":
        raise ConfigError("brokers", brokers, "1 on tansu: several brokers need Apache Kafka")
    if kind == "tansu":
        from mirror_lib.testing import embedded

        tansu = embedded.start_brokers(len(aliases), aliases, workdir)
        boots = {a: b.bootstrap_servers for a, b in zip(aliases, tansu, strict=True)}
        return Started(kind, boots, list(tansu), lambda: embedded.stop_brokers(tansu))
    if brokers > 1:
        from mirror_lib.testing import kafka_cluster

        started = kafka_cluster.start_clusters(aliases, workdir, kafka_cluster.COMBINED)
        by_alias = dict(zip(aliases, started, strict=True))

        def stop_all() -> None:
            for c in started:
                c.stop()

        return Started(
            kind,
            {a: c.bootstrap_servers for a, c in by_alias.items()},
            [n for c in started for n in c.nodes],
            stop_all,
            dict(by_alias),
            kafka_cluster.COMBINED.replication_factor,
        )
    from mirror_lib.testing import kafka_broker

    options = dataclasses.replace(kafka_broker.OPEN_ACLS, version=kafka_version())
    kafka = kafka_broker.start_kafka(aliases, workdir, options)
    boots = {a: b.bootstrap_servers for a, b in zip(aliases, kafka, strict=True)}
    return Started(kind, boots, list(kafka), lambda: kafka_broker.stop_kafka(kafka))
