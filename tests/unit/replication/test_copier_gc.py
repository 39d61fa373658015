"""The copy loop runs with Python's cyclic garbage collector paused (issue 11: CPU per record)."""

from __future__ import annotations

import gc

import pytest

from mirror_lib.replication.copy.copier import CopyResult, SliceCopy, cyclic_gc_paused
from mirror_lib.replication.copy.fanout_targets import Targets


@pytest.fixture(autouse=True)
def _gc_enabled_afterwards():
    yield
    gc.enable()


def test_the_collector_is_paused_inside_and_enabled_again_after():
    assert gc.isenabled()
    with cyclic_gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_the_collector_is_enabled_again_after_an_error():
    with pytest.raises(RuntimeError), cyclic_gc_paused():
        raise RuntimeError("the loop failed")
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off():
    gc.disable()
    with cyclic_gc_paused():
        pass
    assert not gc.isenabled()


def test_slice_copy_runs_its_loop_with_the_collector_paused(monkeypatch):
    seen: list[bool] = []
    copy = SliceCopy.__new__(SliceCopy)  # no Kafka: only run()'s own steps are exercised
    copy.duration_s, copy.until = 1.0, {}
    copy.result = CopyResult(0)
    copy.targets = Targets([], copy.until, copy.result)
    monkeypatch.setattr(SliceCopy, "_start", lambda self: seen.append(gc.isenabled()))
    monkeypatch.setattr(SliceCopy, "_loop", lambda self, deadline: seen.append(gc.isenabled()))
    copy.run()
    assert seen == [True, False]
    assert gc.isenabled()
