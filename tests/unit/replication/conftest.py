"""Fixtures shared by the unit tests of several wings of replication/."""

from __future__ import annotations

import pytest

from mirror_lib.config.parse import parse_config
from mirror_lib.replication.context import FlowContext

#: A flow A->B whose source MirrorMaker 2 names ``primary`` (a top-level source.cluster.alias).
ALIASED = {
    "clusters": "A, B",
    "A.bootstrap.servers": "127.0.0.1:1",
    "B.bootstrap.servers": "127.0.0.1:2",
    "A->B.enabled": "true",
    "source.cluster.alias": "primary",
}


@pytest.fixture
def aliased_ctx() -> FlowContext:
    """The context of flow A->B of :data:`ALIASED`."""
    config = parse_config(ALIASED)
    return FlowContext(config, config.flow("A->B"))
