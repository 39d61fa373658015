"""Building and saving a flow config from notebook inputs (no brokers: check=False)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mirror_lib.app.configure import configure_flow, flow_properties
from mirror_lib.config.parse import load_config
from mirror_lib.config.properties import format_properties, parse_properties
from mirror_lib.errors import ConfigError

KEYS = st.text(min_size=1).filter(lambda k: k.strip() == k and k[0] not in "#!")


@given(st.dictionaries(KEYS, st.text(), max_size=8))
def test_formatted_properties_read_back_unchanged(props):
    assert parse_properties(format_properties(props, header="a\nb")) == props


def test_flow_properties_round_trip_through_a_saved_file(tmp_path):
    props = flow_properties(
        source_alias="east",
        source_bootstrap="127.0.0.1:1",
        target_alias="west",
        target_bootstrap="127.0.0.1:2",
        topics="orders, payments-.*",
        topics_exclude="payments-test",
        policy="identity",
        sync_group_offsets=False,
        state_dir=str(tmp_path / "state"),
        replication_factor=1,
        extra={"east.security.protocol": "SASL_SSL", "east.sasl.password": "${env:PW}"},
    )
    preview = configure_flow(props, tmp_path / "conf" / "mm2.properties", check=False)
    assert preview.flow == "east->west"
    assert preview.saved_to == (tmp_path / "conf" / "mm2.properties").resolve()
    text = preview.saved_to.read_text()
    assert text.startswith("# written by configure_flow at ")
    assert "${env:PW}" in text  # references are saved, never their values
    config = load_config(preview.saved_to)
    flow = config.flow("east->west")
    assert flow.policy().format_remote_topic("east", "orders") == "orders"
    assert flow.settings.sync_group_offsets is False
    assert flow.settings.topics_exclude == ("payments-test",)


def test_bad_inputs_name_the_field_and_save_nothing(tmp_path):
    with pytest.raises(ConfigError, match="policy = 'mirror': expected one of default, identity"):
        flow_properties(
            source_alias="A",
            source_bootstrap="x:1",
            target_alias="B",
            target_bootstrap="y:2",
            policy="mirror",
        )
    props = flow_properties(
        source_alias="A", source_bootstrap="x:1", target_alias="B", target_bootstrap="y:2"
    )
    props["A->B.topics"] = "orders["
    with pytest.raises(ConfigError, match=r"A->B\.topics"):
        configure_flow(props, tmp_path / "mm2.properties", check=False)
    assert not (tmp_path / "mm2.properties").exists()
