"""Regenerate ``mirror_lib/config/librdkafka_conf.py`` from the librdkafka that confluent-kafka
ships.

librdkafka prints its own CONFIGURATION.md table with ``rd_kafka_conf_properties_show``; we call it
through ctypes on the bundled shared library, so the list is exactly what the installed client
accepts. Usage: ``python -m tests.tools.librdkafka_dump > mirror_lib/config/librdkafka_conf.py``
(then
``ruff format`` it).
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import tempfile

import confluent_kafka


def configuration_table() -> str:
    """librdkafka's CONFIGURATION.md text, from the library confluent-kafka loads."""
    libs = os.path.join(os.path.dirname(confluent_kafka.__file__) + ".libs", "librdkafka*.so*")
    found = glob.glob(libs)
    if not found:
        raise RuntimeError(f"no bundled librdkafka at {libs}")
    rd = ctypes.CDLL(found[0])
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    rd.rd_kafka_conf_properties_show.argtypes = [ctypes.c_void_p]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "conf.md")
        handle = libc.fopen(path.encode(), b"w")
        rd.rd_kafka_conf_properties_show(handle)
        libc.fclose(handle)
        with open(path, encoding="utf-8") as f:
            return f.read()


def parse_table(text: str) -> dict[str, tuple[str, str, str]]:
    """name -> (roles C/P/*, type, range) of every property settable from a string."""
    props: dict[str, tuple[str, str, str]] = {}
    for line in text.splitlines():
        if "|" not in line or line.startswith(("Property", "---")):
            continue
        name, roles, rng, _default, _importance, desc = (p.strip() for p in line.split("|", 5))
        kind = desc.rsplit("*Type: ", 1)[-1].rstrip("*").strip()
        if kind == "see dedicated API":
            continue
        if "**DEPRECATED**" in desc:
            kind = "deprecated " + kind
        props.setdefault(name, (roles, kind, rng))
    return props


def _version() -> str:
    version = confluent_kafka.version()
    return version if isinstance(version, str) else version[0]


def render(props: dict[str, tuple[str, str, str]]) -> str:
    """The Python source of ``mirror_lib/config/librdkafka_conf.py``."""
    lines = [
        "# ruff: noqa: E501",
        '"""Every librdkafka configuration property settable from a string (generated data).',
        "",
        f"librdkafka {confluent_kafka.libversion()[0]}, the one confluent-kafka "
        f"{_version()} ships. Regenerate with",
        "``python -m tests.tools.librdkafka_dump > mirror_lib/config/librdkafka_conf.py``, then",
        "``ruff format`` it.",
        "name -> (roles: C consumer, P producer, * both; type; range or allowed values).",
        '"""',
        "",
        f'LIBRDKAFKA_VERSION = "{confluent_kafka.libversion()[0]}"',
        "",
        "PROPERTIES: dict[str, tuple[str, str, str]] = {",
    ]
    lines += [f"    {name!r}: {value!r}," for name, value in sorted(props.items())]
    lines.append("}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(render(parse_table(configuration_table())))
