"""A stopped query's killed tasks are not logged as errors, and only while it is stopped."""

from __future__ import annotations

import pytest

from mirror_lib.spark.progress import KILL_LOGGERS, quiet_kills

pytestmark = pytest.mark.integration


def test_kill_loggers_are_off_while_stopping_then_follow_the_root_level_again(spark):
    manager = spark.sparkContext._jvm.org.apache.logging.log4j.LogManager

    def levels() -> set[str]:
        return {str(manager.getLogger(name).getLevel()) for name in KILL_LOGGERS}

    assert levels() == {"ERROR"}  # the local session's level (session.py)
    with quiet_kills(spark):
        assert levels() == {"OFF"}
    try:
        spark.sparkContext.setLogLevel("WARN")
        assert levels() == {"WARN"}  # inherited again, not pinned to what it was
    finally:
        spark.sparkContext.setLogLevel("ERROR")
