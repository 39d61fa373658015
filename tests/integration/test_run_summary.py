"""`mirror run --once --json`: stdout is one JSON summary of what each flow copied, how long it
took and how it ended; everything else the run says goes to stderr."""

from __future__ import annotations

import json

from mirror_lib.testing.kafka_io import create_topic, produce_exact
from tests.helpers.mirror_cli import run_mirror
from tests.integration.conftest import flow_properties, write_properties


def test_once_json_says_what_each_flow_copied(brokers, tmp_path, unique_name, subprocess_env):
    create_topic(brokers.source, unique_name, 2)
    produce_exact(
        brokers.source, unique_name, [{"value": f"v{i}", "partition": i % 2} for i in range(30)]
    )
    props = flow_properties(brokers.source, brokers.target, tmp_path / "state")
    config = write_properties(tmp_path / "mm2.properties", {**props, "A->B.topics": unique_name})
    first = run_mirror(config, subprocess_env, "--once", "--json", timeout_s=300)
    assert first.returncode == 0, first.stderr[-3000:]
    summary = json.loads(first.stdout)  # nothing but the summary on stdout
    assert summary["outcome"] == "caught up" and summary["error"] is None
    assert summary["config"] == str(config) and summary["seconds"] > 0
    flow = summary["flows"]["A->B"]
    assert flow["topics"][unique_name] == {
        "remote_topic": f"A.{unique_name}",
        "partitions": 2,
        "offsets": 30,
    }
    # heartbeats topics are copied whatever the filter, as MM2 does; other tests write them
    assert set(flow["topics"]) - {unique_name} <= {"heartbeats"}, flow["topics"]
    assert flow["offsets"] == sum(t["offsets"] for t in flow["topics"].values())
    assert "caught up with" in first.stderr  # the run's own lines
    again = run_mirror(config, subprocess_env, "--once", "--json", timeout_s=300)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["flows"]["A->B"]["topics"][unique_name]["offsets"] == 0


def test_once_json_of_a_run_that_cannot_start_says_why(brokers, tmp_path, subprocess_env):
    props = flow_properties(brokers.source, "127.0.0.1:1", tmp_path / "state")
    config = write_properties(tmp_path / "mm2.properties", props)
    out = run_mirror(config, subprocess_env, "--once", "--json", timeout_s=120)
    assert out.returncode == 1
    summary = json.loads(out.stdout)
    assert summary["outcome"] == "failed" and summary["flows"] == {}
    assert summary["error"].startswith("cannot reach cluster B (target of A->B)")
