"""The flows one replication query serves: one flow ``A->B``, or a fan-out group ``A->B,C``.

A group reads its source once and writes to every target (:mod:`mirror_lib.config.fanout`); each
member keeps its own :class:`FlowContext` (remote topics, ledger, transactional ids, offset
syncs, metrics). Like a FlowContext, a group travels to Spark's processes as data source options.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

from mirror_lib.config.fanout import group_name
from mirror_lib.config.model import MirrorConfig
from mirror_lib.config.parse import parse_config
from mirror_lib.config.settings import FlowSettings
from mirror_lib.errors import ConfigError
from mirror_lib.replication.context import SECRET_OPTION, FlowContext


def split_group_name(name: str) -> list[str]:
    """``A->B,C`` -> ``["A->B", "A->C"]``; a flow name is a group of one."""
    source, sep, targets = name.replace(" ", "").partition("->")
    if not sep or not targets:
        raise ConfigError("--flow", name, "a flow A->B or a fan-out group A->B,C")
    return [f"{source}->{t}" for t in targets.split(",")]


@dataclass(frozen=True)
class ReadGroup:
    """Flows from one source read together; ``contexts[0]`` leads (names, messages)."""

    contexts: tuple[FlowContext, ...]

    @classmethod
    def create(cls, config: MirrorConfig, name: str) -> ReadGroup:
        """The group ``A->B,C`` (or the single flow ``A->B``) of ``config``."""
        return cls(tuple(FlowContext.create(config, n) for n in split_group_name(name)))

    @classmethod
    def from_options(cls, options: dict[str, str]) -> ReadGroup:
        """Rebuild from data source options written by :meth:`to_options`."""
        props = json.loads(options["properties"])
        props.update(json.loads(options.get(SECRET_OPTION, "{}")))
        config = parse_config(props, origin=options.get("origin", "<options>"))
        return cls.create(config, options["flow"])

    def to_options(self) -> dict[str, str]:
        """Spark data source options carrying this group (see :meth:`FlowContext.to_options`)."""
        return {**self.lead.to_options(), "flow": self.name}

    def __iter__(self) -> Iterator[FlowContext]:
        return iter(self.contexts)

    @property
    def lead(self) -> FlowContext:
        return self.contexts[0]

    @property
    def name(self) -> str:
        return group_name(c.flow for c in self.contexts)

    @property
    def fanout(self) -> bool:
        """True for a group of several targets (failures of one target must spare the others)."""
        return len(self.contexts) > 1

    @property
    def settings(self) -> FlowSettings:
        """Settings of the shared read (the members agree on them, see config.fanout.SHARED)."""
        return self.lead.settings

    def should_replicate(self, topic: str) -> bool:
        """True when any member replicates ``topic`` (the read covers the union)."""
        return any(c.should_replicate(topic) for c in self.contexts)

    def context(self, flow_name: str) -> FlowContext:
        for c in self.contexts:
            if c.flow.name == flow_name:
                return c
        raise ConfigError("flow", flow_name, "one of " + ", ".join(self.flow_names))

    @property
    def flow_names(self) -> list[str]:
        return [c.flow.name for c in self.contexts]
