"""What changes when mirror_lib runs on Databricks: durable state, secrets, bundle paths.

* :func:`check_state_dir`: on a Databricks cluster (``DATABRICKS_RUNTIME_VERSION`` is set) a local
  ``mirror.state.dir`` is the driver's disk, lost with the cluster, so each run would start without
  its checkpoints; it is refused, naming a ``/Volumes/...`` path instead. A URI is refused
  anywhere: the state is written through the file system.
* :func:`resolve_secrets_on_driver`: ``${secret:scope/key}`` references are read once on the driver
  (Databricks SDK) and travel to the executors inside the query options, whose name Spark redacts.
  That is how serverless jobs, which have no ``spark_env_vars``, get their Kafka passwords.
* :func:`load_job_config`: the config of a job task or notebook with the bundle's overrides
  (``tables_schema`` = catalog.schema, ``state_dir``) and both checks above.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable, Mapping

from mirror_lib.config.model import MirrorConfig
from mirror_lib.config.parse import load_config, parse_config
from mirror_lib.errors import ConfigError

#: Prefixes of state directories that outlive a Databricks cluster.
DURABLE_PREFIXES = ("/Volumes/", "/dbfs/")
_URI = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)  # s3://, abfss://, gs://, ...
_SECRET_REF = re.compile(r"\$\{secret:([^/}]+)/([^}]+)\}")
EXAMPLE_VOLUME = "/Volumes/main/mirror/state"


def on_databricks(env: Mapping[str, str] | None = None) -> bool:
    """True on a Databricks cluster or serverless compute (its runtime sets the variable)."""
    return bool((os.environ if env is None else env).get("DATABRICKS_RUNTIME_VERSION"))


def check_state_dir(state_dir: str, env: Mapping[str, str] | None = None) -> None:
    """Refuse a URI anywhere, and a state dir on the driver's local disk on Databricks.

    The state is written as files (markers, positions, saved segments, delta-rs tables) and
    given to Spark as checkpoint paths, all through the file system: a URI such as
    ``s3://bucket/x`` would become a local folder named ``s3:``, lost with the cluster.
    """
    dbfs = state_dir.lower().startswith("dbfs:")
    if dbfs or _URI.match(state_dir):
        mounted = f" (or /dbfs/{state_dir[5:].lstrip('/')})" if dbfs else ""
        raise ConfigError(
            "mirror.state.dir",
            state_dir,
            "a folder path, not a URI: the state is written as files and Spark checkpoint "
            f"paths; use a mounted volume such as {EXAMPLE_VOLUME}{mounted}",
        )
    if not on_databricks(env):
        return
    if state_dir.startswith(DURABLE_PREFIXES):
        return
    raise ConfigError(
        "mirror.state.dir",
        state_dir,
        f"a Unity Catalog volume path such as {EXAMPLE_VOLUME} on Databricks: a local path is "
        "the driver's disk, lost with the cluster, and each run would start without its "
        "checkpoints (the bundle passes --state-dir /Volumes/<catalog>/<schema>/state)",
    )


def sdk_secret_lookup() -> Callable[[str, str], str]:
    """``(scope, key) -> value`` through the Databricks SDK (authenticates from the runtime)."""
    try:
        from databricks.sdk import WorkspaceClient
    except ImportError as exc:  # pragma: no cover - the SDK ships with every Databricks runtime
        raise ConfigError(
            "${secret:scope/key}", "databricks-sdk", "the databricks-sdk package installed"
        ) from exc
    client = WorkspaceClient()

    def lookup(scope: str, key: str) -> str:
        value = client.secrets.get_secret(scope=scope, key=key).value or ""
        return base64.b64decode(value).decode("utf-8")

    return lookup


def resolve_secrets_on_driver(
    config: MirrorConfig, lookup: Callable[[str, str], str] | None = None
) -> MirrorConfig:
    """``config`` with every ``${secret:scope/key}`` reference replaced by its value.

    Runs on the driver only. Values never appear in ``repr``/logs (the config redacts them) and
    reach executors in an option Spark redacts (see
    :meth:`~mirror_lib.replication.context.FlowContext.to_options`).
    """
    props = dict(config.properties)
    refs = {k: v for k, v in props.items() if _SECRET_REF.search(v)}
    if not refs:
        return config
    get = lookup or sdk_secret_lookup()
    for key, value in refs.items():
        props[key] = _SECRET_REF.sub(lambda m: get(m[1], m[2]), value)
    return parse_config(props, origin=config.origin)


def load_job_config(
    config_path: str,
    tables_schema: str = "",
    state_dir: str = "",
    lookup: Callable[[str, str], str] | None = None,
) -> MirrorConfig:
    """The config of a bundle task or notebook: one catalog.schema and state dir everywhere.

    An empty ``config_path`` is the mm2.properties in the config volume of ``tables_schema``.
    """
    if not config_path.strip():
        if not tables_schema.strip():
            raise ConfigError(
                "config_path",
                config_path,
                "an mm2.properties path, or tables_schema (catalog.schema of your deployment, "
                "e.g. main.dev_<you>_mirror) whose config volume holds it",
            )
        config_path = volume_path(tables_schema, "config", "mm2.properties")
    if config_path.startswith("/Volumes/") and not os.path.isfile(config_path):
        raise ConfigError(
            "config_path",
            config_path,
            "an mm2.properties file there: the bundle creates the config volume empty; copy it "
            f"with `databricks fs cp mm2.properties dbfs:{config_path}`, then run the job again",
        )
    overrides = {}
    if tables_schema.strip():
        overrides["mirror.tables.schema"] = tables_schema.strip()
    if state_dir.strip():
        overrides["mirror.state.dir"] = state_dir.strip()
    config = load_config(config_path, **overrides)
    check_state_dir(config.state_dir)
    if lookup is None and not on_databricks():
        return config  # references stay for the clients (env vars, files)
    return resolve_secrets_on_driver(config, lookup)


def volume_path(tables_schema: str, volume: str, file: str = "") -> str:
    """``/Volumes/<catalog>/<schema>/<volume>[/<file>]`` of a ``catalog.schema`` name."""
    parts = tables_schema.strip().split(".")
    if len(parts) != 2 or not all(parts):
        raise ConfigError("tables_schema", tables_schema, "catalog.schema, e.g. main.mirror")
    return "/".join(["", "Volumes", *parts, volume, *([file] if file else [])])


_LOCAL = {"config": "./mirror-state/mm2.properties", "state": "./mirror-state", "schema": ""}


def default_path(kind: str, local: str | None = None, env: Mapping[str, str] | None = None) -> str:
    """Widget default of ``config`` (mm2.properties), ``state`` (dir), ``schema`` (catalog.schema).

    Elsewhere ``local`` if given, else ``./mirror-state`` (and "" for the schema: the config's).
    On Databricks none: a notebook does not know which deployment it belongs to (a dev one's
    schema is ``dev_<you>_mirror``, the catalog is a bundle variable), and a guess could be
    prod's, whose config a dev notebook would then overwrite. Jobs pass every one.
    """
    if kind not in _LOCAL:
        raise ConfigError("default_path kind", kind, "config, state or schema")
    if on_databricks(env):
        return ""
    return _LOCAL[kind] if local is None else local
