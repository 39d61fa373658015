"""The Prometheus endpoint of `mirror run`: where it listens, what feeds it, start and stop.

``mirror.metrics.port`` / ``mirror run --metrics-port`` (0 or absent: off) and
``mirror.metrics.host`` / ``--metrics-host`` (default 127.0.0.1).
:func:`~mirror_lib.spark.runner.run_flows` checks the port before anything starts, starts the
endpoint before the queries and stops it when it returns.

Per replicated flow, a :class:`FlowFeed` on two driver threads tails the flow's metrics topic on
the target from where it ended when the run started (the events the copy tasks commit with the
data) and measures the lag per partition from the delivery ledger every few seconds, as
:meth:`~mirror_lib.spark.flow_runner.FlowRunner.progress` does. A scrape only reads what they
gathered (:class:`~mirror_lib.replication.metrics.prometheus.MirrorCollector`), so it never
waits on a cluster.
"""

from __future__ import annotations

import errno
import importlib.util
import logging
import socket
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_END, Consumer, KafkaException, TopicPartition

from mirror_lib.config.global_settings import GLOBAL_BY_KEY
from mirror_lib.errors import ConfigError, MirrorError
from mirror_lib.mm2.formats import TP
from mirror_lib.replication.context import FlowContext
from mirror_lib.replication.copy.ledger import LedgerView, flow_bounds
from mirror_lib.replication.translate import reader_conf

log = logging.getLogger(__name__)

LAG_INTERVAL_S = 5.0
PORT_KEY, HOST_KEY = "mirror.metrics.port", "mirror.metrics.host"


@dataclass(frozen=True)
class MetricsEndpoint:
    """Where the endpoint listens, and the key or flag each value came from (for errors)."""

    host: str
    port: int
    host_key: str = HOST_KEY
    port_key: str = PORT_KEY

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/metrics"

    def check_free(self) -> None:
        """Bind and release the address: a port in use is a ConfigError before anything starts."""
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ConfigError(
                self.host_key, self.host, f"an address of this machine to listen on ({exc})"
            ) from None
        family, kind, proto, _name, address = infos[0]
        with socket.socket(family, kind, proto) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server does
            try:
                sock.bind(address)
            except OSError as exc:
                raise self.bind_error(exc) from None

    def bind_error(self, exc: OSError) -> ConfigError:
        """The ConfigError of a failed bind: the port in use, or an address not of this host."""
        if exc.errno == errno.EADDRINUSE:
            return ConfigError(
                self.port_key,
                self.port,
                f"a free port on {self.host} for the metrics endpoint: it is in use "
                "(choose another, or 0 for no endpoint); nothing was started",
            )
        return ConfigError(
            self.host_key, self.host, f"an address of this machine to listen on ({exc.strerror})"
        )


def metrics_endpoint(
    props: Mapping[str, str], port: int | None = None, host: str | None = None
) -> MetricsEndpoint | None:
    """The validated endpoint from the flags (``port``/``host``) or the keys of the
    configuration's properties ``props``; None: off."""
    values = []
    for given, key, flag in (
        (port, PORT_KEY, "--metrics-port"),
        (host, HOST_KEY, "--metrics-host"),
    ):
        source = flag if given is not None else key
        raw = str(given) if given is not None else props.get(key)
        setting = GLOBAL_BY_KEY[key]
        values.append((setting.parse(source, setting.default if raw is None else raw), source))
    (port_value, port_key), (host_value, host_key) = values
    if port_value == 0:
        return None
    if importlib.util.find_spec("prometheus_client") is None:
        raise ConfigError(
            port_key,
            port_value,
            "0, or install the Prometheus client first: pip install 'mirror_lib[prometheus]'",
        )
    return MetricsEndpoint(host_value, port_value, host_key, port_key)


class FlowFeed:
    """One flow's :class:`~mirror_lib.replication.metrics.prometheus.FlowMetrics`, fed on two driver
    threads."""

    def __init__(self, ctx: FlowContext, lag_interval_s: float = LAG_INTERVAL_S) -> None:
        from mirror_lib.replication.metrics.prometheus import FlowMetrics

        self.ctx = ctx
        self.metrics = FlowMetrics(ctx.flow.name, ctx.source, ctx.target, ctx.remote_topic)
        self.lag_interval_s = lag_interval_s
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._start_offset = OFFSET_END

    def _conf(self) -> dict[str, Any]:
        conf = reader_conf(self.ctx)
        return {**conf, "enable.auto.commit": False, "isolation.level": "read_committed"}

    def _topic_exists(self, consumer: Consumer) -> bool:
        topic = self.ctx.metrics_topic
        md = consumer.list_topics(topic, timeout=10).topics.get(topic)
        return md is not None and md.error is None

    def start(self) -> None:
        """Note where the metrics topic ends now (what this run reports comes after), start."""
        consumer = Consumer(self._conf())
        try:
            if not self._topic_exists(consumer):
                self._start_offset = 0  # created by this run's planner: all of it is this run's
            else:
                tp = TopicPartition(self.ctx.metrics_topic, 0)
                self._start_offset = consumer.get_watermark_offsets(tp, timeout=10)[1]
        except KafkaException as exc:
            log.warning(
                "metrics of %s: end of %s unknown, reading from its end (%s)",
                self.ctx.label,
                self.ctx.metrics_topic,
                exc,
            )
        finally:
            consumer.close()
        for target in (self._tail, self._measure_lag):
            name = f"mirror-metrics-{target.__name__.strip('_')}-{self.ctx.flow.name}"
            thread = threading.Thread(target=target, name=name, daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=15)

    def _tail(self) -> None:
        consumer: Consumer | None = None
        try:
            while not self._stop.is_set():
                try:
                    if consumer is None:
                        consumer = Consumer(self._conf())
                        if not self._topic_exists(consumer):
                            consumer.close()
                            consumer = None
                            self._stop.wait(1.0)
                            continue
                        tp = TopicPartition(self.ctx.metrics_topic, 0, self._start_offset)
                        consumer.assign([tp])
                    for msg in consumer.consume(1000, 0.5):
                        if msg.error() is None:
                            self.metrics.apply_bytes(msg.value())
                except KafkaException as exc:  # librdkafka retries; say so and go on
                    log.warning("metrics of %s: reading events: %s", self.ctx.label, exc)
                    self._stop.wait(1.0)
        finally:
            if consumer is not None:
                consumer.close()

    def _measure_lag(self) -> None:
        ctx = self.ctx
        ledger = LedgerView(ctx)
        done: dict[TP, int] = {}
        try:
            admin = ctx.admin("source")
            while not self._stop.is_set():
                try:
                    bounds = flow_bounds(ctx, admin, timeout_s=10)
                    try:
                        done = ledger.positions(bounds, timeout_s=10)
                    except (MirrorError, KafkaException) as exc:
                        # the target is out: its lag grows from its last known position
                        log.info("metrics of %s: ledger not read now: %s", ctx.label, exc)
                    lag = {tp: max(hi - done.get(tp, lo), 0) for tp, (lo, hi) in bounds.items()}
                    self.metrics.set_lag(lag)
                except (MirrorError, KafkaException) as exc:  # e.g. an outage: keep the last
                    log.info("metrics of %s: lag not measured now: %s", ctx.label, exc)
                self._stop.wait(self.lag_interval_s)
        finally:
            ledger.close()


class MetricsExporter:
    """The HTTP endpoint and the feeds behind it; :meth:`stop` ends both."""

    def __init__(self, endpoint: MetricsEndpoint, feeds: Sequence[FlowFeed]) -> None:
        self.endpoint = endpoint
        self.feeds = list(feeds)
        self.server: Any = None
        self.thread: threading.Thread | None = None

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None
        if self.thread is not None:
            self.thread.join(timeout=10)
        for feed in self.feeds:
            feed.stop()


def start_exporter(
    endpoint: MetricsEndpoint,
    runners: Sequence[Any],
    jobs: Sequence[Any],
    report: Callable[[str], Any] = print,
    outages: Callable[[], list[dict[str, Any]]] = list,
) -> MetricsExporter:
    """Feeds for the ``runners``' flows, the collector and the HTTP server on ``endpoint``;
    ``outages`` tells the outages the run waits through now."""
    # lazy: optional extra "prometheus"
    from prometheus_client import CollectorRegistry, start_http_server

    from mirror_lib.replication.metrics.prometheus import MirrorCollector

    contexts = [c for r in runners for c in r.group.contexts]  # each target of a fan-out
    exporter = MetricsExporter(endpoint, [FlowFeed(c) for c in contexts])
    try:
        for feed in exporter.feeds:
            feed.start()
        queries = [
            (c.flow.name, r.job, lambda r=r: r.query is not None and r.query.isActive)
            for r in runners
            for c in r.group.contexts
        ]
        registry = CollectorRegistry()
        collector = MirrorCollector(
            [f.metrics for f in exporter.feeds], jobs, queries, outages=outages
        )
        registry.register(collector)
        try:
            exporter.server, exporter.thread = start_http_server(
                endpoint.port, addr=endpoint.host, registry=registry
            )
        except OSError as exc:
            raise endpoint.bind_error(exc) from None
    except BaseException:
        exporter.stop()
        raise
    report(f"serving Prometheus metrics at {endpoint.url}")
    return exporter
